"""The extract-or-verify router's calibration and report (``calver route``).

Per unit, :func:`unit_outcomes` records the candidates' graph agreement
(:func:`calver.infer.refine.router.graph_agreement`, label-free) and whether always-extract and
always-verify answer correctly (graded here, after selection). The threshold is chosen on a
development split only (:func:`choose_threshold`); :func:`evaluate_router` refuses dev/test splits
that share a problem or a source id, and reports router vs always-extract vs always-verify per
presentation level (L1/L2/L3).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from calver.evaluation.bootstrap import mean_ci
from calver.evaluation.grading import grading_problems, is_correct
from calver.evaluation.report import ci_text
from calver.evaluation.results import to_json
from calver.infer.firewall import make_views
from calver.infer.pool import Pool
from calver.infer.refine.router import graph_agreement, route
from calver.infer.score_table import score_table
from calver.infer.selectors import CalverSelector, ExtractSolveSelector, candidate_scores
from calver.verifier import Problem


# ---- per-unit outcomes ------------------------------------------------------------------------------
def level_of(problem: Problem) -> str:
    """The graph-from-text level (``meta["text_level"]``, L1-L3), else the problem's mode."""
    return str(problem.meta.get("text_level") or problem.mode)


def unit_outcomes(pool: Pool | str, k: int | None = None) -> list[dict[str, Any]]:
    """Per unit: level, agreement, and whether always-extract / always-verify answers correctly.
    Agreement and both selections read only the firewall views; labels are attached afterwards."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    problems, graded = pool.problems(), grading_problems(pool)
    views = score_table(pool).with_verdicts(make_views(pool, k))
    extract = ExtractSolveSelector().select_many(views)
    verify = CalverSelector().select_many(views)
    rows = []
    for v, ex, ve in zip(views, extract, verify):
        p = problems[v.problem_id]
        gp = graded[v.problem_id]
        ag = graph_agreement(v.texts, v.problem)
        rows.append({
            "problem_id": v.problem_id, "seed": v.seed, "source_id": p.source_id, "level": level_of(p),
            "agreement": ag["agreement"], "parsed": ag["parsed"], "k": ag["k"],
            "extract_answer": ex.answer, "extract_correct": ex.answer is not None and is_correct(gp, ex.answer),
            "verify_index": ve.index, "verify_correct": is_correct(gp, candidate_scores(v)[ve.index].answer),
        })
    return rows


# ---- threshold and evaluation ------------------------------------------------------------------------
def _routed_correct(row: dict[str, Any], thr: float) -> bool:
    return bool(row["extract_correct"] if route(row["agreement"], thr) == "extract" else row["verify_correct"])


def candidate_thresholds(agreements: Iterable[float]) -> list[float]:
    """-inf (always extract), midpoints between consecutive distinct agreements, +inf (always verify)."""
    vals = sorted(set(float(a) for a in agreements))
    return [-math.inf] + [(a + b) / 2 for a, b in zip(vals, vals[1:])] + [math.inf]


def choose_threshold(dev_rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The dev-accuracy-maximizing threshold; ties -> the one closest to 0.5, then the larger (with
    no evidence either way the router verifies: CALVER is the safer default)."""
    if not dev_rows:
        raise ValueError("choosing a threshold needs at least one development unit")
    best = None
    for thr in candidate_thresholds(r["agreement"] for r in dev_rows):
        acc = sum(_routed_correct(r, thr) for r in dev_rows) / len(dev_rows)
        key = (-acc, abs(min(max(thr, -1.0), 2.0) - 0.5), -thr)
        if best is None or key < best[0]:
            best = (key, thr, acc)
    return {"threshold": best[1], "dev_accuracy": best[2], "dev_units": len(dev_rows)}


def check_disjoint(dev_rows: Sequence[dict[str, Any]], test_rows: Sequence[dict[str, Any]]) -> None:
    for key in ("problem_id", "source_id"):
        shared = {r[key] for r in dev_rows} & {r[key] for r in test_rows}
        if shared:
            raise ValueError(f"dev and test share {len(shared)} {key}(s), e.g. {sorted(shared)[0]!r}: "
                             "the threshold must be chosen on a disjoint development split")


def split_by_source(rows: Sequence[dict[str, Any]], dev_frac: float = 0.5, seed: int = 0):
    """Seeded split of units into (dev, test) by source id: every unit of one source on one side."""
    sources = sorted({r["source_id"] for r in rows})
    order = sorted(sources, key=lambda s: hashlib.sha256(f"{seed}:{s}".encode()).hexdigest())
    n_dev = min(len(order) - 1, max(1, round(dev_frac * len(order)))) if len(order) > 1 else len(order)
    dev_s = set(order[:n_dev])
    return [r for r in rows if r["source_id"] in dev_s], [r for r in rows if r["source_id"] not in dev_s]


