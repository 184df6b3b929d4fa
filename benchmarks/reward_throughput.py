"""Reward throughput of ``VerifierReward`` in-process and on 1, 2 and N worker processes, one run.

    python benchmarks/reward_throughput.py [--completions 4096] [--group 8] [--batch 512] [--workers N]
                                           [--callers 8] [--concurrent_rows 480] [--skip_batch]

Second table (``--callers C``, default 8): how verl, OpenRLHF and TRL's async GRPO call a reward, one row
per call from C threads at once, on one shared reward with 1, 2 and 4 workers (10 s budget): rows per
second and the ratio to 1 worker, for two kinds of rows. *verifier rows*: cold problems of 9-12 nodes
(each row prepares its own problem, as the first group of every prompt does) with gold or cut traces,
which the verifier scores in about a millisecond. *heavy rows*: the same, plus 25 ms of CPU work per row
in the scorer (``benchmarks/scorers.py``), a stand-in for rows that cost the verifier tens of milliseconds.

Builds ``completions / group`` backdoor problems (``calver.data_gen``, seeded) and, per problem, a GRPO
group of ``group`` completions: the gold trace, gold traces cut after 1-5 lines, another problem's
gold trace and junk. The reward is called as TRL calls it, once per generation batch of ``batch``
completions, with a fresh reward per configuration (cold problem caches, as at the start of a run);
starting and warming the workers is excluded (an untimed call on another problem). Worker rows run
with a 10 s per-completion budget, the setting that makes scoring un-stallable. Checks that every configuration
returns the same rewards, then prints one markdown table: completions per second and the ratio to
in-process, with the machine's CPU count and load average before and after.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time

from calver.data_gen.generators import canonical_trace
from calver.reward.workers import close_shared_pools
from calver.train.common import generate_problems, problem_json
from calver.train.rewards import VerifierReward


def build(completions: int, group: int, seed: int) -> tuple[list[str], list[str], tuple[str, str]]:
    """``completions`` texts and their problem JSON, in groups of ``group`` per problem, and one more
    problem's (gold trace, JSON) for the warm-up call."""
    n_problems = -(-completions // group)
    problems = generate_problems(["backdoor_set"], n_problems + 1, seed=seed, n_nodes=(5, 8))
    extra = problems.pop()
    warm = (canonical_trace(extra), problem_json(extra))
    golds = [canonical_trace(p) for p in problems]
    rng = random.Random(seed)
    texts: list[str] = []
    pjs: list[str] = []
    for i, p in enumerate(problems):
        lines = golds[i].splitlines()
        cands = [golds[i], golds[(i + 1) % len(golds)], "no slots at all, just prose"]
        cands += ["\n".join(lines[:rng.randint(1, 5)]) for _ in range(max(0, group - len(cands)))]
        pj = problem_json(p)
        for text in cands[:group]:
            texts.append(text)
            pjs.append(pj)
    return texts[:completions], pjs[:completions], warm


def _ignore(name: str, value: float) -> None:
    """TRL's log_metric sink, as the trainer passes one (without it the reward warns that rates go unlogged)."""


def run(texts: list[str], pjs: list[str], warm: tuple[str, str], batch: int,
        workers: int) -> tuple[float, list[float | None]]:
    """Wall seconds to score every completion in TRL-sized calls, and the rewards."""
    reward = VerifierReward(workers=workers, budget_s=10.0 if workers else None)
    try:
        # starts the pool and warms every worker (lazy imports, regexes): 4 rows each, untimed
        n = 4 * max(1, workers)
        assert reward(None, [warm[0]] * n, problem_json=[warm[1]] * n, log_metric=_ignore) == [1.0] * n
        out: list[float | None] = []
        t0 = time.perf_counter()
        for s in range(0, len(texts), batch):
            out += reward(None, texts[s:s + batch], problem_json=pjs[s:s + batch], log_metric=_ignore)
        return time.perf_counter() - t0, out
    finally:
        reward.close()
        close_shared_pools()


def run_concurrent(texts: list[str], pjs: list[str], warm: tuple[str, str], workers: int,
                   callers: int, scorer=None) -> tuple[float, list[float | None]]:
    """Wall seconds for ``callers`` threads to score every row, one row per reward call, and the rewards."""
    reward = VerifierReward(workers=workers, budget_s=10.0 if workers else None, scorer=scorer)
    out: list[float | None] = [None] * len(texts)
    todo = iter(range(len(texts)))
    lock = threading.Lock()

    def caller() -> None:
        while True:
            with lock:
                i = next(todo, None)
            if i is None:
                return
            out[i] = reward(None, [texts[i]], problem_json=[pjs[i]], log_metric=_ignore)[0]

    try:
        n = 4 * max(1, workers)
        assert reward(None, [warm[0]] * n, problem_json=[warm[1]] * n, log_metric=_ignore) == [1.0] * n
        threads = [threading.Thread(target=caller) for _ in range(callers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0, out
    finally:
        reward.close()
        close_shared_pools()


def concurrent_table(rows: int, callers: int, seed: int) -> int:
    from scorers import heavy_score  # benchmarks/ is on sys.path (and so on the workers')

    tasks = ["backdoor_set", "frontdoor_set", "separation_set"]
    problems = generate_problems(tasks, -(-(rows + 1) // len(tasks)), seed=seed + 1, n_nodes=(9, 12))
    extra = problems.pop()
    warm = (canonical_trace(extra), problem_json(extra))
    rng = random.Random(seed)
    texts, pjs = [], []
    for p in problems[:rows]:  # one row per problem: every row prepares a cold problem
        gold = canonical_trace(p)
        lines = gold.splitlines()
        texts.append(gold if rng.random() < 0.5 else "\n".join(lines[:rng.randint(1, len(lines))]))
        pjs.append(problem_json(p))
    print(f"\n{len(texts)} rows, one per call, from {callers} concurrent callers; {os.cpu_count()} CPUs")
    print("| rows | scoring | workers | seconds | rows/s | vs 1 worker |")
    print("|---|---|---:|---:|---:|---:|")
    bad = []
    for kind, scorer, n in (("verifier", None, len(texts)), ("heavy", heavy_score, min(len(texts), 160))):
        load_start = os.getloadavg()[0]
        results = [(w, *run_concurrent(texts[:n], pjs[:n], warm, w, callers, scorer)) for w in (1, 2, 4)]
        inproc = run_concurrent(texts[:n], pjs[:n], warm, 0, callers, scorer)
        base = results[0][1]
        for w, secs, _ in results:
            print(f"| {kind} ({n}) | worker pool | {w} | {secs:.2f} | {n / secs:,.1f} | {base / secs:.2f}x |")
        print(f"| {kind} ({n}) | in-process, {callers} threads | 0 | {inproc[0]:.2f} | {n / inproc[0]:,.1f} | "
              f"{base / inproc[0]:.2f}x |")
        print(f"<!-- {kind}: load average {load_start:.2f} before, {os.getloadavg()[0]:.2f} after -->")
        bad += [f"{kind}/{w}" for w, _, out in results if out != inproc[1]]
    if bad:
        print(f"\nrewards differ from in-process: {', '.join(bad)}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--completions", type=int, default=4096)
    ap.add_argument("--group", type=int, default=8, help="completions per problem (GRPO's num_generations)")
    ap.add_argument("--batch", type=int, default=512, help="completions per reward call (a generation batch)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="N, the largest pool (default: CPUs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--callers", type=int, default=8, help="concurrent callers of the second table (0: skip it)")
    ap.add_argument("--concurrent_rows", type=int, default=1500, help="rows of the second table")
    ap.add_argument("--skip_batch", action="store_true", help="only the concurrent-callers table")
    a = ap.parse_args(argv)
    if a.skip_batch:
        return concurrent_table(a.concurrent_rows, a.callers, a.seed) if a.callers else 0
    texts, pjs, warm = build(a.completions, a.group, a.seed)
    load_start = os.getloadavg()
    configs = [("in-process", 0)] + [(f"{w} worker{'s' if w > 1 else ''}", w)
                                     for w in dict.fromkeys([1, 2, max(1, a.workers)])]
    results = [(name, w, *run(texts, pjs, warm, a.batch, w)) for name, w in configs]
    load_end = os.getloadavg()
    base_s, base_out = results[0][2], results[0][3]
    mismatched = [name for name, _, _, out in results if out != base_out]
    print(f"{len(texts)} completions ({len(texts) // a.group} problems x {a.group}), calls of {a.batch}; "
          f"{os.cpu_count()} CPUs; load average {load_start[0]:.2f} before, {load_end[0]:.2f} after")
    print("| scoring | workers | seconds | completions/s | vs in-process |")
    print("|---|---:|---:|---:|---:|")
    for name, w, secs, _ in results:
        print(f"| {name} | {w} | {secs:.2f} | {len(texts) / secs:,.0f} | {base_s / secs:.2f}x |")
    if mismatched:
        print(f"\nrewards differ from in-process: {', '.join(mismatched)}")
        return 1
    return concurrent_table(a.concurrent_rows, a.callers, a.seed) if a.callers else 0


if __name__ == "__main__":
    sys.exit(main())
