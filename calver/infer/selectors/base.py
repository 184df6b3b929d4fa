"""Selector base class and the shared earliest-maximum rule."""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

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
