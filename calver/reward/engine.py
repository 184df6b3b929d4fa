"""The one scoring loop every reward adapter runs: completions plus their problem cells in, one
:class:`~calver.verifier.Verdict` or :class:`~calver.verifier.Unscorable` per row out.

In-process (``workers=0``, no budget) or on a time-budgeted pool of worker processes
(:mod:`calver.reward.workers`): the same policy for every trainer. A row is unscorable when its completion
holds no text, its problem cell is missing, malformed or ungrounded (:mod:`calver.reward.problems`), the
columns do not pair, the scorer raised, or it ran past its budget. End-of-turn markers are cut before
parsing (:func:`calver.reward.completions.strip_end_of_turn`). :meth:`RewardEngine.score` never raises.
Scoring is thread-safe (the verifier's memos are locked; concurrent calls share the pool's workers).
"""

from __future__ import annotations

from typing import Any, Sequence

from calver.reward.completions import END_OF_TURN_MARKERS, read_completion, rows, strip_end_of_turn
from calver.reward.problems import prepared_or_reason, problem_key
from calver.reward.worker_main import ScoreFn, check_scorer, score_row
from calver.reward.workers import WorkerPool, check_budget, shared_pool
from calver.verifier import PreparedProblem, RowResult, Unscorable, score


class RewardEngine:
    """Scores rows for one reward configuration. ``column`` names the problem cell in reasons;
    ``scorer`` replaces :func:`calver.verifier.score` (module-level: workers import it by reference);
    ``end_markers``: the end-of-turn markers cut from completions. Pickling drops the pool (TRL's async
    GRPO ships rewards to a spawned process); the copy starts one on first use."""

    def __init__(self, *, column: str = "problem_json", allow_ungrounded: bool = False,
                 budget_s: float | None = None, workers: int = 0, scorer: ScoreFn | None = None,
                 end_markers: Sequence[str] = END_OF_TURN_MARKERS) -> None:
        check_budget(budget_s)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        check_scorer(scorer)
        self.column = column
        self.allow_ungrounded = bool(allow_ungrounded)
        self.budget_s = float(budget_s) if budget_s is not None else None
        self.workers = max(workers, 1) if budget_s is not None else workers  # a budget needs a process to kill
        self.scorer = scorer
        self.end_markers = tuple(end_markers)
        self._pool: WorkerPool | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = None  # processes cannot travel
        return state

    @property
    def pool(self) -> WorkerPool | None:
        return self._pool

    def close(self) -> None:
        """Kill this engine's worker processes (shared with same-config engines; a later call restarts them)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def score(self, completions: Any, cells: Any) -> list[RowResult]:
        """One result per completion, against ``cells[i]`` (a ``problem_json`` string or dict). A ``cells``
        that is not a column of the same length makes every row unscorable. Never raises."""
        comps = rows(completions) if completions is not None else []
        if comps is None:  # not a batch: no rows, and no row count to answer with
            return []
        n = len(comps)
        column = [None] * n if cells is None else rows(cells)
        if column is None or len(column) != n:
            why = (f"{self.column} is a {type(cells).__name__}, not a column" if column is None
                   else f"{len(column)} {self.column} values for {n} completions")
            return [Unscorable(why)] * n
        out: list[RowResult | None] = [None] * n
        todo: list[tuple[int, str, str]] = []  # (row, text, problem key)
        for i, (comp, cell) in enumerate(zip(comps, column)):
            text, why = read_completion(comp)
            key, bad = problem_key(cell, self.column)
            if bad or text is None:
                out[i] = Unscorable(bad or why)
            else:
                todo.append((i, strip_end_of_turn(text, self.end_markers), key))
        for (i, _, _), result in zip(todo, self._score(todo)):
            out[i] = result
        return [r if r is not None else Unscorable("scorer error: no result") for r in out]

    def _score(self, todo: list[tuple[int, str, str]]) -> list[RowResult]:
        if not todo:
            return []
        if self.workers:
            try:
                if self._pool is None or self._pool.closed:
                    self._pool = shared_pool(self.workers, self.budget_s, self.scorer)
                return self._pool.map([(text, key) for _, text, key in todo], self.column, self.allow_ungrounded)
            except (OSError, RuntimeError) as e:  # the pool could not start or was closed under us
                return [Unscorable(f"scorer error: {type(e).__name__}: {e}"[:300])] * len(todo)
        scorer = self.scorer or score
        out: list[RowResult] = []
        for _, text, key in todo:
            prob = prepared_or_reason(key, self.column, self.allow_ungrounded)
            out.append(Unscorable(prob) if isinstance(prob, str) else score_row(scorer, text, prob))
        return out


def prepared(engine: RewardEngine, cell: Any) -> PreparedProblem | str:
    """The prepared problem for one cell under ``engine``'s column and grounding rule, or why not."""
    key, bad = problem_key(cell, engine.column)
    return bad or prepared_or_reason(key, engine.column, engine.allow_ungrounded)


__all__ = ["RewardEngine", "prepared"]
