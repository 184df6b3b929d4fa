"""Many pools, one evaluation: per-policy results, pooled units and the paper's Table 2 layout.

Each pool belongs to a policy (``NAME=PATH``, else the pool directory's name); a policy may own several
pools (sampling seeds), whose manifests must then name the same model and adapter. Every unit keeps its
policy's label. Units are clustered by source problem *across* pools, so one CLEAR item sampled by two
policies is one cluster of the pooled intervals. The pools must cover the same problems (the same ids,
with the same problem definitions) unless ``union=True``, which evaluates their union and says so.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Sequence

from calver.evaluation.breakdowns import POLICY_FIELD, breakdowns, check_fields
from calver.evaluation.evaluate import (
    BASELINE,
    TARGET,
    evaluate_policy,
    evaluate_units,
    pool_manifest,
    stored_in_all,
)
from calver.evaluation.results import BreakdownRow, MultiEvalResult
from calver.evaluation.units import UnitFacts, load_units
from calver.infer.pool import Pool

MEDOID = "medoid"  # Table 2 reports CALVER - medoid beside CALVER - plurality
POOLED = "pooled"


@dataclass(frozen=True)
class PoolSpec:
    """One ``--pool`` argument: the policy label and the pool directory."""

    policy: str
    path: str

    @classmethod
    def parse(cls, spec: str) -> "PoolSpec":
        """``NAME=PATH`` or ``PATH`` (label: the directory's name)."""
        name, sep, path = spec.partition("=")
        if sep and name and not Path(spec).exists():
            return cls(name.strip(), path)
        return cls(Path(spec.rstrip("/")).name or spec, spec)


def _model_identity(manifest: dict[str, Any]) -> str:
    def ident(x: Any) -> Any:
        return x.get("content_hash") or x.get("path") or x.get("id") if isinstance(x, dict) else x

    return json.dumps([ident(manifest.get("model")), ident(manifest.get("adapter"))], sort_keys=True, default=str)


def group_pools(specs: Sequence[str | PoolSpec]) -> dict[str, list[Pool]]:
    """{policy: its pools}; a ValueError when one label names pools of different models."""
    groups: dict[str, list[Pool]] = {}
    models: dict[str, str] = {}
    seen: set[Path] = set()
    for spec in specs:
        s = spec if isinstance(spec, PoolSpec) else PoolSpec.parse(spec)
        pool = Pool(s.path)
        root = pool.root.resolve()
        if root in seen:
            raise ValueError(f"pool {s.path} is given twice")
        seen.add(root)
        if not pool.candidates_path.exists():
            raise ValueError(f"{s.path}: not a pool (no candidates.jsonl)")
        ident = _model_identity(pool_manifest(pool))
        if s.policy in models and models[s.policy] != ident:
            raise ValueError(f"two pools labelled {s.policy!r} were sampled from different models; label them "
                             "NAME=PATH")
        models[s.policy] = ident
        groups.setdefault(s.policy, []).append(pool)
    if POOLED in groups:
        raise ValueError(f"{POOLED!r} is the pooled row's name; label that pool otherwise (NAME=PATH)")
    return groups


def _problem_sets(units: dict[str, list[UnitFacts]], union: bool) -> dict[str, int]:
    """Problems per policy and shared by all; refuses different sets (unless ``union``) and one problem id
    defined differently in two pools."""
    defs: dict[str, tuple[str, str]] = {}
    sets: dict[str, set[str]] = {}
    for policy, us in units.items():
        sets[policy] = set()
        for u in us:
            sets[policy].add(u.problem_id)
            p = u.grading_problem or u.problem
            d = {} if p is None else {k: v for k, v in p.to_dict().items() if k != "meta"}
            text = json.dumps(d, sort_keys=True, default=str)
            if u.problem_id in defs and defs[u.problem_id][1] != text:
                raise ValueError(f"problem {u.problem_id!r} is defined differently in the pools of "
                                 f"{defs[u.problem_id][0]!r} and {policy!r}")
            defs.setdefault(u.problem_id, (policy, text))
    shared = set.intersection(*sets.values())
    if not union and any(s != shared for s in sets.values()):
        sizes = ", ".join(f"{p}: {len(s)}" for p, s in sets.items())
        raise ValueError(f"the pools cover different problem sets ({sizes}; shared: {len(shared)}); pass --union "
                         "to evaluate their union")
    return {**{p: len(s) for p, s in sets.items()}, "shared": len(shared)}


def evaluate_pools(
    specs: Sequence[str | PoolSpec],
    selectors: Sequence[str] | None = None,
    *,
    union: bool = False,
    by: Sequence[str] = (),
    draws: int = 10_000,
    decomp_draws: int = 2_000,
    seed: int = 0,
    **settings: Any,
) -> MultiEvalResult:
    """Evaluate several policies' pools: each policy on its own (:func:`evaluate_policy`, with K-curves and
    audits), all units pooled, the Table 2 rows (accuracy per selector, CALVER - medoid and CALVER -
    plurality per policy and pooled) and ``by`` breakdowns of the pooled units (field ``policy`` too)."""
    t0 = time.time()
    by = check_fields(by, policy=True)
    groups = group_pools(specs)
    all_pools = [p for ps in groups.values() for p in ps]
    if selectors is None:
        selectors = stored_in_all(all_pools)
    names = list(dict.fromkeys([*selectors, TARGET, BASELINE, MEDOID]))
    units = {policy: [load_units(p) for p in pools] for policy, pools in groups.items()}
    problem_sets = _problem_sets({p: [u for us in per for u in us] for p, per in units.items()}, union)
    per_policy_by = [f for f in by if f != POLICY_FIELD]
    policies = {policy: evaluate_policy(pools, names, units=units[policy], draws=draws, decomp_draws=decomp_draws,
                                        seed=seed, by=per_policy_by, **settings)
                for policy, pools in groups.items()}
    pooled_units: list[UnitFacts] = []
    keys: list[Hashable] = []
    labels: list[str] = []
    picks: dict[str, dict[Hashable, Any]] = {n: {} for n in names}
    for policy, res in policies.items():
        by_key = {u.key: u for us in units[policy] for u in us}
        for row in res.units:
            key = (policy, row.problem_id, row.seed)
            pooled_units.append(by_key[(row.problem_id, row.seed)])
            keys.append(key)
            labels.append(policy)
            for n in names:
                picks[n][key] = row.index[n] if row.index[n] != -1 else _answer_pick(row, n)
    pooled = evaluate_units(pooled_units, picks, draws=draws, decomp_draws=decomp_draws, seed=seed, keys=keys,
                            policies=labels, threshold=settings.get("threshold", 6))
    pooled.n_units_total = sum(r.n_units_total for r in policies.values())
    table = [_row(policy, r) for policy, r in policies.items()] + [_row(POOLED, pooled)]
    return MultiEvalResult(
        policies=policies, pooled=pooled, table=table,
        pools={policy: [str(p.root) for p in pools] for policy, pools in groups.items()},
        union=union, problem_sets=problem_sets,
        breakdowns=breakdowns(pooled_units, picks, by, keys=keys, policies=labels, draws=draws, seed=seed) if by
        else {},
        seconds=time.time() - t0,
    )


def _answer_pick(row, name: str) -> dict[str, Any]:
    """An index -1 selection as the stored-row shape grading reads (its answer built outside the pool)."""
    return {"index": -1, "answer": row.answers.get(name)}


def _row(policy: str, r) -> BreakdownRow:
    return BreakdownRow(stratum=policy, n_units=r.n_units, n_clusters=r.n_clusters, accuracy=dict(r.accuracy),
                     coverage=r.coverage, paired=dict(r.paired))


__all__ = ["MEDOID", "POOLED", "PoolSpec", "evaluate_pools", "group_pools"]
