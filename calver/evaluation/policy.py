"""What a frozen pool says about the *policy* that sampled it, not about a selector.

- :func:`policy_stats`: per-bit pass rates, mean score S/6, the share of candidates at 6/6, the share
  that parse into all six slots, the share with a correct answer and coverage, with clustered CIs.
- :func:`shuffled_control`: every unit's candidates graded against *another* problem of the same
  task family (a seeded derangement within the family). A policy that reads its prompt answers its
  own problem far more often than a shuffled one; a policy that guesses scores the same on both
  (``ml-pipeline.md`` found 12.9% vs 11.8-14.4% for the old demo policy).
- :func:`compare_policies`: two pools over the same (problem, seed) units (an SFT and a GRPO
  policy), paired per unit with problem-clustered bootstrap CIs of the differences.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from calver.evaluation.bootstrap import DECOMPOSITION_DRAWS, mean_ci, paired_change_ci, paired_diff_ci
from calver.evaluation.grading import is_correct
from calver.evaluation.metrics import calver_index, unit_parsed
from calver.evaluation.units import UnitFacts
from calver.verifier import SLOTS, score

MAX_SCORE = len(SLOTS)


def unit_rates(u: UnitFacts) -> dict[str, float]:
    """Per-unit means over its candidates (the unit is what the bootstrap resamples, by problem)."""
    return {
        "six_rate": float(np.mean(u.totals == MAX_SCORE)),
        "mean_score": float(np.mean(u.totals)),
        "valid_rate": float(np.mean(u.correct)),
        "coverage": float(np.any(u.correct)),
        "calver": float(u.correct[calver_index(list(u.totals), parsed=unit_parsed(u))]),
        **{f"bit_{s.lower()}": float(np.mean(u.bits[:, i])) for i, s in enumerate(SLOTS)},
    }


def parse_rate(u: UnitFacts) -> float:
    """Share of the unit's candidates that hold all six slots exactly once."""
    from calver.verifier import split_slots

    return float(np.mean([not split_slots(t).problems for t in u.texts])) if u.texts else 0.0


def policy_stats(units: Sequence[UnitFacts], *, draws: int = DECOMPOSITION_DRAWS, seed: int = 0) -> dict[str, Any]:
    """Candidate-level rates of one pool, each the mean of per-unit rates with a clustered 95% CI."""
    if not units:
        raise ValueError("policy_stats: the pool has no units")
    clusters = [u.source_id for u in units]
    per = [unit_rates(u) | {"parse_rate": parse_rate(u)} for u in units]
    out: dict[str, Any] = {"n_units": len(units), "n_clusters": len(set(clusters)),
                           "n_candidates": int(sum(u.k for u in units))}
    for key in per[0]:
        out[key] = mean_ci([p[key] for p in per], clusters, draws=draws, seed=seed)
    out["bit_pass_rates"] = {s: out[f"bit_{s.lower()}"]["estimate"] for s in SLOTS}
    return out


def _derangement(ids: list[str], rng: np.random.Generator) -> list[str]:
    """A permutation of ``ids`` with no fixed point (ids are distinct; needs len >= 2)."""
    while True:
        perm = list(rng.permutation(len(ids)))
        if all(i != j for i, j in enumerate(perm)):
            return [ids[j] for j in perm]


def shuffled_control(units: Sequence[UnitFacts], *, shuffles: int = 3, seed: int = 0,
                     draws: int = DECOMPOSITION_DRAWS) -> dict[str, Any]:
    """Candidates re-graded on another problem of their family: the 6/6 rate, the valid-answer rate
    and coverage, next to the same numbers on their own problems.

    Each shuffle maps every problem to a different problem of the same task (families with a single
    problem are left out). The score is the verifier's on the other problem's firewall view, the
    validity is graded on its source, exactly as for the true problems.
    """
    by_pid: dict[str, UnitFacts] = {}
    for u in units:
        by_pid.setdefault(u.problem_id, u)
    fam: dict[str, list[str]] = defaultdict(list)
    for pid, u in sorted(by_pid.items()):
        fam[u.problem.task if u.problem is not None else ""].append(pid)
    usable = [u for u in units if len(fam[u.problem.task if u.problem is not None else ""]) >= 2]
    if not usable:
        return {"error": "no task family has two problems to shuffle between"}
    rng = np.random.default_rng(seed)
    clusters = [u.source_id for u in usable]
    true = [unit_rates(u) for u in usable]
    rows: list[dict[str, float]] = []
    # (problem id, text) -> score: the other problem's own candidates are scored already, and a
    # derangement repeats pairs across shuffles (two problems of a family can only swap)
    memo: dict[tuple[str, str], Any] = {}
    for u in units:
        if len(u.scores) == len(u.texts):
            memo.update(((u.problem_id, t), s) for t, s in zip(u.texts, u.scores))
    for _ in range(shuffles):
        other = {}
        for pids in fam.values():
            if len(pids) >= 2:
                other.update(zip(pids, _derangement(pids, rng)))
        for u in usable:
            o = by_pid[other[u.problem_id]]
            scores = [memo[(o.problem_id, t)] if (o.problem_id, t) in memo
                      else memo.setdefault((o.problem_id, t), score(t, o.problem)) for t in u.texts]
            valid = [is_correct(o.grading_problem, s.answer) for s in scores]
            rows.append({"six_rate": float(np.mean([s.total == MAX_SCORE for s in scores])),
                         "mean_score": float(np.mean([s.total for s in scores])),
                         "valid_rate": float(np.mean(valid)), "coverage": float(any(valid))})
    out: dict[str, Any] = {"shuffles": shuffles, "n_units": len(usable), "n_clusters": len(set(clusters))}
    for key in ("six_rate", "mean_score", "valid_rate", "coverage"):
        own = [t[key] for t in true]
        shuf = [float(np.mean([rows[s * len(usable) + i][key] for s in range(shuffles)])) for i in range(len(usable))]
        out[key] = {"own": mean_ci(own, clusters, draws=draws, seed=seed),
                    "shuffled": mean_ci(shuf, clusters, draws=draws, seed=seed),
                    "own_minus_shuffled": paired_diff_ci(own, shuf, clusters, draws=draws, seed=seed)}
    return out


def compare_policies(units_a: Sequence[UnitFacts], units_b: Sequence[UnitFacts], *, draws: int = DECOMPOSITION_DRAWS,
                     seed: int = 0, keys: Sequence[str] = ("six_rate", "mean_score", "valid_rate", "calver",
                                                            "coverage")) -> dict[str, Any]:
    """Paired differences b - a over the units both pools hold (same problem and seed); ``mean_a`` and
    ``mean_b`` are pool a's and pool b's means on those units."""
    a = {u.key: u for u in units_a}
    b = {u.key: u for u in units_b}
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("compare_policies: the two pools share no (problem, seed) unit")
    clusters = [a[k].source_id for k in common]
    ra, rb = [unit_rates(a[k]) for k in common], [unit_rates(b[k]) for k in common]
    out: dict[str, Any] = {"n_units": len(common), "n_clusters": len(set(clusters))}
    for key in keys:
        out[key] = paired_change_ci([r[key] for r in ra], [r[key] for r in rb], clusters, draws=draws, seed=seed)
    return out