def _arm_table(rows: Sequence[dict[str, Any]], thr: float, draws: int, seed: int) -> dict[str, Any]:
    clusters = [r["source_id"] for r in rows]
    arms = {"router": [float(_routed_correct(r, thr)) for r in rows],
            "always_extract": [float(r["extract_correct"]) for r in rows],
            "always_verify": [float(r["verify_correct"]) for r in rows]}
    out = {name: mean_ci(v, clusters, draws=draws, seed=seed) for name, v in arms.items()}
    means = {name: sum(v) / len(v) for name, v in arms.items()}
    top = max(means.values())
    return {"n": len(rows), "arms": out,
            "extract_share": sum(route(r["agreement"], thr) == "extract" for r in rows) / len(rows),
            "mean_agreement": sum(r["agreement"] for r in rows) / len(rows),
            "winners": [n for n, m in means.items() if m == top]}


def evaluate_router(dev_rows: Sequence[dict[str, Any]], test_rows: Sequence[dict[str, Any]], *, draws: int = 2000,
                    seed: int = 0) -> dict[str, Any]:
    """Threshold from ``dev_rows`` only; per-level accuracy of router / always-extract / always-verify on test."""
    check_disjoint(dev_rows, test_rows)
    if not test_rows:
        raise ValueError("the test split is empty")
    choice = choose_threshold(dev_rows)
    thr = choice["threshold"]
    levels = sorted({r["level"] for r in test_rows})
    per_level = {lv: _arm_table([r for r in test_rows if r["level"] == lv], thr, draws, seed) for lv in levels}
    per_level["all"] = _arm_table(test_rows, thr, draws, seed)
    return {**choice, "test_units": len(test_rows), "levels": per_level,
            "dev_sources": sorted({r["source_id"] for r in dev_rows}),
            "test_sources": sorted({r["source_id"] for r in test_rows})}


def markdown(result: dict[str, Any]) -> str:
    thr = result["threshold"]
    lines = [f"# Extract-or-verify router (threshold {thr:.3f} chosen on {result['dev_units']} dev units; "
             f"{result['test_units']} test units)", "",
             "| level | n | router % [95% CI] | always extract % | always verify % | routed to extract % "
             "| mean agreement | winner |",
             "|---|---|---|---|---|---|---|---|"]
    for lv, t in result["levels"].items():
        a = t["arms"]
        lines.append(f"| {lv} | {t['n']} | {ci_text(a['router'])} | {ci_text(a['always_extract'])} | "
                     f"{ci_text(a['always_verify'])} | "
                     f"{100 * t['extract_share']:.0f} | {t['mean_agreement']:.3f} | {', '.join(t['winners'])} |")
    lines += ["", "Intervals: clustered bootstrap by source_id. The threshold never sees the test split "
              "(dev and test share no problem or source id)."]
    return "\n".join(lines) + "\n"


def run_route(dev_pool: Pool | str, test_pool: Pool | str | None = None, *, dev_frac: float = 0.5, split_seed: int = 0,
              k: int | None = None, draws: int = 2000, out: str | Path | None = None) -> dict[str, Any]:
    """Evaluate the router on two pools (dev, test) or one pool split by source id."""
    dev_rows = unit_outcomes(dev_pool, k)
    if test_pool is None:
        dev_rows, test_rows = split_by_source(dev_rows, dev_frac, split_seed)
    else:
        test_rows = unit_outcomes(test_pool, k)
    result = evaluate_router(dev_rows, test_rows, draws=draws, seed=split_seed)
    result["split"] = {"mode": "two_pools" if test_pool is not None else "by_source", "dev_frac": dev_frac,
                       "seed": split_seed}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "route.json").write_text(json.dumps(to_json(result), indent=2, sort_keys=True))
        with open(out / "route_units.jsonl", "w", encoding="utf-8") as fh:
            for r in [dict(r, split="dev") for r in dev_rows] + [dict(r, split="test") for r in test_rows]:
                fh.write(json.dumps(to_json(r), sort_keys=True) + "\n")
        (out / "route.md").write_text(markdown(result))
    return result


__all__ = ["candidate_thresholds", "check_disjoint", "choose_threshold", "evaluate_router", "level_of", "markdown",
           "run_route", "split_by_source", "unit_outcomes"]
