"""Evaluate selectors on frozen pools: the typed :class:`~calver.evaluation.results.EvalResult` behind
``calver eval`` (one pool, or one policy's pools; several policies: :mod:`calver.evaluation.multi`).

Selectors: the pool's stored selections (``selections/<name>.jsonl``) plus the built-ins computed
from per-candidate facts with the selectors package's rules (``first``, exact ``plurality``,
``calver``); any other registry selector is run on the pool's firewall views through
:func:`calver.infer.select.run_selector`. A stored selection with a built-in's name wins; the
built-in's agreement with it is recorded. Comparisons use only the units every requested selector
covers. Correctness is the task predicate on the source graph: the selected candidate's, or for
index -1 (extract-then-solve) ``grade(problem, answer)`` on the answer the selector returned.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from calver.evaluation import audit_runs
from calver.evaluation.bootstrap import (
    DECOMPOSITION_DRAWS,
    DEFAULT_CLUSTER_KEY,
    HEADLINE_DRAWS,
    mean_ci,
    paired_diff_ci,
)
from calver.evaluation.breakdowns import breakdowns, check_fields, verification_counts
from calver.evaluation.graph_recovery import recover_units, summarize
from calver.evaluation.metrics import (
    BUILTIN_SELECTORS,
    TIE_AUDIT,
    as_pick,
    calibration,
    candidate_arrays,
    coverage,
    fragmented,
    invalid_unique_plurality,
    pick_scores,
    repair_decomposition,
    selected_correct,
    within_pool_auroc,
)
from calver.evaluation.results import (
    Audits,
    Calibration,
    Decomposition,
    EvalMeta,
    EvalResult,
    Fragmentation,
    Interval,
    KCurve,
    Ladder,
    StrictAte,
    TieAudit,
    UnitRow,
    to_json,
)
from calver.evaluation.scaling import K_GRID, k_curve, registry_prefix_selections, registry_selectors, usable_ks
from calver.evaluation.units import UnitFacts, load_units
from calver.infer.pool import Pool, PoolError

TARGET = "calver"
BASELINE = "plurality"


def selector_picks(pool: Pool, units: Sequence[UnitFacts], names: Sequence[str] | None = None
                   ) -> tuple[dict[str, dict[tuple[str, int], Any]], dict[str, float]]:
    """{selector: {unit: selection}} for stored, built-in and registry selectors, and built-in/stored
    agreement. A selection is an index, a stored row or a :class:`~calver.infer.selectors.Selection`
    (:func:`~calver.evaluation.metrics.as_pick`), so an index -1 keeps its answer."""
    stored_names = pool.selection_names()
    wanted = list(names) if names else list(dict.fromkeys([*BUILTIN_SELECTORS, *stored_names]))
    for must in (TARGET, BASELINE):
        if must not in wanted:
            wanted.append(must)
    out: dict[str, dict[tuple[str, int], Any]] = {}
    agreement: dict[str, float] = {}
    for name in wanted:
        builtin = None
        if name in BUILTIN_SELECTORS:
            builtin = {u.key: int(BUILTIN_SELECTORS[name](u)) for u in units}
        if name in stored_names:
            out[name] = dict(pool.selection(name))
            if builtin is not None:
                common = [k for k in builtin if k in out[name]]
                agreement[name] = (float(np.mean([builtin[k] == as_pick(out[name][k])[0] for k in common]))
                                   if common else float("nan"))
        elif builtin is not None:
            out[name] = builtin
        elif name in registry_selectors():
            sels = registry_prefix_selections(pool, units, [name], [None])[name][None]
            out[name] = {u.key: s for u, s in zip(units, sels)}
        else:
            raise KeyError(f"selector {name!r} is neither stored in {pool.root}/selections, built in "
                           f"({', '.join(BUILTIN_SELECTORS)}), nor in calver.infer.selectors.SELECTORS")
    return out, agreement


def _outcomes(units, sel, keys) -> dict[str, np.ndarray]:
    return {n: selected_correct(units, [idx[k] for k in keys]) for n, idx in sel.items()}


def _fragmentation(a: np.ndarray, b: np.ndarray, covered: np.ndarray, frag: np.ndarray, uniq: np.ndarray,
                   clusters: list[str], draws: int, seed: int) -> Fragmentation:
    inside, outside = frag, covered & ~frag

    def mean(x: np.ndarray, m: np.ndarray) -> float:
        return float(x[m].mean()) if m.any() else float("nan")

    def gain(m: np.ndarray) -> Interval | None:
        return Interval.of(paired_diff_ci(a, b, clusters, draws=draws, seed=seed, mask=m)) if m.any() else None

    return Fragmentation(
        n_covered=int(covered.sum()), n_fragmented=int(frag.sum()),
        frac_of_covered=float(frag.sum() / covered.sum()) if covered.any() else float("nan"),
        n_invalid_unique_plurality=int(uniq.sum()),
        target_acc_in_fragmented=mean(a, inside), baseline_acc_in_fragmented=mean(b, inside),
        target_acc_outside_fragmented=mean(a, outside), baseline_acc_outside_fragmented=mean(b, outside),
        target_acc_in_invalid_plurality=mean(a, uniq),
        decomposition_in_fragmented=Decomposition.from_dict(to_json(repair_decomposition(a, b, frag))),
        gain_in_fragmented=gain(inside), gain_outside_fragmented=gain(outside),
    )


def evaluate_units(
    units: Sequence[UnitFacts],
    indices: Mapping[str, Mapping[Hashable, Any]],
    *,
    draws: int = HEADLINE_DRAWS,
    decomp_draws: int = DECOMPOSITION_DRAWS,
    seed: int = 0,
    threshold: float = 6,
    target: str = TARGET,
    baseline: str = BASELINE,
    keys: Sequence[Hashable] | None = None,
    policies: Sequence[str] | None = None,
) -> EvalResult:
    """Headline accuracy, paired gains, tie audit, repair decomposition, fragmentation, calibration.

    ``indices``: {selector: {unit key: selection}}, a selection being an index or, to grade an index -1
    on its out-of-pool answer, a :class:`~calver.infer.selectors.Selection` or a stored row. A unit's key
    is ``u.key`` unless ``keys`` (aligned with ``units``) says otherwise: units pooled from several pools
    are keyed by (policy, problem, seed), their ``policies`` label the unit rows. Intervals resample
    clusters of ``u.source_id``, so one source problem sampled by several policies is one cluster."""
    keys = [u.key for u in units] if keys is None else list(keys)
    if len(keys) != len(units) or (policies is not None and len(policies) != len(units)):
        raise ValueError("evaluate_units: keys / policies must align with units")
    keep = [j for j, k in enumerate(keys) if all(k in idx for idx in indices.values())]
    if not keep:
        raise ValueError("no unit is covered by every selector")
    common = [units[j] for j in keep]
    ckeys = [keys[j] for j in keep]
    clusters = [u.source_id for u in common]
    out = _outcomes(common, indices, ckeys)
    cov = coverage(common)

    def ci(x: np.ndarray, n: int = draws) -> Interval:
        return Interval.of(mean_ci(x, clusters, draws=n, seed=seed))

    def paired(x: np.ndarray, y: np.ndarray, n: int = draws, mask: np.ndarray | None = None) -> Interval:
        return Interval.of(paired_diff_ci(x, y, clusters, draws=n, seed=seed, mask=mask))

    ties = _outcomes(common, {n: {k: f(u) for u, k in zip(common, ckeys)} for n, f in TIE_AUDIT.items()}, ckeys)
    a, b = out[target], out[baseline]
    covered = cov.astype(bool)
    frag = np.array([fragmented(u) for u in common])
    uniq = np.array([invalid_unique_plurality(u) for u in common]) & covered

    def decomposition(mask: np.ndarray | None) -> Decomposition:
        d = Decomposition.from_dict(to_json(repair_decomposition(a, b, mask)))
        d.net_gain_ci = paired(a, b, decomp_draws, mask)
        return d

    s, c = candidate_arrays(common)
    ranking: dict[str, Interval] = {}
    for n, idx in indices.items():
        picked = [pick_scores(idx[k]) for k in ckeys]
        # the target (CALVER) may pick without per-candidate scores: its scores are the verifier totals
        scores = [list(map(float, u.totals)) if n == target and p is None else p for u, p in zip(common, picked)]
        vals, cl = within_pool_auroc(common, scores)
        if vals:
            ranking[n] = Interval.of(mean_ci(vals, cl, draws=decomp_draws, seed=seed))
    rows = []
    for j, (u, key) in enumerate(zip(common, ckeys)):
        row = UnitRow(problem_id=u.problem_id, seed=u.seed, source_id=u.source_id, coverage=bool(cov[j]),
                      fragmented=bool(frag[j]), policy=None if policies is None else policies[keep[j]])
        for n in indices:
            i, answer = as_pick(indices[n][key])
            row.index[n] = i
            if i == -1:  # an answer built outside the pool (extract-then-solve)
                row.answers[n] = answer
        row.correct.update({n: bool(out[n][j]) for n in out})
        rows.append(row)
    return EvalResult(
        n_units=len(common), n_units_total=len(units), n_clusters=len(set(clusters)),
        cluster_key=DEFAULT_CLUSTER_KEY, target=target, baseline=baseline,
        accuracy={n: ci(o) for n, o in out.items()},
        coverage=ci(cov),
        paired={n: paired(out[target], o) for n, o in out.items() if n != target},
        tie_audit=TieAudit(
            calver_first=ci(ties["calver_first"], decomp_draws), calver_best=ci(ties["calver_best"], decomp_draws),
            calver_worst=ci(ties["calver_worst"], decomp_draws),
            band=paired(ties["calver_best"], ties["calver_worst"], decomp_draws),
            n_tied_units=int(sum(int(np.sum(u.totals == u.totals.max()) > 1) for u in common))),
        decomposition={"all": decomposition(None), "covered": decomposition(covered)},
        fragmentation=_fragmentation(a, b, covered, frag, uniq, clusters, decomp_draws, seed),
        calibration=Calibration.from_dict(to_json(calibration(s, c, threshold))),
        units=rows,
        verification=verification_counts(common),
        parse_rate=_parse_rate(units),
        within_pool_auroc=ranking,
    )


def _parse_rate(units: Sequence[UnitFacts]) -> float | None:
    keys = [k for u in units for k in u.answer_keys]
    return sum(k is not None for k in keys) / len(keys) if keys else None


def evaluate(
    pool_dir: str,
    selectors: Sequence[str] | None = None,
    *,
    units: Sequence[UnitFacts] | None = None,
    **settings: Any,
) -> EvalResult:
    """Everything ``calver eval`` reports for one pool (unrounded numbers). ``units``: the pool's
    :func:`load_units`, when the caller already scored them; ``settings``: those of
    :func:`evaluate_policy` (draws, ks, audits, ``by`` breakdown fields ...)."""
    return evaluate_policy([Pool(pool_dir)], selectors, units=None if units is None else [units], **settings)


def pool_manifest(pool: Pool) -> dict[str, Any]:
    """The pool's manifest, or {} for a manifest-less pool (it still evaluates; its digest says so)."""
    try:
        return pool.manifest()
    except (PoolError, ValueError):  # missing, or not JSON
        return {}


