"""Benchmark: clustered paired bootstrap, vectorized (numpy) vs the slow reference loop.

10,000 draws over 1,111 problem-seed units in ~300 source-problem clusters (the paper's matched
pool size). Both paths consume the same RNG stream, so their intervals agree to float rounding.

    PYTHONPATH=. python3 benchmarks/bootstrap_bench.py [--draws 10000] [--units 1111] [--clusters 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calver.evaluation.bootstrap import paired_diff_ci, reference_paired_diff


def _time(fn, repeat: int) -> tuple[float, dict]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10_000)
    ap.add_argument("--units", type=int, default=1111)
    ap.add_argument("--clusters", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    clusters = np.concatenate([np.arange(args.clusters), rng.integers(0, args.clusters, args.units - args.clusters)])
    a = (rng.random(args.units) < 0.42).astype(float)
    b = (rng.random(args.units) < 0.30).astype(float)
    keys = [f"src{c}" for c in clusters]

    fast_s, fast = _time(lambda: paired_diff_ci(a, b, keys, draws=args.draws, seed=args.seed), args.repeat)
    slow_s, slow = _time(lambda: reference_paired_diff(a, b, keys, draws=args.draws, seed=args.seed), 1)
    rows = [
        ("vectorized (bincount @ matmul)", fast_s, fast["mean_diff"], fast["ci_low"], fast["ci_high"]),
        ("reference (python loop)", slow_s, slow["mean_diff"], slow["ci_low"], slow["ci_high"]),
    ]
    print(f"clustered paired bootstrap: {args.draws} draws, {args.units} units, {args.clusters} clusters")
    print(f"{'implementation':<32} {'seconds':>9} {'mean diff':>10} {'CI low':>9} {'CI high':>9}")
    for name, s, m, lo, hi in rows:
        print(f"{name:<32} {s:>9.4f} {m:>10.5f} {lo:>9.5f} {hi:>9.5f}")
    print(f"{'speed-up (reference / vectorized)':<32} {slow_s / fast_s:>9.1f}x")
    same = all(abs(fast[k] - slow[k]) < 1e-12 for k in ("mean_diff", "ci_low", "ci_high"))
    print(f"same numbers: {same}; within the 1 s budget: {fast_s <= 1.0}")


if __name__ == "__main__":
    main()
