"""Median per-trace scoring time (µs) for ate_threshold and knights_knaves.

Usage: ``PYTHONPATH=. python3 benchmarks/families_bench.py [--problems 30] [--traces 8]``

Each problem is scored K times (its canonical trace plus K-1 mutated traces, as in best-of-K),
on a warm process; the per-problem SCM / truth-table preprocessing is amortized the way the
scorer caches it. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time
from random import Random

from calver.data_gen.ate import generate_ate
from calver.data_gen.knights import generate_kk
from calver.verifier import score
from calver.verifier.ate_certificate import strict_certificate


def _kk_pool(problem, k: int, rng: Random) -> list[str]:
    good = problem.family.canonical_trace(problem)
    lines = good.splitlines()
    pool = [good]
    while len(pool) < k:
        ls = list(lines)
        i = rng.randrange(len(ls))
        if ls[i].startswith(("STRATEGY", "ANSWER")):
            ls[i] = ls[i].replace("knight", "K_").replace("knave", "knight").replace("K_", "knave")
        elif ls[i].startswith("CONSTRAINTS"):
            ls[i] = ls[i].rsplit(";", 1)[0] if ";" in ls[i] else ls[i]
        elif ls[i].startswith("RESULT"):
            ls[i] = "RESULT: consistent; models=2"
        pool.append("\n".join(ls))
    return pool


def _ate_pool(problem, k: int, rng: Random) -> list[str]:
    fam = problem.family
    sets = fam.validity_class(problem.graph, fam.normalize_query(problem))
    pool = [fam.canonical_trace(problem)]
    others = [n for n in problem.graph.nodes if n not in ("X", "Y")]
    while len(pool) < k:
        z = rng.choice(sets) if rng.random() < 0.5 else frozenset(n for n in others if rng.random() < 0.4)
        pool.append(fam.canonical_trace(problem, z))
    return pool


def _time(pools, fn=score) -> list[float]:
    out = []
    for problem, traces in pools:
        for t in traces:
            t0 = time.perf_counter()
            fn(t, problem) if fn is score else fn(problem, t)
            out.append((time.perf_counter() - t0) * 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=30)
    ap.add_argument("--traces", type=int, default=8)
    args = ap.parse_args()
    rng = Random(0)
    rows = []
    for n_nodes in (4, 6, 8):
        pools = []
        for i in range(args.problems):
            p = generate_ate(i, seed=100, n_nodes=n_nodes)
            pools.append((p, _ate_pool(p, args.traces, rng)))
        _time(pools[:2])  # warm-up
        us = _time(pools)
        rows.append(("ate_threshold", f"{n_nodes} nodes", statistics.median(us), len(us)))
        us = _time(pools, strict_certificate)
        rows.append(("ate strict certificate", f"{n_nodes} nodes", statistics.median(us), len(us)))
    for n in (4, 8, 10):
        pools = []
        for i in range(args.problems):
            p = generate_kk(n, i, seed=100)
            pools.append((p, _kk_pool(p, args.traces, rng)))
        _time(pools[:2])
        us = _time(pools)
        rows.append(("knights_knaves", f"{n} people", statistics.median(us), len(us)))
    print("| family | size | median µs / trace | traces |")
    print("|---|---|---:|---:|")
    for fam, size, med, cnt in rows:
        print(f"| {fam} | {size} | {med:.0f} | {cnt} |")


if __name__ == "__main__":
    main()
