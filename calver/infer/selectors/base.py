"""Selector base class and the selection rules shared by every caller.

The rules here are the single implementation of each selection rule over per-candidate facts:
:func:`earliest_max` (CALVER and every scalar selector), :func:`plurality` (exact plurality) and
:func:`answer_key` (the canonical answer a candidate votes with). Selectors apply them to a
:class:`~calver.infer.firewall.SelectorView`; ``calver.evaluation`` applies the same
functions to the per-candidate facts of a frozen pool.

Unparsed answers (one rule, used everywhere): a candidate whose ANSWER slot does not parse, or whose
answer the task family cannot canonicalize (it raises, or gives an unhashable key), has answer key
None. Such a candidate casts no vote and carries no answer mass; a pool with no parsed answer at
all selects its first candidate.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Hashable, NamedTuple, Sequence

from calver.infer.firewall import SelectorView


class SelectorError(RuntimeError):
    """A selector cannot run (no model and no stored scores, unknown name ...)."""


class Selection(NamedTuple):
    """One selector decision for one unit: ``(index, scores, answer)``. ``index == -1`` means
    ``answer`` comes from outside the pool (extract-then-solve); otherwise ``answer`` is None."""

    index: int
    scores: tuple[float, ...]
    answer: str | None = None

    def to_row(self, view: SelectorView) -> dict[str, Any]:
        row: dict[str, Any] = {
            "problem_id": view.problem_id,
            "seed": view.seed,
            "index": self.index,
            "scores": [None if (isinstance(s, float) and math.isnan(s)) else s for s in self.scores],
        }
        if self.index < 0 or self.answer is not None:
            row["answer"] = self.answer
        return row


def earliest_max(scores: Sequence[float]) -> int:
    """Index of the earliest maximum; NaN (a missing score) never wins unless all are NaN (then 0)."""
    best, best_i = -math.inf, -1
    for i, s in enumerate(scores):
        if s is None or (isinstance(s, float) and math.isnan(s)):
            continue
        if s > best:
            best, best_i = s, i
    return best_i if best_i >= 0 else 0


def plurality(keys: Sequence[Hashable | None]) -> tuple[int, tuple[float, ...]]:
    """Exact plurality over canonical answer keys: ``(index, scores)``.

    A candidate's score is its answer's vote count (0 for an unparsed answer, which casts no vote).
    Ties go to the answer whose first occurrence is earliest; the index returned is that first
    occurrence. With no parsed answer at all the first candidate (index 0) is returned.
    """
    counts = Counter(k for k in keys if k is not None)
    scores = tuple(float(counts[k]) if k is not None else 0.0 for k in keys)
    if not counts:
        return 0, scores
    return earliest_max(scores), scores  # the earliest candidate of a top answer = its first occurrence


class Selector:
    """``select(view) -> Selection``; ``select_many`` lets neural selectors batch forward passes."""

    name: str = ""
    neural: bool = False

    def select(self, view: SelectorView) -> Selection:
        raise NotImplementedError

    def select_many(self, views: Sequence[SelectorView]) -> list[Selection]:
        return [self.select(v) for v in views]

    def __call__(self, view: SelectorView) -> Selection:
        return self.select(view)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ScalarSelector(Selector):
    """A selector that scores each candidate and takes the earliest maximum."""

    def candidate_scores(self, view: SelectorView) -> list[float]:
        raise NotImplementedError

    def select(self, view: SelectorView) -> Selection:
        s = [float(x) for x in self.candidate_scores(view)]
        return Selection(earliest_max(s), tuple(s))
