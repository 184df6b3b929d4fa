"""K-prefix scaling: re-run selectors on the first k candidates of one frozen K=32 pool.

Built-in selectors (first, exact plurality, CALVER under each tie rule) are recomputed from the
per-candidate facts, which is exact because a candidate's score does not depend on its neighbours.
Other selectors plug in either as ``select_fn(texts, problem) -> index`` (``text_selectors``) or as
a registry function over firewall views (``calver.infer.selectors.SELECTORS[name](view)`` returning
``(index, scores)``), re-run on every prefix through ``calver.infer.firewall.make_views``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from calver.infer.evaluation.bootstrap import DECOMPOSITION_DRAWS, paired_diff_ci
from calver.infer.evaluation.metrics import BUILTIN_SELECTORS, coverage, selected_correct
from calver.infer.evaluation.table import UnitFacts

K_GRID = (1, 2, 4, 8, 16, 32)
UnitSelector = Callable[[UnitFacts], int]
TextSelector = Callable[[Sequence[str], Any], int]


def usable_ks(units: Sequence[UnitFacts], ks: Sequence[int] = K_GRID) -> list[int]:
    kmax = min((u.k for u in units), default=0)
    return [k for k in ks if k <= kmax]


def _as_index(result: Any) -> int:
    """Registry selectors return (index, scores) or (index, scores, answer); plain ints are accepted."""
    if isinstance(result, (tuple, list)):
        result = result[0]
    return int(result)


def k_curve(
    units: Sequence[UnitFacts],
    ks: Sequence[int] = K_GRID,
    *,
    selectors: Mapping[str, UnitSelector] | None = None,
    text_selectors: Mapping[str, TextSelector] | None = None,
    view_indices: Mapping[str, Mapping[int, Sequence[int]]] | None = None,
    target: str = "calver",
    baseline: str = "plurality",
    draws: int = DECOMPOSITION_DRAWS,
    seed: int = 0,
) -> dict[str, Any]:
    """Accuracy per selector and candidate coverage at each usable k, with the target-baseline gap.

    ``view_indices``: precomputed prefix selections {name: {k: [index per unit]}} (from
    :func:`registry_prefix_indices`), aligned with ``units``.
    """
    selectors = dict(BUILTIN_SELECTORS if selectors is None else selectors)
    text_selectors = dict(text_selectors or {})
    view_indices = dict(view_indices or {})
    ks = usable_ks(units, ks)
    names = list(selectors) + [n for n in text_selectors if n not in selectors] + [
        n for n in view_indices if n not in selectors and n not in text_selectors]
    clusters = [u.source_id for u in units]
    acc: dict[str, list[float]] = {n: [] for n in names}
    cov: list[float] = []
    gaps: list[dict[str, Any] | None] = []
    for k in ks:
        pre = [u.prefix(k) for u in units]
        outcome: dict[str, np.ndarray] = {}
        for n in names:
            if n in selectors:
                idx = [selectors[n](u) for u in pre]
            elif n in text_selectors:
                idx = [int(text_selectors[n](u.texts, u.problem)) for u in pre]
            else:
                idx = list(view_indices[n][k])
            outcome[n] = selected_correct(pre, idx)
            acc[n].append(float(outcome[n].mean()))
        cov.append(float(coverage(pre).mean()))
        if target in outcome and baseline in outcome:
            gaps.append(paired_diff_ci(outcome[target], outcome[baseline], clusters, draws=draws, seed=seed))
        else:
            gaps.append(None)
    return {"ks": ks, "accuracy": acc, "coverage": cov, "gap": gaps, "target": target, "baseline": baseline,
            "n_units": len(units), "n_clusters": len(set(clusters))}


def registry_selectors() -> dict[str, Callable]:
    """``calver.infer.selectors.SELECTORS`` when that module exists, else {}."""
    try:
        from calver.infer.selectors import SELECTORS  # type: ignore[import-not-found]
    except Exception:  # noqa: BLE001 - module absent or broken: scaling falls back to built-ins
        return {}
    return dict(SELECTORS)


def pool_views(pool, k: int | None = None, comparators: Sequence[str] | None = None):
    """Firewall views of a pool's K-prefix, carrying the stored comparator scores that are usable
    (all stored selections first; without them if any lacks per-candidate scores)."""
    from calver.infer.firewall import FirewallError, make_views

    comparators = pool.selection_names() if comparators is None else list(comparators)
    try:
        return make_views(pool, k=k, comparators=comparators)
    except FirewallError:
        return make_views(pool, k=k, comparators=())


def registry_prefix_indices(pool, units: Sequence[UnitFacts], names: Sequence[str], ks: Sequence[int | None],
                            comparators: Sequence[str] | None = None) -> dict[str, dict[int | None, list[int]]]:
    """Re-run registry selectors on firewall views of every K-prefix (``None``: the full pool);
    indices aligned with ``units``."""
    reg = registry_selectors()
    names = [n for n in names if n in reg]
    out: dict[str, dict[int | None, list[int]]] = {n: {} for n in names}
    order = {u.key: i for i, u in enumerate(units)}
    for k in ks:
        views = pool_views(pool, k, comparators)
        for n in names:
            idx = [0] * len(units)
            for v in views:
                if v.unit in order:
                    idx[order[v.unit]] = _as_index(reg[n](v))
            out[n][k] = idx
    return out
