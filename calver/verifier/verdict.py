"""The verifier's verdict on one trace, and a row that has none: the one type every seam carries.

:func:`calver.verifier.score` returns a :class:`Verdict`; the score table stores its :meth:`Verdict.to_dict`
form and hands back equal verdicts (without the parse); selector views carry them (``SelectorView.verdicts``);
the reward core (:mod:`calver.reward`) turns them into rewards and every trainer adapter into its own wire
form. A row the verifier could not judge (no or malformed problem, an unreadable completion, a scorer over
its time budget) is an :class:`Unscorable` with its reason, never a verdict of zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Hashable, Union

from calver.verifier.contract import SLOTS, SlotParse

BIT_KEYS: tuple[str, ...] = tuple(s.lower() for s in SLOTS)  # graph, query, strategy, derivation, result, answer


@dataclass
class Verdict:
    """Six 0/1 bits in slot order, the reason per failed bit, the parsed ANSWER (None: it did not parse),
    the task, and whether the trace was judged on the problem's source (``grounded``: False when a
    constructed-mode problem carries no source, so the bits measure consistency with the trace's own
    GRAPH; rewards refuse such problems unless asked).

    ``slots``, ``trace_graph`` and ``g_ver`` are what the scorer parsed (the six slots, the parsed GRAPH
    slot, what b3-b6 were judged on), so audits and feedback need not re-split the text; they are not part
    of equality or of the stored form, and are None on a verdict read back from storage."""

    bits: list[int]
    reasons: dict[str, str] = field(default_factory=dict)  # slot -> why its bit failed
    answer: Any = None
    task: str = ""
    grounded: bool = True
    slots: SlotParse | None = field(default=None, compare=False, repr=False)
    trace_graph: Any = field(default=None, compare=False, repr=False)
    g_ver: Any = field(default=None, compare=False, repr=False)

    @property
    def total(self) -> int:
        return sum(self.bits)

    @property
    def max_score(self) -> bool:
        return self.total == len(SLOTS)

    @property
    def bit_map(self) -> dict[str, int]:
        """``{"graph": b1, ..., "answer": b6}``."""
        return dict(zip(BIT_KEYS, (int(b) for b in self.bits)))

    @cached_property
    def answer_key(self) -> Hashable | None:
        """The canonical, hashable key the answer votes with (:func:`answer_key`)."""
        return answer_key(self.task, self.answer)

    def to_dict(self) -> dict[str, Any]:
        """The stored / wire form (score table rows, ``calver verify --json``)."""
        ans = self.answer
        if isinstance(ans, (set, frozenset)):
            ans = sorted(ans)
        elif isinstance(ans, tuple):
            ans = list(ans)
        return {"bits": list(self.bits), "total": self.total, "reasons": dict(self.reasons), "answer": ans,
                "grounded": self.grounded}

    def stored(self) -> Verdict:
        """This verdict without the parse (what a verdict read back from storage equals)."""
        return Verdict(list(self.bits), dict(self.reasons), self.answer, self.task, self.grounded)


@dataclass(frozen=True)
class Unscorable:
    """A row without a verdict, and why (``timeout``, ``worker crashed``, ``malformed problem: ...``)."""

    reason: str


RowResult = Union[Verdict, Unscorable]


def answer_key(task: str, answer: Any) -> Hashable | None:
    """The canonical, hashable key ``answer`` votes with in plurality and CALVER ties (None: unparsed, or
    the family cannot key it)."""
    if answer is None:
        return None
    from calver.verifier.registry import get_family

    try:
        key = get_family(task).canonical_answer_key(answer)
        hash(key)
    except Exception:  # noqa: BLE001 - a family's canonicalizer is plugin code: any failure reads as unparsed
        return None
    return key


def is_scored(result: Verdict | Unscorable | None) -> bool:
    return isinstance(result, Verdict)


__all__ = ["BIT_KEYS", "RowResult", "Unscorable", "Verdict", "answer_key", "is_scored"]
