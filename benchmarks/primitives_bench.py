"""Micro-benchmark: calver.verifier.primitives vs networkx equivalents.

Median microseconds per call of is_separated / is_backdoor_set / ancestors against
``nx.is_d_separator``, networkx back-door (descendants check + drop X's out-edges +
``nx.is_d_separator``) and ``nx.ancestors``, on random sparse DAGs (2 edges per node on average:
m = 2n) with 10, 76 and 1,000 nodes. Both sides answer the same queries and must agree.

    PYTHONPATH=. python3 benchmarks/primitives_bench.py [--queries 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import networkx as nx

from calver.verifier.graph import CausalGraph
from calver.verifier.primitives import ancestors, is_backdoor_set, is_separated


def random_dag(n: int, seed: int, edges_per_node: float = 2.0) -> tuple[CausalGraph, nx.DiGraph]:
    rnd = random.Random(seed)
    order = [f"V{i}" for i in range(n)]
    rnd.shuffle(order)
    target = min(int(edges_per_node * n), n * (n - 1) // 2)
    edges: set[tuple[str, str]] = set()
    while len(edges) < target:
        i, j = sorted(rnd.sample(range(n), 2))
        edges.add((order[i], order[j]))
    g = CausalGraph.build(order, sorted(edges), kind="DAG")
    d = nx.DiGraph()
    d.add_nodes_from(order)
    d.add_edges_from(sorted(edges))
    return g, d


def nx_backdoor(d: nx.DiGraph, x: str, y: str, z: set[str]) -> bool:
    if z & ({x, y} | nx.descendants(d, x)):
        return False
    out = list(d.out_edges(x))
    d.remove_edges_from(out)  # in place and restored: the cheapest networkx formulation
    try:
        return nx.is_d_separator(d, {x}, {y}, z)
    finally:
        d.add_edges_from(out)


def per_call_us(fn, args_list, repeat: int) -> list[float]:
    out = []
    for args in args_list:
        t0 = time.perf_counter_ns()
        for _ in range(repeat):
            fn(*args)
        out.append((time.perf_counter_ns() - t0) / repeat / 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10, 76, 1000])
    a = ap.parse_args()
    rows = []
    for n in a.sizes:
        g, d = random_dag(n, a.seed + n)
        rnd = random.Random(a.seed)
        repeat = 50 if n <= 100 else 5
        sep_q, bd_q, anc_q = [], [], []
        for _ in range(a.queries):
            x, y = rnd.sample(g.nodes, 2)
            pool = [v for v in g.nodes if v not in (x, y)]
            z = set(rnd.sample(pool, min(3, len(pool))))
            sep_q.append((x, y, z))
            nondesc = [v for v in pool if v not in nx.descendants(d, x)]
            bd_q.append((x, y, set(rnd.sample(nondesc, min(3, len(nondesc))))))
            anc_q.append((rnd.choice(g.nodes),))
        for x, y, z in sep_q:
            assert is_separated(g, x, y, z) == nx.is_d_separator(d, {x}, {y}, z)
        for x, y, z in bd_q:
            assert is_backdoor_set(g, x, y, z) == nx_backdoor(d, x, y, z)
        for (v,) in anc_q:
            assert ancestors(g, v) == nx.ancestors(d, v)
        cases = [
            ("is_separated", lambda x, y, z: is_separated(g, x, y, z),
             lambda x, y, z: nx.is_d_separator(d, {x}, {y}, z), sep_q),
            ("is_backdoor_set", lambda x, y, z: is_backdoor_set(g, x, y, z),
             lambda x, y, z: nx_backdoor(d, x, y, z), bd_q),
            ("ancestors", lambda v: ancestors(g, v), lambda v: nx.ancestors(d, v), anc_q),
        ]
        for name, ours, theirs, qs in cases:
            mo = statistics.median(per_call_us(ours, qs, repeat))
            mt = statistics.median(per_call_us(theirs, qs, repeat))
            rows.append((n, d.number_of_edges(), name, mo, mt))
    print(f"{'nodes':>6} {'edges':>6}  {'primitive':<16} {'calver µs':>10} {'networkx µs':>12} {'speed-up':>9}")
    for n, m, name, mo, mt in rows:
        print(f"{n:>6} {m:>6}  {name:<16} {mo:>10.1f} {mt:>12.1f} {mt / mo:>8.1f}x")


if __name__ == "__main__":
    main()