def stored_in_all(pools: Sequence[Pool]) -> list[str]:
    """The default selectors of several pools: the built-ins plus the selections every pool stores."""
    stored = [set(p.selection_names()) for p in pools]
    common = set.intersection(*stored) if stored else set()
    return list(dict.fromkeys([*BUILTIN_SELECTORS, *sorted(common)]))


def evaluate_policy(
    pools: Sequence[Pool],
    selectors: Sequence[str] | None = None,
    *,
    draws: int = HEADLINE_DRAWS,
    decomp_draws: int = DECOMPOSITION_DRAWS,
    seed: int = 0,
    ks: Sequence[int] = K_GRID,
    threshold: float = 6,
    audits: bool = True,
    ladder: bool = True,
    audit_limit: int | None = None,
    ladder_frac: float = 0.1,
    text_selectors: Mapping[str, Callable] | None = None,
    units: Sequence[Sequence[UnitFacts]] | None = None,
    by: Sequence[str] = (),
) -> EvalResult:
    """One policy's evaluation over its pools (several sampling seeds of one policy may sit in several
    pools; a (problem, seed) unit may appear in only one of them). ``units``: per pool, its scored units."""
    t0 = time.time()
    if not pools:
        raise ValueError("evaluate_policy needs at least one pool")
    if by:
        check_fields(by)
    if selectors is None and len(pools) > 1:
        selectors = stored_in_all(pools)
    per_pool = [list(u) for u in units] if units is not None else [load_units(p) for p in pools]
    all_units: list[UnitFacts] = []
    indices: dict[str, dict[Hashable, Any]] = {}
    home: dict[Hashable, Pool] = {}
    agreement: dict[str, float] = {}
    for pool, us in zip(pools, per_pool):
        picks, agr = selector_picks(pool, us, selectors)
        for u in us:
            if u.key in home:
                raise ValueError(f"unit {u.key} is in both {home[u.key].root} and {pool.root}: pools of one policy "
                                 "must hold different (problem, seed) units")
            home[u.key] = pool
        for n, d in picks.items():
            indices.setdefault(n, {}).update(d)
        agreement.update(agr if len(pools) == 1 else {f"{n} ({pool.root})": v for n, v in agr.items()})
        all_units += us
    res = evaluate_units(all_units, indices, draws=draws, decomp_draws=decomp_draws, seed=seed, threshold=threshold)
    res.builtin_agreement_with_stored = agreement
    common_keys = {(r.problem_id, r.seed) for r in res.units}
    common = [u for u in all_units if u.key in common_keys]
    kk = usable_ks(common, ks)
    if len(kk) >= 2:
        reg = registry_selectors()
        view_names = [n for n in indices if n in reg and n not in BUILTIN_SELECTORS]
        try:
            view_idx = _prefix_selections(pools, home, common, view_names, kk)
        except Exception as e:  # noqa: BLE001 - a registry failure must not lose the built-in curves
            view_idx, res.k_scaling_registry_error = {}, f"{type(e).__name__}: {e}"
        res.k_scaling = KCurve.from_dict(to_json(k_curve(common, kk, text_selectors=text_selectors,
                                                         view_indices=view_idx, draws=decomp_draws, seed=seed)))
    res.strict_ate = StrictAte.from_dict(to_json(audit_runs.strict_ate_audit(common)))
    if audits:
        res.audits = Audits.from_dict(to_json(audit_runs.audit_summary(common, limit=audit_limit, seed=seed)))
    if ladder:
        res.ladder = Ladder.from_dict(to_json(audit_runs.graph_ladder(common, frac=ladder_frac, seed=seed,
                                                                      draws=decomp_draws)))
    recovery = recover_units(common, indices, selectors=(TARGET, BASELINE))  # constructed-mode units only
    res.graph_recovery = summarize(list(recovery.values()), draws=draws, seed=seed)
    if by:
        res.breakdowns = breakdowns(common, indices, by, draws=draws, seed=seed, recovery=recovery)
    manifests = [pool_manifest(p) for p in pools]
    res.meta = EvalMeta(
        pool=", ".join(str(p.root) for p in pools),
        manifest_sha256=", ".join(manifest_digest(m) for m in manifests), selectors=list(indices), draws=draws,
        decomp_draws=decomp_draws, seed=seed, threshold=threshold, cluster_key=DEFAULT_CLUSTER_KEY,
        k_max=max((u.k for u in all_units), default=0), seconds=time.time() - t0,
    )
    return res


def _prefix_selections(pools: Sequence[Pool], home: Mapping[Hashable, Pool], common: Sequence[UnitFacts],
                       names: Sequence[str], ks: Sequence[int]) -> dict[str, dict[int | None, list[Any]]]:
    """Registry selections on every K-prefix, per pool, aligned with ``common``."""
    out: dict[str, dict[int | None, list[Any]]] = {n: {k: [None] * len(common) for k in ks} for n in names}
    for pool in pools:
        pos = [j for j, u in enumerate(common) if home[u.key] is pool]
        if not pos:
            continue
        sel = registry_prefix_selections(pool, [common[j] for j in pos], names, ks)
        for n, per_k in sel.items():
            for k, picks in per_k.items():
                for j, s in zip(pos, picks):
                    out[n][k][j] = s
    return out


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    """The digest of a pool manifest that a report names (over its sorted items)."""
    return hashlib.sha256(repr(sorted(manifest.items())).encode()).hexdigest()
