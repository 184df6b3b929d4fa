"""Attack benchmark: the 2026-12-01 audit's attack battery over several seeds, counting wrong answers
at 6/6 (decided by independent oracles), crashes, hangs and over-budget calls per family.

Per seed, ``--n`` generated problems per family (11 families) plus the L1-L3 constructed versions of
5 graph families; on each, the audit's 34 attack templates are applied to up to three objects the
oracles reject, and as a control to the right object. The battery lives in ``tests/attack_battery.py``
(the CI-gated ``tests/test_attack_battery.py`` runs it small) and the oracles in ``tests/oracles.py``;
this script loads those two files, and ``tests/fuzz_corpus.py`` for the watchdog, by path (no
``sys.path`` change; it imports nothing else from the tests).

A crash is any exception escaping ``score`` (``ProblemError`` included: every problem is generated)
or a result that is not six 0/1 bits; a hang is a call past ``--watchdog`` seconds of wall time; an
over-budget call spends more than ``--budget`` CPU seconds (``time.process_time``). Exits 1 if any
wrong 6/6, crash or hang (or a canonical trace that does not score 6/6), else 0. Seeds run in
parallel with ``--workers``.

    python benchmarks/attack_bench.py [--seeds 0 1 2] [--n 5] [--workers 1]

The 2026-12-03 audit's batteries run after it: ``--kk N`` (candidate-local knights-and-knaves, H1:
``tests/kk_battery.py``; N puzzles per size of 3-8 people from the package generator and, when
reasoning-gym is installed, 3-5 from reasoning-gym; every trace scored on the label-firewall view, wrong
decided by the brute-force solver of ``tests/oracles.py``) and ``--names N`` (hostile node names, M2:
``tests/names_battery.py``; N random DAGs, every answer subset in six GRAPH encodings, right decided by
networkx). Each prints a table and counts towards the exit code (0 needs no wrong 6/6, and for names no
false reject). ``--n 0`` skips the 2026-12-01 battery.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time

from tests_module import tests_module


def _battery():
    tests_module("fuzz_corpus")
    tests_module("oracles")
    return tests_module("attack_battery")


def _run_seed(args: tuple[int, int, float, float]):
    seed, n, hang_s, budget_s = args
    return _battery().run(seed, n, hang_s=hang_s, budget_s=budget_s)


def main(argv: list[str] | None = None) -> int:
    ab = _battery()

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n", type=int, default=5, help="generated problems per family and seed (default 5)")
    ap.add_argument("--workers", type=int, default=1, help="processes, one seed each at a time")
    ap.add_argument("--watchdog", type=float, default=ab.HANG_S, help="wall seconds before a call is a hang")
    ap.add_argument("--budget", type=float, default=ab.BUDGET_S, help="CPU seconds above which a call is over budget")
    ap.add_argument("--control", action="store_true", help="also print the control pass per template")
    ap.add_argument("--kk", type=int, default=0, help="K&K puzzles per size for the candidate-local battery (0: skip)")
    ap.add_argument("--names", type=int, default=0, help="random DAGs for the hostile-names battery (0: skip)")
    a = ap.parse_args(argv)
    clean = True
    if a.kk:
        clean &= _kk_table(a.kk, a.seeds[0])
    if a.names:
        clean &= _names_table(a.names, a.seeds[0])
    if a.n <= 0:
        return 0 if clean else 1

    wall0 = time.perf_counter()
    jobs = [(s, a.n, a.watchdog, a.budget) for s in a.seeds]
    if a.workers <= 1:
        reports = []
        for job in jobs:
            reports.append(_run_seed(job))
            print(f"  seed {job[0]}: {reports[-1].total.traces:,} traces, {reports[-1].wall_s:.1f} s",
                  file=sys.stderr, flush=True)
    else:
        with mp.get_context("fork").Pool(a.workers) as pool:
            reports = pool.map(_run_seed, jobs)
    rep = ab.merge(reports)
    wall = time.perf_counter() - wall0

    over = f"over {a.budget:g} s"
    head = f"{'family':<38} {'traces':>8} {'wrong 6/6':>9} {'crashes':>8} {'hangs':>6} {over:>9} {'max CPU ms':>10}"
    print("\n" + head + "\n" + "-" * len(head))

    def line(r) -> str:
        return (f"{r.family:<38} {r.traces:>8,} {r.wrong_6:>9} {r.crashes:>8} {r.hangs:>6} {r.over_budget:>9} "
                f"{1e3 * r.max_cpu_s:>10.1f}")

    for key in sorted(rep.rows):
        print(line(rep.rows[key]))
    total = rep.total
    print("-" * len(head))
    print(line(total))

    plain = rep.control.get("plain-wrong", ab.ControlRow("plain-wrong"))
    kept = [rep.control[t] for t in ab.KEEPS_RIGHT if t in rep.control]
    every = list(rep.control.values())
    print(f"\ncontrol (right object): plain scores 6 in {plain.scored_6}/{plain.traces}; "
          f"well-formed templates {sum(c.scored_6 for c in kept)}/{sum(c.traces for c in kept)}; "
          f"all {len(every)} templates {sum(c.scored_6 for c in every)}/{sum(c.traces for c in every)}")
    if a.control:
        print(f"\n{'control template':<34} {'scored 6':>14}")
        for name in sorted(rep.control):
            c = rep.control[name]
            print(f"{name:<34} {f'{c.scored_6}/{c.traces}':>14}")
    if total.canonical_bad:
        print(f"\ncanonical traces not 6/6 (problems skipped): {total.canonical_bad}")
    if rep.findings:
        print("\nfindings (kind, family, problem source, template, problem id, detail), trace tail:")
        for f in rep.findings:
            print(f"  {f.kind} | {f.family} | {f.label} | {f.template} | {f.problem_id} | {f.detail}")
            print("    " + repr(f.trace_tail))
    calls = total.calls
    print(f"\n{rep.problems:,} problems, {calls:,} score calls over seeds {list(rep.seeds)}; wall {wall:.1f} s, "
          f"battery CPU {rep.cpu_s:.1f} s ({1e6 * rep.cpu_s / max(1, calls):.0f} µs/call incl. oracles)")
    return 0 if rep.clean and clean else 1


def _kk_table(n: int, seed: int) -> bool:
    tests_module("oracles")
    kb = tests_module("kk_battery")
    from calver.data_gen import reasoning_gym_kk
    from calver.data_gen.knights import generate_kk

    t0 = time.perf_counter()
    sources = {"calver 3-8 people": [generate_kk(k, i, seed) for k in range(3, 9) for i in range(n)]}
    if reasoning_gym_kk.available():
        sources["reasoning-gym 3-5 people"] = [p for k in (3, 4, 5)
                                               for p in reasoning_gym_kk.reasoning_gym_kk(k, n, seed)[0]]
    head = (f"{'K&K candidate-local':<28} {'template':<9} {'traces':>7} {'6/6 on view':>11} {'wrong':>7} "
            f"{'wrong 6/6':>9}")
    print("\n" + head + "\n" + "-" * len(head))
    bad = 0
    for name, problems in sources.items():
        for template, c in kb.run(problems).items():
            print(f"{name:<28} {template:<9} {c['traces']:>7,} {c['six']:>11,} {c['wrong']:>7,} {c['wrong_six']:>9,}")
            bad += c["wrong_six"] + c["control_miss"]
    print(f"({time.perf_counter() - t0:.1f} s; control = the honest formalization, which must score 6/6)")
    return bad == 0


def _names_table(n: int, seed: int) -> bool:
    nb = tests_module("names_battery")
    t0 = time.perf_counter()
    c = nb.run(n, seed)
    head = f"{'hostile names: encoding':<26} {'traces':>8} {'right':>7} {'wrong 6/6':>9} {'right below 6/6':>15}"
    print("\n" + head + "\n" + "-" * len(head))
    for enc in (*nb.ENCODINGS, ""):
        k = f"{enc}:" if enc else ""
        print(f"{enc or 'all':<26} {c[k + 'traces']:>8,} {c[k + 'right']:>7,} {c[k + 'wrong_six']:>9,} "
              f"{c[k + 'right_below_six']:>15,}")
    print(f"({c['problems']} problems over {n} graphs, {time.perf_counter() - t0:.1f} s)")
    return c["wrong_six"] == 0 and c["right_below_six"] == 0


if __name__ == "__main__":
    sys.exit(main())
