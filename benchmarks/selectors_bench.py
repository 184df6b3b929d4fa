"""Benchmark: six-bit scoring + every non-neural selector over 1,111 problem-seed units x K=8.

    python benchmarks/selectors_bench.py [--units 1111] [--k 8] [--repeat 3]

Synthetic pools: random 6-9 node DAGs, find-one-valid queries (backdoor, separation, mediator,
frontdoor), candidates drawn from canonical traces of valid answers (several distinct ones, as in a
fragmented pool), canonical traces of invalid answers, and damaged traces (a slot dropped, a graph
edge flipped, a garbled answer). Time is measured from fresh views (nothing cached) through all
non-neural selectors; the table prints per-selector and total seconds.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from itertools import combinations

from calver.infer.firewall import SelectorView, strip_problem
from calver.verifier import CausalGraph, Problem, get_family

TASKS = ("backdoor_set", "separation_set", "mediator", "frontdoor_set")


def random_dag(rng: random.Random, n: int) -> CausalGraph:
    names = [chr(ord("A") + i) for i in range(n)]
    edges = [(names[i], names[j]) for i, j in combinations(range(n), 2) if rng.random() < 0.35]
    return CausalGraph.build(names, edges, (), "DAG")


def _query(task: str, g: CausalGraph, rng: random.Random) -> dict | None:
    nodes = list(g.nodes)
    x, y = rng.sample(nodes, 2)
    if task == "separation_set":
        return {"x": [x], "y": [y], "variant": "any"}
    return {"treatment": x, "outcome": y, "variant": "any"}


def synthetic_problem(rng: random.Random, idx: int, tries: int = 200) -> tuple[Problem, list, list]:
    """A problem whose validity class is non-empty, with (valid members, invalid objects)."""
    for _ in range(tries):
        task = TASKS[idx % len(TASKS)]
        fam = get_family(task)
        g = random_dag(rng, rng.randint(6, 9))
        q = _query(task, g, rng)
        p = Problem(task=task, query=q, graph=g, id=f"p{idx:05d}", source_id=f"s{idx // 2:05d}")
        try:
            nq = fam.normalize_query(p)
            valid = fam.validity_class(g, nq)
        except ValueError:  # ProblemError / GraphError: a query or graph this family rejects
            continue
        if not valid:
            continue
        query_nodes = set(q.get("x", [])) | set(q.get("y", [])) | {q.get("treatment"), q.get("outcome")}
        cand = [n for n in g.nodes if n not in query_nodes]
        invalid = []
        for _ in range(20):
            s = frozenset(rng.sample(cand, rng.randint(0, min(3, len(cand)))))
            if not fam.predicate(g, nq, s).ok and s not in invalid:
                invalid.append(s)
        if invalid:
            return p, valid, invalid
    raise RuntimeError("could not build a synthetic problem")


def damage(trace: str, rng: random.Random) -> str:
    lines = trace.splitlines()
    kind = rng.randrange(3)
    if kind == 0:
        del lines[rng.randrange(len(lines))]
    elif kind == 1:
        lines[0] = lines[0].replace("->", "<-", 1)
    else:
        lines[-1] = "ANSWER: {" + "??" + "}"
    return "\n".join(lines)


def synthetic_units(n_units: int = 1111, k: int = 8, seed: int = 0, n_seeds: int = 1):
    """[(problem, seed, texts)] with fragmented valid answers, invalid spoilers and damaged traces."""
    rng = random.Random(seed)
    out = []
    n_problems = max(1, n_units // n_seeds)
    for i in range(n_problems):
        p, valid, invalid = synthetic_problem(rng, i)
        fam = get_family(p.task)
        for s in range(n_seeds):
            if len(out) >= n_units:
                break
            texts = []
            spoiler = rng.choice(invalid)
            for _ in range(k):
                r = rng.random()
                if r < 0.45:
                    texts.append(fam.canonical_trace(p, rng.choice(valid)))
                elif r < 0.75:
                    texts.append(fam.canonical_trace(p, spoiler))
                elif r < 0.9:
                    texts.append(fam.canonical_trace(p, rng.choice(invalid)))
                else:
                    texts.append(damage(fam.canonical_trace(p, rng.choice(valid)), rng))
            out.append((p, s, texts))
    return out[:n_units]


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
    units = synthetic_units(args.units, args.k)
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
