"""Where labels come back: the only module in calver that reads a pool's labels or grades an answer.

Selection happens first, behind the firewall (:mod:`calver.infer.select`); everything here runs
after the indices are fixed. Correctness is the task predicate on the source graph G*
(:func:`calver.verifier.grade`), never equality with a listed reference. In constructed-graph mode
G* lives in the problem row's ``labels`` (``source_graph`` or ``graph``) and is reattached by
:func:`grading_problem`.

:func:`safe_grade` is the one grading call: an unparsed answer is wrong, a problem the verifier
cannot grade (:class:`~calver.verifier.ProblemError`, e.g. no source graph) counts as wrong with the
reason recorded, and any other exception is a verifier bug and propagates.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from calver.infer.firewall import make_views
from calver.infer.pool import Pool
from calver.infer.score_table import score_table
from calver.infer.select import selection_name
from calver.infer.selectors import candidate_scores
from calver.verifier import Problem, ProblemError, grade, parse_graph, select_from_scores, split_slots


@dataclasses.dataclass(frozen=True)
class Grade:
    correct: bool
    reason: str | None = None  # set when the answer counted wrong without a verdict (ungradeable problem)

    def __bool__(self) -> bool:
        return self.correct


def safe_grade(problem: Problem, answer: Any) -> Grade:
    """Grade ``answer`` (slot text or parsed object; None = unparsed) on ``problem``'s source graph.

    The verifier's :func:`~calver.verifier.grade` already turns an answer that does not parse into
    False; only :class:`ProblemError` (an ungradeable problem) is caught here."""
    if answer is None:
        return Grade(False)
    try:
        return Grade(bool(grade(problem, answer)))
    except ProblemError as e:
        return Grade(False, f"ungradeable: {e}")


def is_correct(gproblem: Problem, answer: Any) -> bool:
    """:func:`safe_grade` as a bool (``gproblem`` must carry the source graph: :func:`grading_problem`)."""
    return safe_grade(gproblem, answer).correct


def candidate_correct(text: str, problem: Problem) -> bool:
    """Grade one candidate's ANSWER slot text against the full (labelled) problem."""
    return safe_grade(problem, split_slots(text).get("ANSWER")).correct


# ---- labels ----------------------------------------------------------------------------------------
def pool_labels(pool: Pool) -> dict[str, dict[str, Any]]:
    """problem id -> the row's labels (validity class, source graph in constructed mode, ...)."""
    return pool.labels()


def grading_problem(problem: Problem, labels: dict[str, Any] | None) -> Problem:
    """The problem with its source graph G* attached (from labels when the problem hides it)."""
    if problem.graph is not None or not labels:
        return problem
    raw = labels.get("source_graph", labels.get("graph"))
    if raw is None:
        return problem
    g = raw if not isinstance(raw, str) else parse_graph(raw, kind=problem.graph_class)
    return dataclasses.replace(problem, graph=g)


def grading_problems(pool: Pool) -> dict[str, Problem]:
    """problem id -> :func:`grading_problem` for every problem of ``pool``."""
    labels = pool_labels(pool)
    return {pid: grading_problem(p, labels.get(pid)) for pid, p in pool.problems().items()}


# ---- selections graded ------------------------------------------------------------------------------
def grade_rows(pool: Pool, rows: Sequence[dict[str, Any]], k: int | None = None) -> list[dict[str, Any]]:
    """Selection rows with ``correct`` (and the unit's ``labels``) reattached; ``grade_error`` when
    the answer counted wrong because the problem could not be graded."""
    gps = grading_problems(pool)
    labels = pool_labels(pool)
    units = {(u.problem_id, u.seed): u for u in pool.units(k)}
    out = []
    for r in rows:
        unit = units[(r["problem_id"], int(r["seed"]))]
        p = gps[r["problem_id"]]
        if int(r["index"]) >= 0:
            g = safe_grade(p, split_slots(unit.texts[int(r["index"])]).get("ANSWER"))
        else:  # an answer built outside the pool (extract-then-solve)
            g = safe_grade(p, r.get("answer"))
        row = {**r, "correct": g.correct, "labels": labels.get(r["problem_id"], {}), "source_id": unit.source_id}
        if g.reason:
            row["grade_error"] = g.reason
        out.append(row)
    return out


def accuracy(pool: Pool, name: str, k: int | None = None) -> float:
    rows = grade_rows(pool, list(pool.selection(name).values()), k)
    return sum(r["correct"] for r in rows) / len(rows) if rows else math.nan


def calver_audit(pool: Pool, tie: str, k: int | None = None, *, write: bool = True) -> list[dict[str, Any]]:
    """CALVER with the label-reading ``best``/``worst`` tie rule (an audit bound, never deployed).

    Scores come from the firewall views; correctness of the tied candidates is read from the labelled
    problems here, explicitly, after the scores are fixed."""
    if tie not in ("best", "worst"):
        raise ValueError("calver_audit tie must be 'best' or 'worst'")
    gps = grading_problems(pool)
    rows = []
    views = score_table(pool).with_verdicts(make_views(pool, k))  # each candidate scored once, in the table
    for v in views:
        scs = candidate_scores(v)
        totals = [ts.total for ts in scs]
        top = max(totals)
        p = gps[v.problem_id]
        correct = {i: candidate_correct(v.texts[i], p) for i, t in enumerate(totals) if t == top}
        idx = select_from_scores(totals, tie, correct=correct, parsed=[ts.answer is not None for ts in scs])
        rows.append({"problem_id": v.problem_id, "seed": v.seed, "index": idx, "scores": [float(t) for t in totals],
                     "audit": True})
    if write:
        pool.write_selection(selection_name(f"calver_{tie}", k), rows)
    return rows


__all__ = ["Grade", "accuracy", "calver_audit", "candidate_correct", "grade_rows", "grading_problem",
           "grading_problems", "is_correct", "pool_labels", "safe_grade"]
