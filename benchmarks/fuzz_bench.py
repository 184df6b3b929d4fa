"""Fuzzing benchmark: N mutated traces through ``score``, counting crashes, hangs and slow calls.

The corpus is canonical traces for every registered family (generator problems, the GRAPH slot
re-rendered in json/dot/graphml/matrix/prose/clear, L1 constructed-mode problems); each case picks
a family uniformly, one of its traces, and stacks 1-3 of the audit's mutation operators (or is pure
random input, ~10%, or the trace unchanged, ~2%). Operators and corpus live in
``tests/fuzz_corpus.py`` (the CI-gated ``tests/test_verifier_fuzz.py`` uses them too); this script
loads that one file by path (no ``sys.path`` change; it imports nothing else from the tests).

Per call it measures CPU time (``time.process_time``) with the verifier's memos warm, as in a GRPO
run scoring many samples per problem (the test measures cold calls), under a SIGALRM watchdog
(``--watchdog``, 5 s of wall time):
a call past it is a hang (counted, not fatal). A crash is any exception escaping ``score`` other
than ``ProblemError`` (none is expected: the problems are well formed), or a result that is not six
0/1 bits. Workers run under an address-space cap (``--mem-mb``) so a memory blow-up is a crash
(``MemoryError``) instead of an OOM kill.

    python benchmarks/fuzz_bench.py [--n 1000000] [--seed 0] [--workers 2]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
import time
from collections import Counter

from tests_module import tests_module

_STATE: dict = {}  # the corpus, built in the parent and inherited by forked workers


def _init_worker(mem_mb: int) -> None:
    import resource

    if mem_mb > 0:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = mem_mb * 2**20 if hard == resource.RLIM_INFINITY else min(mem_mb * 2**20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _run_chunk(args: tuple[int, int, int, float, float]) -> dict:
    fc = tests_module("fuzz_corpus")
    from calver.verifier import ProblemError, score

    chunk, size, seed, limit_s, slow_s = args
    by_family, pool = _STATE["by_family"], _STATE["pool"]
    fams = sorted(by_family)
    rng = random.Random(f"fuzz-bench/{seed}/{chunk}")
    cpu0 = time.process_time()
    times: dict[str, list[float]] = {f: [] for f in fams}
    crashes, hangs, perr, mutator_errors = Counter(), Counter(), Counter(), Counter()
    op_stats: dict[str, list[int]] = {}  # op -> [traces, crashes, hangs, slow]
    examples: list[tuple] = []
    for _ in range(size):
        fam = rng.choice(fams)
        item = rng.choice(by_family[fam])
        try:
            ops, text = fc.fuzz_case(rng, item.trace, pool)
        except Exception as e:  # noqa: BLE001 - a mutator bug is the harness's, not the verifier's: count it
            mutator_errors[f"{type(e).__name__}: {str(e)[:80]}"] += 1
            continue
        crash = hang = None
        t0 = time.process_time()
        try:
            with fc.watchdog(limit_s):
                sc = score(text, item.problem)
            bits = list(sc.bits)
            if len(bits) != 6 or any(b not in (0, 1) for b in bits):
                crash = f"bad bits {bits!r}"
        except fc.Hang as e:
            hang = str(e)
        except ProblemError as e:
            perr[fam] += 1
            crash = f"ProblemError: {e}"
        except Exception as e:  # noqa: BLE001 - every escaping exception is the finding
            crash = f"{type(e).__name__}: {str(e)[:160]}"
        dt = time.process_time() - t0
        times[fam].append(dt)
        if crash:
            crashes[fam] += 1
        if hang:
            hangs[fam] += 1
        for op in set(ops):
            s = op_stats.setdefault(op, [0, 0, 0, 0])
            s[0] += 1
            s[1] += bool(crash)
            s[2] += bool(hang)
            s[3] += dt > slow_s
        if (crash and len(examples) < 8) or (hang and sum(e[3].startswith("hang") for e in examples) < 2):
            examples.append((fam, item.label, "+".join(ops), crash or f"hang ({hang})", repr(text[:160])))
    return {"cpu": time.process_time() - cpu0, "times": times, "crashes": crashes, "hangs": hangs,
            "problem_errors": perr, "ops": op_stats, "examples": examples, "mutator_errors": mutator_errors}


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def main(argv: list[str] | None = None) -> int:
    fc = tests_module("fuzz_corpus")

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10**6, help="mutated traces to score (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--watchdog", type=float, default=5.0, help="seconds before a call counts as a hang")
    ap.add_argument("--slow-ms", type=float, default=50.0, help="CPU ms above which a call counts as slow")
    ap.add_argument("--per-family", type=int, default=3, help="generator problems per family and config")
    ap.add_argument("--mem-mb", type=int, default=3072, help="address-space cap per worker (0: none)")
    ap.add_argument("--chunk", type=int, default=1000)
    a = ap.parse_args(argv)

    wall0 = time.perf_counter()
    corpus = fc.build_corpus(per_family=a.per_family, seed=a.seed)
    by_family: dict[str, list] = {}
    for it in corpus:
        by_family.setdefault(it.family, []).append(it)
    _STATE.update(by_family=by_family, pool=[it.trace for it in corpus])
    print(f"corpus: {len(corpus)} canonical traces, {len(by_family)} families, {len(fc.OPS)} operators "
          f"({time.perf_counter() - wall0:.1f} s)", flush=True)

    jobs = [(i, min(a.chunk, a.n - i * a.chunk), a.seed, a.watchdog, a.slow_ms / 1000)
            for i in range((a.n + a.chunk - 1) // a.chunk)]
    times: dict[str, list[float]] = {f: [] for f in by_family}
    crashes, hangs, perr, ops, examples, merr = Counter(), Counter(), Counter(), {}, [], Counter()
    done, next_report, t_run, cpu = 0, a.n / 10, time.perf_counter(), [0.0]

    def absorb(r: dict) -> None:
        nonlocal done, next_report
        for f, ts in r["times"].items():
            times[f].extend(ts)
            done += len(ts)
        cpu[0] += r["cpu"]
        crashes.update(r["crashes"])
        hangs.update(r["hangs"])
        perr.update(r["problem_errors"])
        merr.update(r["mutator_errors"])
        for op, s in r["ops"].items():
            acc = ops.setdefault(op, [0, 0, 0, 0])
            for k in range(4):
                acc[k] += s[k]
        for ex in r["examples"]:  # keep up to 10 crashes and 4 hangs
            kind = ex[3].startswith("hang")
            if sum(e[3].startswith("hang") == kind for e in examples) < (4 if kind else 10):
                examples.append(ex)
        if done >= next_report:
            el = time.perf_counter() - t_run
            print(f"  {done:>9,} / {a.n:,}  {el:7.1f} s  (eta {el / done * (a.n - done):6.0f} s)",
                  file=sys.stderr, flush=True)
            next_report += a.n / 10

    if a.workers <= 1:
        _init_worker(a.mem_mb)
        for job in jobs:
            absorb(_run_chunk(job))
    else:
        with mp.get_context("fork").Pool(a.workers, initializer=_init_worker, initargs=(a.mem_mb,)) as pool:
            for r in pool.imap_unordered(_run_chunk, jobs):
                absorb(r)
    run = time.perf_counter() - t_run
    wall = time.perf_counter() - wall0

    slow_s = a.slow_ms / 1000
    slow = f">{a.slow_ms:g}ms"
    head = (f"{'family':<26} {'traces':>9} {'crashes':>8} {'hangs':>6} {slow:>8} {'max ms':>9} {'p99 ms':>8} "
            f"{'median µs':>10}")
    print("\n" + head + "\n" + "-" * len(head))
    everything: list[float] = []
    for f in sorted(times):
        ts = sorted(times[f])
        everything.extend(ts)
        print(f"{f:<26} {len(ts):>9,} {crashes[f]:>8} {hangs[f]:>6} {sum(t > slow_s for t in ts):>8} "
              f"{1e3 * (ts[-1] if ts else 0):>9.1f} {1e3 * _pct(ts, 0.99):>8.2f} {1e6 * _pct(ts, 0.5):>10.0f}")
    everything.sort()
    print("-" * len(head))
    print(f"{'all':<26} {len(everything):>9,} {sum(crashes.values()):>8} {sum(hangs.values()):>6} "
          f"{sum(t > slow_s for t in everything):>8} {1e3 * (everything[-1] if everything else 0):>9.1f} "
          f"{1e3 * _pct(everything, 0.99):>8.2f} {1e6 * _pct(everything, 0.5):>10.0f}")

    print(f"\n{'operator':<22} {'traces':>9} {'crashes':>8} {'hangs':>6} {f'>{a.slow_ms:g}ms':>8}")
    for op in sorted(ops):
        n, c, h, s = ops[op]
        print(f"{op:<22} {n:>9,} {c:>8} {h:>6} {s:>8}")
    if perr:
        print(f"\nProblemError on generated problems (a generator or loader bug): {dict(perr)}")
    if merr:
        print(f"\nmutator errors (harness bugs; those cases were skipped): {dict(merr)}")
    if examples:
        print("\nfirst crashes / hangs (family, item, operators, error, input head):")
        for ex in examples:
            print("  " + " | ".join(ex))
    per_trace = run / max(1, len(everything))
    print(f"\nwall {wall:.1f} s ({run:.1f} s scoring {len(everything):,} traces on {a.workers} worker(s), "
          f"{1e6 * per_trace:.0f} µs/trace); projected for 1,000,000: {(wall - run + per_trace * 1e6) / 60:.1f} min")
    # Wall time depends on what else the machine runs; the workers' CPU time does not.
    cpu_proj = wall - run + cpu[0] / max(1, len(everything)) * 1e6 / max(1, a.workers)
    print(f"workers' CPU {cpu[0]:.1f} s ({1e6 * cpu[0] / max(1, len(everything)):.0f} µs/trace incl. mutation); "
          f"projected for 1,000,000 on {a.workers} idle core(s): {cpu_proj / 60:.1f} min")
    return 1 if (sum(crashes.values()) or sum(hangs.values())) else 0


if __name__ == "__main__":
    sys.exit(main())
