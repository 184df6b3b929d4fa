"""Clustered paired bootstrap: vectorized path vs the slow reference loop, and its bookkeeping."""


import numpy as np
import pytest

from calver.evaluation.bootstrap import (
    bootstrap_means,
    cluster_codes,
    count_matrix,
    draw_cluster_indices,
    mean_ci,
    paired_change_ci,
    paired_diff_ci,
    reference_paired_diff,
)


def _data(n_units=60, n_clusters=17, seed=3):
    rng = np.random.default_rng(seed)
    clusters = [f"s{rng.integers(n_clusters)}" for _ in range(n_units)]
    a = rng.random(n_units) < 0.6
    b = rng.random(n_units) < 0.4
    return a.astype(float), b.astype(float), clusters


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_vectorized_matches_slow_reference(seed):
    a, b, clusters = _data(seed=seed)
    fast = paired_diff_ci(a, b, clusters, draws=500, seed=seed)
    slow = reference_paired_diff(a, b, clusters, draws=500, seed=seed)
    for key in ("mean_diff", "ci_low", "ci_high"):
        assert fast[key] == pytest.approx(slow[key], abs=1e-12)


def test_count_matrix_rows_are_multiplicities():
    idx = draw_cluster_indices(7, 50, 4)
    counts = count_matrix(idx, 7)
    assert counts.shape == (50, 7)
    assert np.all(counts.sum(1) == 7)
    for row, crow in zip(idx, counts):
        assert np.array_equal(np.bincount(row, minlength=7), crow)


def test_clusters_resampled_whole():
    # Two clusters with constant per-unit differences: every draw's mean is a mix of whole clusters.
    a = np.array([1, 1, 1, 0, 0], float)
    b = np.zeros(5)
    clusters = ["p", "p", "p", "q", "q"]
    _, boot = bootstrap_means(a - b, clusters, draws=2000, seed=0)
    allowed = {1.0, 0.0, 3 / 5}  # {p,p}, {q,q}, {p,q}
    assert set(np.round(boot[:, 0], 12)) <= {round(x, 12) for x in allowed}


def test_point_estimate_independent_of_draws_and_records_provenance():
    a, b, clusters = _data()
    r1 = paired_diff_ci(a, b, clusters, draws=100, seed=0)
    r2 = paired_diff_ci(a, b, clusters, draws=10_000, seed=9)
    assert r1["mean_diff"] == r2["mean_diff"] == pytest.approx(a.mean() - b.mean(), abs=1e-15)
    assert r2["draws"] == 10_000 and r2["cluster_key"] == "source_id" and r2["seed"] == 9
    assert r2["n_units"] == len(a) and r2["n_clusters"] == len(set(clusters))
    assert r2["ci_low"] <= r2["mean_diff"] <= r2["ci_high"]
    assert r1["mean_a"] == pytest.approx(a.mean()) and r1["mean_b"] == pytest.approx(b.mean())


@pytest.mark.parametrize("seed", [0, 7])
def test_change_is_b_minus_a_with_each_mean_under_its_own_name(seed):
    a, b, clusters = _data(seed=seed)
    got = paired_change_ci(a, b, clusters, draws=400, seed=seed, cluster_key="row")
    slow = reference_paired_diff(b, a, clusters, draws=400, seed=seed)  # the loop's b − a, independently
    assert got["estimate"] == pytest.approx(b.mean() - a.mean(), abs=1e-12)
    for key in ("mean_diff", "ci_low", "ci_high"):
        assert got[key] == pytest.approx(slow[key], abs=1e-12)
    assert got["mean_a"] == pytest.approx(a.mean()) and got["mean_b"] == pytest.approx(b.mean())
    assert got["cluster_key"] == "row"


def test_mask_gives_conditional_mean():
    a, b, clusters = _data()
    mask = np.arange(len(a)) % 3 == 0
    r = paired_diff_ci(a, b, clusters, draws=300, seed=1, mask=mask)
    assert r["mean_diff"] == pytest.approx((a - b)[mask].mean())
    assert r["n_units"] == int(mask.sum())
    r2 = mean_ci(a, clusters, draws=300, seed=1, mask=mask)
    assert r2["estimate"] == pytest.approx(a[mask].mean())


def test_cluster_codes_first_seen_order():
    codes, c = cluster_codes(["b", "a", "b", "c"])
    assert c == 3 and codes.tolist() == [0, 1, 0, 2]


def test_headline_10000_draws_1111_units_records_draws():
    # speed is measured in benchmarks/bootstrap_bench.py, not here
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, 300, size=1111)
    a = (rng.random(1111) < 0.42).astype(float)
    b = (rng.random(1111) < 0.30).astype(float)
    r = paired_diff_ci(a, b, clusters, draws=10_000, seed=0)
    assert r["draws"] == 10_000 and r["ci_low"] <= r["mean_diff"] <= r["ci_high"]
