"""Run selectors over a pool behind the firewall, store their decisions, reattach labels afterwards.

``run_selection(pool, names, k)`` builds label-free views (``firewall.make_views``), re-checks each
view (``firewall.check_view``), runs every selector, validates that it returned only an index in
range, one score per candidate and (for index -1 only) an answer, and writes
``selections/<name>.jsonl`` (``<name>@<k>`` for a K-prefix) plus ``<name>.meta.json`` holding the
view hash. ``grade_rows`` reattaches correctness once the indices are fixed; ``calver_audit`` is the
label-reading best/worst tie rule, kept out of the selector registry on purpose.
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterable, Sequence

from calver.infer.evaluation.table import grading_problem
from calver.infer.firewall import FirewallError, SelectorView, check_view, make_views, view_hash
from calver.infer.pool import Pool
from calver.infer.selectors import SELECTORS, Selection, Selector, SelectorError, build_selector, candidate_scores
from calver.verifier import Problem, grade, score, select_from_scores, split_slots

K_PREFIXES = (1, 2, 4, 8, 16, 32)


def selection_name(name: str, k: int | None) -> str:
    return name if k is None else f"{name}@{k}"


def run_selector(selector: Selector, views: Sequence[SelectorView]) -> list[Selection]:
    """Firewall-check every view, run ``selector``, and validate its output."""
    for v in views:
        if not v._cache.get("firewall_checked"):
            check_view(v)
            v._cache["firewall_checked"] = True
    out = selector.select_many(list(views))
    if len(out) != len(views):
        raise SelectorError(f"selector {selector.name!r} returned {len(out)} selections for {len(views)} units")
    for v, s in zip(views, out):
        if not isinstance(s, Selection):
            raise SelectorError(f"selector {selector.name!r} returned {type(s).__name__}, not Selection")
        if not (-1 <= s.index < v.k) or (s.index == -1 and selector.name != "extract_solve"):
            raise SelectorError(f"selector {selector.name!r}: index {s.index} out of range for K={v.k}")
        if len(s.scores) != v.k:
            raise SelectorError(f"selector {selector.name!r}: {len(s.scores)} scores for K={v.k}")
        if s.answer is not None and s.index != -1:
            raise SelectorError(f"selector {selector.name!r}: an answer may accompany only index -1")
    return out


def _needs_stored(sel: Selector) -> bool:
    return sel.neural and not sel.has_model()  # type: ignore[attr-defined]


def run_selection(
    pool: Pool,
    selectors: Iterable[str | Selector],
    k: int | None = None,
    *,
    write: bool = True,
    log=lambda m: None,
) -> dict[str, list[dict[str, Any]]]:
    """Select with each selector on the (K-prefix ``k``) views of ``pool``; returns rows per name."""
    sels = [build_selector(s) if isinstance(s, str) else s for s in selectors]
    stored = sorted({s.name for s in sels if _needs_stored(s)})
    have = set(pool.selection_names())
    missing = [n for n in stored if n not in have]
    if missing:
        raise SelectorError(f"no model given and no stored scores for {', '.join(missing)} in {pool.root}")
    pool_k = pool.k()
    if k is not None and pool_k is not None and k > pool_k:
        raise SelectorError(f"--k {k} exceeds the pool's K={pool_k}")
    views = make_views(pool, k, comparators=stored)
    vh = view_hash(views)
    out: dict[str, list[dict[str, Any]]] = {}
    for sel in sels:
        t0 = time.perf_counter()
        res = run_selector(sel, views)
        rows = [s.to_row(v) for v, s in zip(views, res)]
        name = selection_name(sel.name, k)
        if write:
            pool.write_selection(name, rows)
            pool.write_selection_meta(name, {
                "selector": sel.name, "k": k if k is not None else pool_k, "units": len(rows), "view_hash": vh,
                "from_stored_scores": sel.name in stored, "seconds": round(time.perf_counter() - t0, 4),
            })
        out[name] = rows
        log(f"{name}: {len(rows)} unit(s) in {time.perf_counter() - t0:.2f}s")
    return out


# ---- after selection: labels come back ------------------------------------------------------------
def candidate_correct(text: str, problem: Problem) -> bool:
    """Grade one candidate's ANSWER slot against the full (labelled) problem."""
    ans = split_slots(text).get("ANSWER")
    if ans is None:
        return False
    try:
        return bool(grade(problem, ans))
    except Exception:  # a malformed problem grades as wrong rather than crashing a table
        return False


def grade_rows(pool: Pool, rows: Sequence[dict[str, Any]], k: int | None = None) -> list[dict[str, Any]]:
    """Selection rows with ``correct`` (and the unit's ``labels``) reattached."""
    problems = pool.problems()
    labels = pool.labels()
    units = {(u.problem_id, u.seed): u for u in pool.units(k)}
    out = []
    for r in rows:
        unit = units[(r["problem_id"], int(r["seed"]))]
        p = grading_problem(problems[r["problem_id"]], labels.get(r["problem_id"]))  # G* from labels if hidden
        if int(r["index"]) >= 0:
            ok = candidate_correct(unit.texts[int(r["index"])], p)
        else:
            ok = r.get("answer") is not None and bool(_safe_grade(p, r["answer"]))
        out.append({**r, "correct": ok, "labels": labels.get(r["problem_id"], {}), "source_id": unit.source_id})
    return out


def _safe_grade(p: Problem, answer: Any) -> bool:
    try:
        return grade(p, answer)
    except Exception:
        return False


def accuracy(pool: Pool, name: str, k: int | None = None) -> float:
    rows = grade_rows(pool, list(pool.selection(name).values()), k)
    return sum(r["correct"] for r in rows) / len(rows) if rows else math.nan


def calver_audit(pool: Pool, tie: str, k: int | None = None, *, write: bool = True) -> list[dict[str, Any]]:
    """CALVER with the label-reading ``best``/``worst`` tie rule (an audit bound, never deployed).

    Scores come from the firewall views; correctness of the tied candidates is read from the labelled
    problems here, explicitly, after the scores are fixed.
    """
    if tie not in ("best", "worst"):
        raise ValueError("calver_audit tie must be 'best' or 'worst'")
    problems = pool.problems()
    labels = pool.labels()
    rows = []
    for v in make_views(pool, k):
        scs = candidate_scores(v)
        totals = [ts.total for ts in scs]
        top = max(totals)
        p = grading_problem(problems[v.problem_id], labels.get(v.problem_id))
        correct = {i: candidate_correct(v.texts[i], p) for i, t in enumerate(totals) if t == top}
        idx = select_from_scores(totals, tie, correct=correct, parsed=[ts.answer is not None for ts in scs])
        rows.append({"problem_id": v.problem_id, "seed": v.seed, "index": idx, "scores": [float(t) for t in totals], "audit": True})
    if write:
        pool.write_selection(selection_name(f"calver_{tie}", k), rows)
    return rows


__all__ = [
    "K_PREFIXES", "SELECTORS", "FirewallError", "accuracy", "calver_audit", "candidate_correct", "grade_rows",
    "run_selection", "run_selector", "selection_name", "score",
]
