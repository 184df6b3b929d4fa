"""Grading verifier-guided refinement against token-matched best-of-K' (the ``calver refine`` report).

The label-free half (revision rounds, extra samples, CALVER's pick in each arm) is
:mod:`calver.infer.refine.refine`; here each arm's pick is graded on the source graph
(:mod:`calver.evaluation.grading`) and summarized with clustered bootstrap intervals.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from calver.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.evaluation.grading import grading_problems, is_correct
from calver.evaluation.report import ci_text, pct
from calver.evaluation.results import to_json
from calver.infer.pool import Pool
from calver.infer.refine.refine import MAX_SCORE, RefineConfig, arm_candidates, calver_pick, refine_pool


def run_refine(pool: Pool | str, sampler, cfg: RefineConfig | None = None, out: str | Path | None = None,
               log=lambda m: None) -> dict[str, Any]:
    """Refine every unit of ``pool`` and compare with token-matched best-of-K'; write
    ``refine.json``, ``refine_units.jsonl`` and ``refine.md`` under ``out`` when given."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    cfg = cfg or RefineConfig()
    states = refine_pool(pool, sampler, cfg, log)
    problems, graded = pool.problems(), grading_problems(pool)
    units = []
    for s in states:
        v = s["view"]
        gp = graded[v.problem_id]
        rec: dict[str, Any] = {"problem_id": v.problem_id, "seed": v.seed,
                               "source_id": problems[v.problem_id].source_id, "stop": s["stop"],
                               "rounds": s["rounds"], "prompt_tokens": s["prompt_tokens"]}
        for name, cands in arm_candidates(s, cfg.baseline).items():
            i = calver_pick(cands)
            rec[name] = {"index": i, "score": cands[i].total, "correct": is_correct(gp, cands[i].answer),
                         "tokens": sum(c.num_tokens for c in cands), "candidates": len(cands),
                         "max_score": cands[i].total == MAX_SCORE}
        rec["texts"] = {"revisions": [c.text for c in s["cands"] if c.origin == "revision"]}
        units.append(rec)
    result = {"config": asdict(cfg), "pool": str(pool.root), "summary": summarize(units, cfg), "units": units}
    if out is not None:
        write_outputs(result, Path(out))
    return result


def summarize(units: list[dict[str, Any]], cfg: RefineConfig) -> dict[str, Any]:
    arms = [a for a in ("calver@K", "refine", "best_of_K'") if units and a in units[0]]
    clusters = [u["source_id"] for u in units]
    out: dict[str, Any] = {"units": len(units), "arms": {}, "stops": {}}
    for u in units:
        out["stops"][u["stop"]] = out["stops"].get(u["stop"], 0) + 1
    out["revision_rounds"] = sum(len(u["rounds"]) for u in units)
    out["revision_prompt_tokens"] = sum(u["prompt_tokens"] for u in units)
    for a in arms:
        acc = [float(u[a]["correct"]) for u in units]
        mx = [float(u[a]["max_score"]) for u in units]
        out["arms"][a] = {
            "accuracy": mean_ci(acc, clusters, draws=cfg.draws, seed=cfg.seed) if units else None,
            "max_score_rate": sum(mx) / len(mx) if mx else math.nan,
            "sampled_tokens": sum(u[a]["tokens"] for u in units),
            "mean_candidates": sum(u[a]["candidates"] for u in units) / len(units) if units else math.nan,
        }
    if "best_of_K'" in arms and units:
        out["refine_minus_best_of_K'"] = paired_diff_ci([float(u["refine"]["correct"]) for u in units],
                                                        [float(u["best_of_K'"]["correct"]) for u in units],
                                                        clusters, draws=cfg.draws, seed=cfg.seed)
    return out


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [f"# Verifier-guided refinement vs token-matched best-of-K' ({s['units']} units, "
             f"T={result['config']['rounds']})", "",
             "| arm | accuracy % [95% CI] | max-score rate % | sampled tokens | mean candidates |",
             "|---|---|---|---|---|"]
    for a, r in s["arms"].items():
        lines.append(f"| {a} | {ci_text(r['accuracy'])} | {pct(r['max_score_rate'])} | {r['sampled_tokens']} | "
                     f"{r['mean_candidates']:.2f} |")
    diff = s.get("refine_minus_best_of_K'")
    if diff is not None:
        lines += ["", f"Refine − best-of-K' (paired, clustered by source_id): {ci_text(diff, signed=True)} pp"]
    lines += ["", f"Stops: {', '.join(f'{k}={v}' for k, v in sorted(s['stops'].items()))}; revision prompts: "
              f"{s['revision_rounds']} ({s['revision_prompt_tokens']} prompt tokens, not counted as sampled)."]
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    slim = {k: v for k, v in result.items() if k != "units"}
    (out / "refine.json").write_text(json.dumps(to_json(slim), indent=2, sort_keys=True))
    with open(out / "refine_units.jsonl", "w", encoding="utf-8") as fh:
        for u in result["units"]:
            fh.write(json.dumps(to_json(u), sort_keys=True) + "\n")
    (out / "refine.md").write_text(markdown(result))


__all__ = ["markdown", "run_refine", "summarize", "write_outputs"]
