"""Benchmark: ``calver eval`` wall time on a pool without and with its stored score table.

    python benchmarks/eval_bench.py [--pools DIR [DIR ...]] [--units 200] [--k 8] [--repeat 1]
                                    [--baseline-tree DIR]

Per pool (each copied to a scratch directory first; the given pools are only read):

* ``table build``: :func:`calver.infer.score_table.score_table` alone on a pool without one;
* ``before``: :func:`calver.evaluation.evaluate.evaluate` with no ``scores/`` (every candidate scored
  by the run, as before the table existed) -- the baseline of the ratio column;
* ``after``: ``evaluate`` with the table stored (read from disk, nothing held in memory);
* ``baseline tree`` (with ``--baseline-tree``): ``evaluate`` from another source tree, e.g. the last
  commit (``git archive HEAD calver | tar -x -C DIR``), in a subprocess.

Each eval runs with its defaults (``full``) and without the trace-perturbation audits and the
graph-corruption ladder, whose scoring of perturbed (text, problem) pairs no table can save.

``score calls`` counts the verifier's ``score`` calls in the timed run. Without ``--pools`` a fixture
pool (``synthetic_units`` of ``tests/fixtures.py``, loaded by path) is built in-process.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests_module import tests_module


class _Calls:
    """Counts ``calver.verifier.score`` calls wherever a loaded calver module bound the function."""

    def __init__(self) -> None:
        import calver.evaluation.evaluate  # noqa: F401 - load every module evaluate binds score in
        from calver.verifier import scoring

        self.n, original = 0, scoring.score

        def counting(text, problem):
            self.n += 1
            return original(text, problem)

        self._patched = [m for m in list(sys.modules.values())
                         if getattr(m, "__name__", "").startswith("calver") and getattr(m, "score", None) is original]
        for m in self._patched:
            m.score = counting
        self._original = original

    def close(self) -> None:
        for m in self._patched:
            m.score = self._original


def _fresh_process_state() -> None:
    """No table kept in memory from an earlier run (as in a new ``calver eval`` process)."""
    import calver.infer.score_table as st

    gc.collect()
    st._LIVE.clear()


def _timed(fn, repeat: int, calls: _Calls, setup) -> tuple[float, int]:
    best, n = float("inf"), 0
    for _ in range(repeat):
        setup()
        _fresh_process_state()
        before = calls.n
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n = calls.n - before
    return best, n


def _baseline_tree(tree: Path, pool: Path, settings: dict) -> float:
    code = ("import json, sys, time\nsys.path.insert(0, sys.argv[1])\nfrom calver.evaluation.evaluate import evaluate\n"
            "t = time.perf_counter(); evaluate(sys.argv[2], **json.loads(sys.argv[3]))\n"
            "print(time.perf_counter() - t)\n")
    env = dict(os.environ, PYTHONPATH=str(tree))
    res = subprocess.run([sys.executable, "-c", code, str(tree), str(pool), json.dumps(settings)], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"baseline tree {tree} failed on {pool}:\n{res.stderr[-2000:]}")
    return float(res.stdout.strip().splitlines()[-1])


CONFIGS = {"full": {}, "no audits/ladder": {"audits": False, "ladder": False}}


def bench_pool(src: Path, scratch: Path, repeat: int,
               baseline_tree: Path | None) -> list[tuple[str, str, float, int | None]]:
    """(eval settings, run, seconds, score calls) rows for one pool."""
    from calver.evaluation.evaluate import evaluate
    from calver.infer.score_table import score_table

    work = scratch / src.name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    for p in [work, *work.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    drop = lambda: shutil.rmtree(work / "scores", ignore_errors=True)  # noqa: E731
    calls = _Calls()
    rows = []
    try:
        rows.append(("-", "table build", *_timed(lambda: score_table(work), repeat, calls, drop)))
        for name, kw in CONFIGS.items():
            if baseline_tree is not None:
                drop()
                rows.append((name, "baseline tree", min(_baseline_tree(baseline_tree, work, kw) for _ in range(repeat)),
                             None))
            run = lambda: evaluate(str(work), **kw)  # noqa: E731
            rows.append((name, "before (no table)", *_timed(run, repeat, calls, drop)))
            score_table(work)
            rows.append((name, "after (table stored)", *_timed(run, repeat, calls, lambda: None)))
    finally:
        calls.close()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pools", nargs="+", type=Path, help="pool directories (default: a fixture pool)")
    ap.add_argument("--units", type=int, default=200, help="fixture pool: units")
    ap.add_argument("--k", type=int, default=8, help="fixture pool: candidates per unit")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row (the best is shown)")
    ap.add_argument("--baseline-tree", type=Path, help="also time evaluate from this source tree")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eval_bench_") as tmp:
        scratch = Path(tmp)
        pools = args.pools
        if not pools:
            fx = tests_module("fixtures")
            root = scratch / "src" / "fixture"
            fx.write_pool(root, fx.synthetic_units(args.units, args.k), args.k)
            pools = [root]
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s); best of {args.repeat}")
        print("\n| pool | candidates | eval | run | seconds | ratio vs before | score calls |")
        print("|---|---:|---|---|---:|---:|---:|")
        for src in pools:
            n = sum(1 for _ in open(src / "candidates.jsonl", encoding="utf-8"))
            rows = bench_pool(src, scratch / "work", args.repeat, args.baseline_tree)
            base = {cfg: s for cfg, run, s, _ in rows if run == "before (no table)"}
            for cfg, run, s, c in rows:
                ratio = s / base.get(cfg, base["full"])
                print(f"| {src.name} | {n} | {cfg} | {run} | {s:.2f} | {ratio:.2f} | {'-' if c is None else c} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
