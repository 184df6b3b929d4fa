"""Benchmark: median µs per scored trace and per primitive call, calver vs networkx, one run.

For random sparse DAGs (2 edges/node) of 10, 76 and 1,000 nodes it builds backdoor problems with
valid adjustment sets and their canonical six-slot traces, then times

* ``score`` cold (a fresh Problem object per trace: query normalization, GRAPH parse, all bits),
* ``score`` warm (the same problem scored again, as for a pool's K candidates),
* the same scoring with the semantic checks routed through networkx (``nx.is_d_separator`` after
  removing X's out-edges, ``nx.descendants``) — the baseline the ratio is against,
* the primitives ``is_backdoor_set`` / ``is_separated`` vs their networkx equivalents.

    python benchmarks/verifier_bench.py [--traces 60]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from unittest import mock

import networkx as nx

from calver.verifier import CausalGraph, Problem, get_family, score
from calver.verifier import primitives as prim
from calver.verifier.parsers import graph_cache
from calver.verifier.tasks import backdoor as backdoor_mod


def random_dag(n: int, rnd: random.Random) -> CausalGraph:
    order = [f"V{i}" for i in range(n)]
    rnd.shuffle(order)
    edges: set[tuple[str, str]] = set()
    while len(edges) < min(2 * n, n * (n - 1) // 2):
        i, j = sorted(rnd.sample(range(n), 2))
        edges.add((order[i], order[j]))
    return CausalGraph.build(order, sorted(edges), kind="DAG")


_NX: dict[int, tuple[CausalGraph, nx.DiGraph]] = {}  # holds the graph, so its id cannot be reused


def nx_backdoor_violation(g: CausalGraph, x: str, y: str, zs) -> str | None:
    # the networkx graph is built once per graph (a networkx-based verifier would hold it)
    hit = _NX.get(id(g))
    if hit is None or hit[0] is not g:
        hit = _NX[id(g)] = (g, g.to_networkx())
    d = hit[1]
    z = set(zs)
    if z & ({x, y} | nx.descendants(d, x)):
        return "Z meets X, Y or a descendant of X"
    out = list(d.out_edges(x))
    d.remove_edges_from(out)
    try:
        return None if nx.is_d_separator(d, {x}, {y}, z) else "backdoor path open"
    finally:
        d.add_edges_from(out)


def make_cases(n: int, count: int, rnd: random.Random):
    fam = get_family("backdoor_set")
    cases = []
    while len(cases) < count:
        g = random_dag(n, rnd)
        x, y = rnd.sample(list(g.nodes), 2)
        if not prim.directed_path_exists(g, x, y):
            continue
        # a valid set without enumerating the class: the parents of X always satisfy the criterion
        z = g.parents(x) - {y}
        if not prim.is_backdoor_set(g, x, y, z):
            continue
        p = Problem(task="backdoor_set", graph=g, query={"treatment": x, "outcome": y})
        cases.append((p, fam.canonical_trace(p, z), x, y, z))
    return cases


def fresh(p: Problem) -> Problem:
    """A new Problem object, with the graph-text parse cache emptied: nothing is reused."""
    graph_cache.memo.clear()
    return Problem(task=p.task, graph=p.graph, query=dict(p.query))


def time_us(fn, reps: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        fn()
    return (time.perf_counter_ns() - t0) / reps / 1000


def bench(n: int, count: int, rnd: random.Random) -> list[tuple]:
    cases = make_cases(n, count, rnd)
    reps = 20 if n <= 76 else 3
    cold, warm, nx_cold, bd, bd_nx, sep, sep_nx = [], [], [], [], [], [], []
    for p, trace, x, y, z in cases:
        assert score(trace, fresh(p)).total == 6
        cold.append(time_us(lambda: score(trace, fresh(p)), reps))
        score(trace, p)
        warm.append(time_us(lambda: score(trace, p), reps))
        with mock.patch.object(prim, "backdoor_violation", nx_backdoor_violation):
            assert score(trace, fresh(p)).total == 6
            nx_cold.append(time_us(lambda: score(trace, fresh(p)), reps))
        d = p.graph.to_networkx()
        bd.append(time_us(lambda: prim.is_backdoor_set(p.graph, x, y, z), reps * 5))
        nx_backdoor_violation(p.graph, x, y, z)
        bd_nx.append(time_us(lambda: nx_backdoor_violation(p.graph, x, y, z) is None, reps * 5))
        sep.append(time_us(lambda: prim.is_separated(p.graph, {x}, {y}, z), reps * 5))
        sep_nx.append(time_us(lambda: nx.is_d_separator(d, {x}, {y}, set(z)), reps * 5))
    med = statistics.median
    return [
        (n, "score (cold problem)", med(cold), med(nx_cold)),
        (n, "score (warm, pool)", med(warm), None),
        (n, "is_backdoor_set", med(bd), med(bd_nx)),
        (n, "is_separated", med(sep), med(sep_nx)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    assert backdoor_mod  # the family resolves primitives.backdoor_violation at call time (patchable)
    rows = []
    for n in (10, 76, 1000):
        rows += bench(n, args.traces if n < 1000 else max(5, args.traces // 6), rnd)
    print(f"{'nodes':>6} {'what':<22} {'calver µs':>10} {'networkx µs':>12} {'speed-up':>9}")
    for n, what, ours, theirs in rows:
        ratio = f"{theirs / ours:8.1f}x" if theirs else "       -"
        t = f"{theirs:12.1f}" if theirs else f"{'-':>12}"
        print(f"{n:>6} {what:<22} {ours:10.1f} {t} {ratio}")


if __name__ == "__main__":
    main()
