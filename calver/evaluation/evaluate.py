"""Evaluate selectors on one frozen pool: the full ``results`` dict behind ``calver eval``.

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
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from calver.evaluation import audit_runs
from calver.evaluation.bootstrap import (
    DECOMPOSITION_DRAWS,
    DEFAULT_CLUSTER_KEY,
    HEADLINE_DRAWS,
    mean_ci,
    paired_diff_ci,
)
from calver.evaluation.metrics import (
    BUILTIN_SELECTORS,
    TIE_AUDIT,
    as_pick,
    calibration,
    candidate_arrays,
    coverage,
    fragmented,
    invalid_unique_plurality,
    repair_decomposition,
    selected_correct,
)
from calver.evaluation.scaling import K_GRID, k_curve, registry_prefix_selections, registry_selectors, usable_ks
from calver.evaluation.units import UnitFacts, load_units
from calver.infer.pool import Pool

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


def selector_indices(pool: Pool, units: Sequence[UnitFacts], names: Sequence[str] | None = None
                     ) -> tuple[dict[str, dict[tuple[str, int], int]], dict[str, float]]:
    """{selector: {unit: index}} (-1: an answer built outside the pool) and built-in/stored agreement;
    :func:`selector_picks` keeps the answers that grading an index -1 needs."""
    picks, agreement = selector_picks(pool, units, names)
    return {n: {k: as_pick(s)[0] for k, s in p.items()} for n, p in picks.items()}, agreement


def _outcomes(units, sel) -> dict[str, np.ndarray]:
    return {n: selected_correct(units, [idx[u.key] for u in units]) for n, idx in sel.items()}


def evaluate_units(
    units: Sequence[UnitFacts],
    indices: Mapping[str, Mapping[tuple[str, int], Any]],
    *,
    draws: int = HEADLINE_DRAWS,
    decomp_draws: int = DECOMPOSITION_DRAWS,
    seed: int = 0,
    threshold: float = 6,
    target: str = TARGET,
    baseline: str = BASELINE,
) -> dict[str, Any]:
    """Headline accuracy, paired gains, tie audit, repair decomposition, fragmentation, calibration.

    ``indices``: {selector: {unit: selection}}, a selection being an index or, to grade an index -1
    on its out-of-pool answer, a :class:`~calver.infer.selectors.Selection` or a stored row."""
    common = [u for u in units if all(u.key in idx for idx in indices.values())]
    if not common:
        raise ValueError("no unit is covered by every selector")
    clusters = [u.source_id for u in common]
    out = _outcomes(common, indices)
    cov = coverage(common)
    res: dict[str, Any] = {"n_units": len(common), "n_units_total": len(units), "n_clusters": len(set(clusters)),
                           "cluster_key": DEFAULT_CLUSTER_KEY, "target": target, "baseline": baseline}
    res["accuracy"] = {n: mean_ci(o, clusters, draws=draws, seed=seed) for n, o in out.items()}
    res["coverage"] = mean_ci(cov, clusters, draws=draws, seed=seed)
    res["paired"] = {n: paired_diff_ci(out[target], o, clusters, draws=draws, seed=seed)
                     for n, o in out.items() if n != target}
    ties = _outcomes(common, {n: {u.key: f(u) for u in common} for n, f in TIE_AUDIT.items()})
    res["tie_audit"] = {n: mean_ci(o, clusters, draws=decomp_draws, seed=seed) for n, o in ties.items()}
    res["tie_audit"]["band"] = paired_diff_ci(ties["calver_best"], ties["calver_worst"], clusters,
                                              draws=decomp_draws, seed=seed)
    res["tie_audit"]["n_tied_units"] = int(sum(int(np.sum(u.totals == u.totals.max()) > 1) for u in common))
    a, b = out[target], out[baseline]
    covered = cov.astype(bool)
    frag = np.array([fragmented(u) for u in common])
    uniq = np.array([invalid_unique_plurality(u) for u in common]) & covered
    dec = {"all": repair_decomposition(a, b), "covered": repair_decomposition(a, b, covered)}
    dec["all"]["net_gain_ci"] = paired_diff_ci(a, b, clusters, draws=decomp_draws, seed=seed)
    dec["covered"]["net_gain_ci"] = paired_diff_ci(a, b, clusters, draws=decomp_draws, seed=seed, mask=covered)
    res["decomposition"] = dec
    res["fragmentation"] = {
        "n_covered": int(covered.sum()),
        "n_fragmented": int(frag.sum()),
        "frac_of_covered": float(frag.sum() / covered.sum()) if covered.any() else float("nan"),
        "n_invalid_unique_plurality": int(uniq.sum()),
        "target_acc_in_fragmented": float(a[frag].mean()) if frag.any() else float("nan"),
        "baseline_acc_in_fragmented": float(b[frag].mean()) if frag.any() else float("nan"),
        "target_acc_outside_fragmented": float(a[covered & ~frag].mean()) if (covered & ~frag).any() else float("nan"),
        "baseline_acc_outside_fragmented": (float(b[covered & ~frag].mean()) if (covered & ~frag).any()
                                            else float("nan")),
        "target_acc_in_invalid_plurality": float(a[uniq].mean()) if uniq.any() else float("nan"),
        "gain_in_fragmented": (paired_diff_ci(a, b, clusters, draws=decomp_draws, seed=seed, mask=frag)
                               if frag.any() else None),
        "gain_outside_fragmented": (paired_diff_ci(a, b, clusters, draws=decomp_draws, seed=seed, mask=covered & ~frag)
                                    if (covered & ~frag).any() else None),
        "decomposition_in_fragmented": repair_decomposition(a, b, frag),
    }
    s, c = candidate_arrays(common)
    res["calibration"] = calibration(s, c, threshold)
    res["units"] = []
    for j, u in enumerate(common):
        row = {"problem_id": u.problem_id, "seed": u.seed, "source_id": u.source_id,
               "coverage": bool(cov[j]), "fragmented": bool(frag[j])}
        for n in indices:
            i, answer = as_pick(indices[n][u.key])
            row[f"{n}_index"] = i
            if i == -1:  # an answer built outside the pool (extract-then-solve)
                row[f"{n}_answer"] = answer
        row.update({f"{n}_correct": bool(out[n][j]) for n in out})
        res["units"].append(row)
    return res


def evaluate(
    pool_dir: str,
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
    units: Sequence[UnitFacts] | None = None,
) -> dict[str, Any]:
    """Everything ``calver eval`` reports for one pool, as one JSON-able dict (unrounded numbers).
    ``units``: the pool's :func:`load_units`, when the caller already scored them."""
    t0 = time.time()
    pool = Pool(pool_dir)
    try:
        manifest = pool.manifest()
    except Exception:  # noqa: BLE001 - a manifest-less pool still evaluates; recorded below
        manifest = {}
    units = list(units) if units is not None else load_units(pool)
    indices, agreement = selector_picks(pool, units, selectors)
    res = evaluate_units(units, indices, draws=draws, decomp_draws=decomp_draws, seed=seed, threshold=threshold)
    res["builtin_agreement_with_stored"] = agreement
    common_keys = {(r["problem_id"], r["seed"]) for r in res["units"]}
    common = [u for u in units if u.key in common_keys]
    kk = usable_ks(common, ks)
    if len(kk) >= 2:
        reg = registry_selectors()
        view_names = [n for n in indices if n in reg and n not in BUILTIN_SELECTORS]
        try:
            view_idx = registry_prefix_selections(pool, common, view_names, kk)
        except Exception as e:  # noqa: BLE001 - a registry failure must not lose the built-in curves
            view_idx, res["k_scaling_registry_error"] = {}, f"{type(e).__name__}: {e}"
        res["k_scaling"] = k_curve(common, kk, text_selectors=text_selectors, view_indices=view_idx,
                                   draws=decomp_draws, seed=seed)
    res["strict_ate"] = audit_runs.strict_ate_audit(common)
    if audits:
        res["audits"] = audit_runs.audit_summary(common, limit=audit_limit, seed=seed)
    if ladder:
        res["ladder"] = audit_runs.graph_ladder(common, frac=ladder_frac, seed=seed, draws=decomp_draws)
    res["meta"] = {
        "pool": str(pool.root), "manifest_sha256": hashlib.sha256(repr(sorted(manifest.items())).encode()).hexdigest(),
        "selectors": list(indices), "draws": draws, "decomp_draws": decomp_draws, "seed": seed,
        "threshold": threshold, "cluster_key": DEFAULT_CLUSTER_KEY, "seconds": time.time() - t0,
        "k_max": max((u.k for u in units), default=0),
    }
    return res
