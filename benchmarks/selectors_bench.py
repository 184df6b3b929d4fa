"""Benchmark: six-bit scoring + every non-neural selector over 1,111 problem-seed units x K=8.

    python benchmarks/selectors_bench.py [--units 1111] [--k 8] [--repeat 3]

Synthetic pools: ``synthetic_units`` of ``tests/fixtures.py`` (loaded by path; the tests use the same
pools): generated 6-9 node graphs, find-one-valid queries (backdoor, separation, mediator, frontdoor),
candidates drawn from canonical traces of valid answers (several distinct ones, as in a fragmented
pool), canonical traces of invalid answers, and damaged traces. Time is measured from fresh views
(nothing cached) through all non-neural selectors; the table prints per-selector and total seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests_module import tests_module

from calver.infer.firewall import SelectorView, strip_problem


def fresh_views(units) -> list[SelectorView]:
    stripped = {}
    views = []
    for p, s, texts in units:
        if p.id not in stripped:
            stripped[p.id] = strip_problem(p)
        views.append(SelectorView(p.id, s, stripped[p.id], tuple(texts), tuple(range(len(texts)))))
    return views


def bench(units, repeat: int = 3) -> dict[str, float]:
    from calver.infer.select import run_selector
    from calver.infer.selectors import NON_NEURAL, SELECTORS, candidate_scores

    best: dict[str, float] = {}
    for _ in range(repeat):
        views = fresh_views(units)
        times = {}
        t0 = time.perf_counter()
        for v in views:
            candidate_scores(v)
        times["scoring (6 bits, all candidates)"] = time.perf_counter() - t0
        for name in NON_NEURAL:
            t = time.perf_counter()
            run_selector(SELECTORS[name], views)
            times[name] = time.perf_counter() - t
        times["TOTAL"] = time.perf_counter() - t0
        for key, val in times.items():
            best[key] = min(best.get(key, float("inf")), val)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--units", type=int, default=1111)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=2.0, help="seconds allowed for the TOTAL row")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    units = tests_module("fixtures").synthetic_units(args.units, args.k)
    print(f"built {len(units)} units x K={args.k} in {time.perf_counter() - t:.1f}s (not timed below)")
    res = bench(units, args.repeat)
    n = len(units) * args.k
    print(f"\n| stage | seconds (best of {args.repeat}) | ms / candidate |")
    print("|---|---:|---:|")
    for key, val in res.items():
        print(f"| {key} | {val:.3f} | {1000 * val / n:.3f} |")
    ok = res["TOTAL"] <= args.budget
    print(f"\nTOTAL {res['TOTAL']:.3f}s for {len(units)} units x K={args.k} "
          f"({'within' if ok else 'OVER'} the {args.budget:g}s budget)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
