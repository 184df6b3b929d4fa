"""The work one exact check may do, and the verdict past it: a leaf module, so the primitives, the
separator search, the exact ATE arithmetic and every family can import them without a circle through
:mod:`calver.verifier.family`."""

from __future__ import annotations

from calver.verifier.graph import GraphError


class TooLargeToGrade(GraphError):
    """An exact check whose search would exceed its work limit: it fails closed with this reason
    (minimal/maximal subset searches, longest-path searches) rather than guess."""


# A work unit is about one node expanded by a bitmask search (0.2-0.45 µs of CPU): the limit keeps
# one exact check under about 0.45 s (benchmarks/worst_case_bench.py).
WORK_LIMIT = 1_000_000


class WorkBudget:
    """The work one exact check may do, counted in work units rather than wall-clock time, so the
    same problem and answer always get the same verdict. ``spend`` raises :class:`TooLargeToGrade`
    once more than ``limit`` units are spent."""

    __slots__ = ("limit", "left", "what")

    def __init__(self, limit: int | None = None, what: str = "the exact check"):
        self.limit = WORK_LIMIT if limit is None else limit
        self.left = self.limit
        self.what = what

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise TooLargeToGrade(f"{self.what} needs more than {self.limit:,} work units")


__all__ = ["WORK_LIMIT", "TooLargeToGrade", "WorkBudget"]
