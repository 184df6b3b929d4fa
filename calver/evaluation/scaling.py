"""K-prefix scaling: re-run selectors on the first k candidates of one frozen K=32 pool.

Built-in selectors (first, exact plurality, CALVER) are recomputed from the per-candidate facts with
the selectors package's own rules, which is exact because a candidate's score does not depend on
its neighbours. Other selectors plug in either as ``select_fn(texts, problem) -> index``
(``text_selectors``) or as registry selectors (``calver.infer.selectors.SELECTORS``), re-run on the
firewall views of every prefix through :func:`calver.infer.select.run_selector` (which checks each
view), with each view's verifier scores primed from the units' (a prefix's scores are the first k of
its unit's), so no prefix scores a candidate again. A selection with index -1 (extract-then-solve) is
graded on the answer it carries.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from calver.evaluation.bootstrap import DECOMPOSITION_DRAWS, mean_ci, paired_diff_ci
from calver.evaluation.metrics import BUILTIN_SELECTORS, coverage, selected_correct
from calver.evaluation.units import UnitFacts
from calver.infer.firewall import FirewallError, make_views
from calver.infer.select import run_selector
from calver.infer.selectors import SELECTORS

K_GRID = (1, 2, 4, 8, 16, 32)
UnitSelector = Callable[[UnitFacts], int]
TextSelector = Callable[[Sequence[str], Any], Any]  # -> index (or a Selection)


def _band(values, clusters, draws: int, seed: int) -> list[float]:
    r = mean_ci(np.asarray(values, float), clusters, draws=draws, seed=seed)
    return [r["ci_low"], r["ci_high"]]


def usable_ks(units: Sequence[UnitFacts], ks: Sequence[int] = K_GRID) -> list[int]:
    kmax = min((u.k for u in units), default=0)
    return [k for k in ks if k <= kmax]


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

    ``view_indices``: precomputed prefix selections {name: {k: [selection per unit]}} (indices or
    :class:`~calver.infer.selectors.Selection` s, from :func:`registry_prefix_selections`), aligned
    with ``units``; a selection with index -1 is graded on its ``answer``.
    """
    selectors = dict(BUILTIN_SELECTORS if selectors is None else selectors)
    text_selectors = dict(text_selectors or {})
    view_indices = dict(view_indices or {})
    ks = usable_ks(units, ks)
    names = list(selectors) + [n for n in text_selectors if n not in selectors] + [
        n for n in view_indices if n not in selectors and n not in text_selectors]
    clusters = [u.source_id for u in units]
    acc: dict[str, list[float]] = {n: [] for n in names}
    band: dict[str, list[list[float]]] = {n: [] for n in names + ["coverage"]}  # clustered 95% CI per k
    cov: list[float] = []
    gaps: list[dict[str, Any] | None] = []
    for k in ks:
        pre = [u.prefix(k) for u in units]
        outcome: dict[str, np.ndarray] = {}
        for n in names:
            if n in selectors:
                idx = [selectors[n](u) for u in pre]
            elif n in text_selectors:
                idx = [text_selectors[n](u.texts, u.problem) for u in pre]
            else:
                idx = list(view_indices[n][k])
            outcome[n] = selected_correct(pre, idx)
            acc[n].append(float(outcome[n].mean()))
            band[n].append(_band(outcome[n], clusters, draws, seed))
        covered = coverage(pre)
        cov.append(float(covered.mean()))
        band["coverage"].append(_band(covered, clusters, draws, seed))
        if target in outcome and baseline in outcome:
            gaps.append(paired_diff_ci(outcome[target], outcome[baseline], clusters, draws=draws, seed=seed))
        else:
            gaps.append(None)
    return {"ks": ks, "accuracy": acc, "coverage": cov, "ci": band, "gap": gaps, "target": target, "baseline": baseline,
            "n_units": len(units), "n_clusters": len(set(clusters))}


def registry_selectors() -> dict[str, Callable]:
    """The selector registry (``calver.infer.selectors.SELECTORS``)."""
    return dict(SELECTORS)


def pool_views(pool, k: int | None = None, comparators: Sequence[str] | None = None):
    """Firewall views of a pool's K-prefix, carrying the stored comparator scores that are usable
    (all stored selections first; without them if any lacks per-candidate scores)."""
    comparators = pool.selection_names() if comparators is None else list(comparators)
    try:
        return make_views(pool, k=k, comparators=comparators)
    except FirewallError:
        return make_views(pool, k=k, comparators=())


def with_unit_verdicts(views, units: Sequence[UnitFacts]) -> list:
    """``views`` carrying their unit's verdicts (the view's K-prefix of them) where the unit holds verdicts
    for those very texts; other views score lazily as before."""
    by_key = {u.key: u for u in units}
    out = []
    for v in views:
        u = by_key.get(v.unit)
        if u is not None and u.scores is not None and len(u.scores) >= v.k \
                and tuple(u.texts[: v.k]) == tuple(v.texts):
            v = replace(v, verdicts=tuple(u.scores[: v.k]))
        out.append(v)
    return out


def registry_prefix_selections(pool, units: Sequence[UnitFacts], names: Sequence[str], ks: Sequence[int | None],
                               comparators: Sequence[str] | None = None) -> dict[str, dict[int | None, list[Any]]]:
    """Re-run registry selectors on the firewall views of every K-prefix (``None``: the full pool)
    through :func:`calver.infer.select.run_selector`, scores primed from ``units``;
    :class:`Selection` s aligned with ``units`` (a unit without a view keeps index 0)."""
    reg = registry_selectors()
    names = [n for n in names if n in reg]
    out: dict[str, dict[int | None, list[Any]]] = {n: {} for n in names}
    order = {u.key: i for i, u in enumerate(units)}
    for k in ks:
        views = with_unit_verdicts([v for v in pool_views(pool, k, comparators) if v.unit in order], units)
        for n in names:
            sels: list[Any] = [0] * len(units)
            for v, s in zip(views, run_selector(reg[n], views)):
                sels[order[v.unit]] = s
            out[n][k] = sels
    return out
