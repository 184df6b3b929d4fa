"""Clustered paired bootstrap, vectorized with numpy.

Clusters are source problems: every unit (problem-seed pool) derived from one source problem
(paraphrases, encodings, policies, seeds) is resampled together. One draw picks ``C`` cluster ids
uniformly with replacement; with per-cluster column sums ``S`` (C x m) and unit counts ``n`` (C),
the draw's mean of column j is ``(w @ S[:, j]) / (w @ n)`` where ``w`` is the draw's cluster
multiplicity vector. All draws at once: a (draws x C) count matrix built with one ``np.bincount``
and one matrix product, so 10,000 draws over ~1,000 units take milliseconds.

Every result dict records ``cluster_key``, ``draws`` and ``seed`` so an interval can be traced to
the resampling that produced it. Point estimates are computed on the original data (unrounded) and
do not depend on the number of draws.
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

import numpy as np

HEADLINE_DRAWS = 10_000
DECOMPOSITION_DRAWS = 2_000
DEFAULT_CLUSTER_KEY = "source_id"


def cluster_codes(keys: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Integer codes 0..C-1 for cluster keys, in first-seen order, and C."""
    index: dict[Hashable, int] = {}
    codes = np.empty(len(keys), dtype=np.int64)
    for i, k in enumerate(keys):
        codes[i] = index.setdefault(k, len(index))
    return codes, len(index)


def draw_cluster_indices(n_clusters: int, draws: int, seed: int | np.random.Generator) -> np.ndarray:
    """The (draws x C) matrix of resampled cluster ids; the single RNG call every path shares."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return rng.integers(0, n_clusters, size=(draws, n_clusters))


def count_matrix(idx: np.ndarray, n_clusters: int) -> np.ndarray:
    """Row-wise multiplicities of a (draws x C) index matrix: one bincount over offset ids."""
    draws = idx.shape[0]
    flat = (idx + n_clusters * np.arange(draws, dtype=np.int64)[:, None]).ravel()
    return np.bincount(flat, minlength=draws * n_clusters).reshape(draws, n_clusters).astype(np.float64)


def resampled_sums(values: np.ndarray, codes: np.ndarray, n_clusters: int, idx: np.ndarray) -> np.ndarray:
    """Per-draw column sums over resampled clusters: (draws x m) = counts @ per-cluster sums."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    per_cluster = np.zeros((n_clusters, values.shape[1]))
    np.add.at(per_cluster, codes, values)
    return count_matrix(idx, n_clusters) @ per_cluster


def bootstrap_means(
    values: np.ndarray, clusters: Sequence[Hashable], draws: int = HEADLINE_DRAWS, seed: int = 0,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Point means (m,) and bootstrap means (draws x m) of the columns of ``values`` (n x m).

    ``mask`` (n,) restricts the mean to a subset of units while resampling all clusters (a
    conditional mean within the draw); a draw with no unit of the subset gives NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    codes, c = cluster_codes(clusters)
    if len(codes) == 0:
        raise ValueError("bootstrap needs at least one unit")
    w = np.ones(len(codes)) if mask is None else np.asarray(mask, dtype=np.float64)
    stacked = np.column_stack([values * w[:, None], w])
    idx = draw_cluster_indices(c, draws, seed)
    sums = resampled_sums(stacked, codes, c, idx)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = sums[:, :-1] / sums[:, -1:]
        point = stacked[:, :-1].sum(0) / stacked[:, -1].sum()
    return point, boot


def _interval(point: float, boot: np.ndarray, alpha: float) -> tuple[float, float]:
    finite = boot[np.isfinite(boot)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def _result(point: float, boot: np.ndarray, n: int, c: int, draws: int, seed: int, alpha: float,
            cluster_key: str, **extra: Any) -> dict[str, Any]:
    lo, hi = _interval(point, boot, alpha)
    return {
        "estimate": float(point), "ci_low": lo, "ci_high": hi, "alpha": alpha, "draws": int(draws),
        "cluster_key": cluster_key, "seed": seed, "n_units": int(n), "n_clusters": int(c),
        "method": "clustered percentile bootstrap", **extra,
    }


def mean_ci(values: Sequence[float], clusters: Sequence[Hashable], *, draws: int = HEADLINE_DRAWS,
            seed: int = 0, alpha: float = 0.05, cluster_key: str = DEFAULT_CLUSTER_KEY,
            mask: np.ndarray | None = None) -> dict[str, Any]:
    """Mean of ``values`` with a clustered bootstrap percentile interval."""
    point, boot = bootstrap_means(np.asarray(values, float), clusters, draws, seed, mask)
    n = int(len(values) if mask is None else np.sum(mask))
    return _result(point[0], boot[:, 0], n, len(set(clusters)), draws, seed, alpha, cluster_key)


def paired_diff_ci(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable], *,
                   draws: int = HEADLINE_DRAWS, seed: int = 0, alpha: float = 0.05,
                   cluster_key: str = DEFAULT_CLUSTER_KEY, mask: np.ndarray | None = None) -> dict[str, Any]:
    """Paired difference mean(a - b) on the same units, clustered bootstrap interval.

    ``a`` and ``b`` are per-unit outcomes (1 = selected answer correct) of two selectors on one
    frozen pool. The result also carries both means (``mean_a``/``mean_b``) on the same draws.
    """
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError("paired outcomes must have the same shape")
    point, boot = bootstrap_means(np.column_stack([a - b, a, b]), clusters, draws, seed, mask)
    n = int(len(a) if mask is None else np.sum(mask))
    res = _result(point[0], boot[:, 0], n, len(set(clusters)), draws, seed, alpha, cluster_key,
                  mean_a=float(point[1]), mean_b=float(point[2]))
    res["mean_diff"] = res["estimate"]
    return res


def paired_change_ci(a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable], *,
                     draws: int = HEADLINE_DRAWS, seed: int = 0, alpha: float = 0.05,
                     cluster_key: str = DEFAULT_CLUSTER_KEY, mask: np.ndarray | None = None) -> dict[str, Any]:
    """The change from ``a`` to ``b``: mean(b - a) on the same units, as :func:`paired_diff_ci` computes it,
    with ``mean_a`` and ``mean_b`` each its own side's mean (what a before/after comparison reports)."""
    res = paired_diff_ci(b, a, clusters, draws=draws, seed=seed, alpha=alpha, cluster_key=cluster_key, mask=mask)
    res["mean_a"], res["mean_b"] = res["mean_b"], res["mean_a"]
    return res


def reference_paired_diff(a, b, clusters, *, draws: int, seed: int, alpha: float = 0.05) -> dict[str, float]:
    """Slow reference: an explicit Python loop over draws and units (same RNG stream). For tests."""
    codes, c = cluster_codes(clusters)
    members: dict[int, list[int]] = {}
    for i, k in enumerate(codes):
        members.setdefault(int(k), []).append(i)
    idx = draw_cluster_indices(c, draws, seed)
    stats = []
    for row in idx:
        total, count = 0.0, 0
        for k in row:
            for i in members[int(k)]:
                total += float(a[i]) - float(b[i])
                count += 1
        stats.append(total / count)
    stats.sort()

    def q(p: float) -> float:  # linear interpolation, numpy's default percentile rule
        pos = p * (len(stats) - 1)
        lo = int(np.floor(pos))
        hi = min(lo + 1, len(stats) - 1)
        return stats[lo] + (stats[hi] - stats[lo]) * (pos - lo)

    point = sum(float(x) - float(y) for x, y in zip(a, b)) / len(a)
    return {"mean_diff": point, "ci_low": q(alpha / 2), "ci_high": q(1 - alpha / 2)}
