"""Synthetic-generator throughput: problems/s per family, validity-class enumeration included.

    PYTHONPATH=. python3 benchmarks/datagen_bench.py [--n 500] [--nodes 5-10] [--many-satisfier]

One single-threaded process (one core, no parallelism). ``gen/s`` times ``generate`` (graph drawing, query
proposal, validity-class enumeration, prompt rendering); ``+trace/s`` adds the canonical trace;
``|V|`` is the mean validity-class size. Rates are per CPU-second of this process
(``time.process_time``), so a loaded machine does not understate them; ``wall/s`` is wall-clock.
Target: >= 2,000 problems/s for <= 10-node graphs.
"""

from __future__ import annotations

import argparse
import time

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import SPECS, available_tasks, canonical_trace, generate


def bench(task: str, n: int, cfg: GenConfig) -> dict:
    generate(task, 5, cfg.replace(seed=cfg.seed + 1))  # warm caches (contract text, imports)
    w0, t0 = time.perf_counter(), time.process_time()
    problems = generate(task, n, cfg)
    w1, t1 = time.perf_counter(), time.process_time()
    for p in problems:
        canonical_trace(p)
    t2 = time.process_time()
    sizes = [p.meta.get("n_valid", 0) for p in problems]
    attempts = [p.meta["generator"].get("attempt", 1) for p in problems]
    return {"task": task, "n": n, "gen_s": n / (t1 - t0), "trace_s": n / (t2 - t0), "wall_s": n / (w1 - w0),
            "mean_valid": sum(sizes) / n, "mean_attempts": sum(attempts) / n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--nodes", default="5-10")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--many-satisfier", action="store_true")
    ap.add_argument("--tasks", nargs="*", default=None)
    args = ap.parse_args(argv)
    lo, _, hi = args.nodes.partition("-")
    cfg = GenConfig(seed=args.seed, n_nodes=(int(lo), int(hi or lo)), many_satisfier=args.many_satisfier)
    tasks = args.tasks or available_tasks()
    print(f"nodes {cfg.n_nodes[0]}-{cfg.n_nodes[1]}, density {cfg.density}, many_satisfier={cfg.many_satisfier}, "
          f"n={args.n} per family, one core")
    print(f"{'task':<28}{'gen/s':>9}{'+trace/s':>10}{'wall/s':>9}{'|V|':>8}{'attempts':>10}")
    rows = []
    for task in tasks:
        r = bench(task, args.n, cfg)
        rows.append(r)
        mark = "" if task in SPECS else "  (external generator)"
        print(f"{task:<28}{r['gen_s']:>9.0f}{r['trace_s']:>10.0f}{r['wall_s']:>9.0f}{r['mean_valid']:>8.2f}{r['mean_attempts']:>10.2f}{mark}")
    graph = [r for r in rows if r["task"] in SPECS]
    total = sum(r["n"] for r in graph) / sum(r["n"] / r["gen_s"] for r in graph)
    print(f"{'all graph families':<28}{total:>9.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
