"""Best-of-K selectors. Each maps a label-free :class:`~calver.infer.firewall.SelectorView` to a
:class:`Selection`: one candidate index (or -1 with an ``answer`` built outside the pool, for
extract-then-solve) plus one score per candidate, stored beside the pool.

``SELECTORS`` holds one ready instance per name. The neural ones (``confidence``, ``judge``,
``reward_model``, ``prm``) are instances without a model: they re-select from scores stored in the
pool by an earlier run (so tables regenerate on CPU without a forward pass) and raise
:class:`SelectorError` when none are stored. :func:`build_selector` makes one with a model handle.

Label-reading audit rules (CALVER with best/worst tie-breaking) are not selectors: see
:func:`calver.evaluation.grading.calver_audit`, which takes the labels explicitly.
"""

from __future__ import annotations

from typing import Any

from calver.infer.selectors.base import Selection, Selector, SelectorError, earliest_max, plurality
from calver.infer.selectors.neural import ConfidenceSelector, JudgeSelector, PRMSelector, RewardModelSelector
from calver.infer.selectors.scorers import PRMScorer, load_prm
from calver.infer.selectors.symbolic import (
    CalverSelector,
    ExtractSolveSelector,
    FirstSelector,
    MedoidSelector,
    PluralitySelector,
    StructureSelector,
    candidate_scores,
    structure_bits,
)
from calver.verifier.verdict import answer_key

SELECTORS: dict[str, Selector] = {
    s.name: s
    for s in (
        FirstSelector(),
        PluralitySelector(),
        MedoidSelector(),
        StructureSelector(),
        CalverSelector(),
        ExtractSolveSelector(),
        ConfidenceSelector(),
        JudgeSelector(),
        RewardModelSelector(),
        RewardModelSelector(with_problem=False),
        PRMSelector(),
    )
}
NON_NEURAL: tuple[str, ...] = tuple(n for n, s in SELECTORS.items() if not s.neural)
NEURAL: tuple[str, ...] = tuple(n for n, s in SELECTORS.items() if s.neural)


def build_selector(name: str, **handles: Any) -> Selector:
    """A selector by name; neural ones take their model handle (``sampler=``, ``model_path=``, ``scorer=``).

    Without a handle a neural selector works from the scores stored in the pool.
    """
    if name not in SELECTORS:
        raise SelectorError(f"unknown selector {name!r}; known: {', '.join(SELECTORS)}")
    if not handles:
        return SELECTORS[name]
    if name == "reward_model_trace":
        handles.setdefault("with_problem", False)
    return type(SELECTORS[name])(**handles)


__all__ = [
    "NEURAL",
    "NON_NEURAL",
    "SELECTORS",
    "CalverSelector",
    "ConfidenceSelector",
    "ExtractSolveSelector",
    "FirstSelector",
    "JudgeSelector",
    "MedoidSelector",
    "PRMScorer",
    "PRMSelector",
    "PluralitySelector",
    "RewardModelSelector",
    "Selection",
    "Selector",
    "SelectorError",
    "StructureSelector",
    "answer_key",
    "build_selector",
    "candidate_scores",
    "earliest_max",
    "load_prm",
    "plurality",
    "structure_bits",
]
