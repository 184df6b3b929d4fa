"""Per-call CPU-time budgets of ``score`` and ``parse_graph`` on junk, hostile and random input.

    python benchmarks/latency_bench.py [--n 300] [--seed 0]

The unit tests check that these inputs fail closed (no exception, no six); the budgets live here
because a loaded CI runner makes per-call timing flaky there. Cases (seeded, reproducible):

- ``score/random``: random text up to 2,000 characters (and random bytes read as latin-1) scored
  against the documented backdoor problem; budget 50 ms CPU per call.
- ``score/hostile``: a 1 MB repeated trace, 50,000 open brackets, Cyrillic and full-width look-alikes,
  NUL/0xFF noise; budget 200 ms CPU per call.
- ``parse/random``: random strings over graph-syntax tokens, random unicode and random bytes through
  ``parse_graph`` in every format (parse cache cleared per call); budget 50 ms CPU per call.

Prints one row per case (calls, p50, p99, max in ms, budget) and exits 1 if any call is over budget.
(The CI-gated bound on ``score`` over mutated traces is ``tests/test_verifier_fuzz.py``; the big run
is ``benchmarks/fuzz_bench.py``.)
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from calver.verifier import Problem, parse_graph, score
from calver.verifier.graph import GraphError
from calver.verifier.parsers import graph_cache

ROOT = Path(__file__).resolve().parents[1]
TOKENS = list("AB XYZ_1,;.:\n-<>=→↔{}[]()\"'/*#") + ["->", "<->", "digraph {", "Given a DAG with nodes ",
                                                     "causes", " and ", "<graphml>", "0 1", "А"]
FORMATS = (None, "arrows", "json", "matrix", "graphml", "dot", "prose", "clear")


def random_text(rng: random.Random, max_size: int) -> str:
    n = rng.randint(0, max_size)
    kind = rng.randrange(3)
    if kind == 0:  # any code point below the surrogates
        return "".join(chr(rng.randrange(0xD800)) for _ in range(n))
    if kind == 1:  # bytes read as latin-1
        return bytes(rng.randrange(256) for _ in range(n)).decode("latin-1")
    return "".join(rng.choice(TOKENS) for _ in range(n // 4))  # syntax-shaped


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _parse(text, fmt) -> None:
    graph_cache.memo.clear()
    try:
        parse_graph(text, fmt=fmt)
    except GraphError:
        pass


def run(n: int, seed: int) -> dict[str, tuple[list[float], float]]:
    import json

    problem = Problem.from_dict(json.loads((ROOT / "docs/examples/backdoor_problem.json").read_text()))
    gold = (ROOT / "docs/examples/backdoor_trace.txt").read_text()
    for warm in (gold, "{}", "<graphml/>", "digraph { A -> B }", "A causes B.", "x\n0 1"):  # lazy imports, regexes
        score(warm, problem)
    rng = random.Random(seed)
    out: dict[str, tuple[list[float], float]] = {}
    texts = [random_text(rng, 2000) for _ in range(n)]
    out["score/random"] = ([cpu(lambda t=t: score(t, problem)) for t in texts], 0.05)
    hostile = [gold * 2000, "GRAPH: " + "(" * 50_000 + "\nANSWER: {" + "{" * 50_000, gold.replace("X", "Х"),
               gold.replace("{Z}", "{Ｚ}"), "\x00\xff" * 10_000]
    out["score/hostile"] = ([cpu(lambda t=t: score(t, problem)) for t in hostile], 0.2)
    parse_times = []
    for _ in range(n):
        text = random_text(rng, 200)
        parse_times.append(cpu(lambda: _parse(text, rng.choice(FORMATS))))
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        parse_times.append(cpu(lambda: _parse(data, None)))
    out["parse/random"] = (parse_times, 0.05)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="random inputs per case (default 300)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    res = run(a.n, a.seed)
    print("| case | calls | p50 ms | p99 ms | max ms | budget ms |")
    print("|---|---:|---:|---:|---:|---:|")
    over = 0
    for name, (times, budget) in res.items():
        s = sorted(times)
        p50, p99 = (1000 * s[min(len(s) - 1, int(q * len(s)))] for q in (0.5, 0.99))
        over += sum(t > budget for t in s)
        print(f"| {name} | {len(s)} | {p50:.2f} | {p99:.2f} | {1000 * s[-1]:.2f} | {1000 * budget:.0f} |")
    print(f"\n{over} call(s) over budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
