"""`TraceStyle`: how a dataset's SFT rows are written (their system message and their canonical traces).

One value travels from ``calver gen`` (:meth:`calver.data_gen.gen_config.RunConfig.trace_style`) through
:func:`~calver.data_gen.export.export_dataset` into the manifest, and back out of it where a dataset is
rewritten (``calver contamination --clean_out``), so every stage writes the rows the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from calver.data_gen.prompts import GRAPH_SLOTS, SYSTEMS
from calver.data_gen.rationales import STYLES as RATIONALE_STYLES

ANSWER_CHOICES = ("random", "rule")  # a canonical trace's answer: a validity-class draw, or the rule's
RATIONALES = ("none",) + RATIONALE_STYLES

# the manifest key of each field (the names manifests have always used)
_MANIFEST_KEYS = {"answers": "sft_answers", "witnesses": "sft_witnesses", "rationale": "sft_rationale",
                  "graph_slot": "sft_graph_slot", "system": "system_prompt"}


@dataclass(frozen=True)
class TraceStyle:
    """``answers``: a validity-class draw (``random``) or the family's rule (``rule``,
    :func:`~calver.data_gen.generators.canonical_answer`); ``witnesses``: the most witness paths a DERIVATION
    lists (None: the family's number); ``rationale``: ``none``, or the rule written before STRATEGY
    (``rule`` / ``scan``, :mod:`calver.data_gen.rationales`); ``graph_slot``: how the GRAPH slot writes the
    graph (:data:`~calver.data_gen.prompts.GRAPH_SLOTS`); ``system``: the system message
    (:data:`~calver.data_gen.prompts.SYSTEMS`). Bad values raise ValueError naming the field."""

    answers: str = "random"
    witnesses: int | None = None
    rationale: str = "none"
    graph_slot: str = "arrows"
    system: str = "contract"

    def __post_init__(self) -> None:
        for name, allowed in (("answers", ANSWER_CHOICES), ("rationale", RATIONALES), ("graph_slot", GRAPH_SLOTS),
                              ("system", SYSTEMS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"trace style: {name} must be one of {allowed}, got {getattr(self, name)!r}")
        w = self.witnesses
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise ValueError(f"trace style: witnesses must be None or an integer >= 0, got {w!r}")

    def manifest(self) -> dict[str, Any]:
        """The style as a dataset manifest records it."""
        return {key: getattr(self, name) for name, key in _MANIFEST_KEYS.items()}

    @classmethod
    def from_manifest(cls, meta: Mapping[str, Any]) -> TraceStyle:
        """The style a dataset manifest records (a missing key: the default)."""
        return cls(**{name: meta[key] for name, key in _MANIFEST_KEYS.items() if meta.get(key) is not None})
