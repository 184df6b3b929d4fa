"""``calver bench``: build a suite's rows, sample each policy on each, select, evaluate, one table.

Stages, each resumable (rerunning the command after an interruption redoes only what is missing):

1. **build**: each row's problems through its ``calver data`` adapter into ``OUT/problems/<row>/``
   (seeded, so the same bytes on every run; a pool sampled on other problems refuses to resume);
2. **sample**: one frozen pool per (policy, row), ``OUT/pools/<policy>/<row>/``, with one sampler per
   policy shared by all rows (``<row>/pool/``). ``--num_shards N --shard I`` samples shard I into
   ``<row>/shard-I-of-N/`` and stops; a later run without ``--shard`` merges a complete shard set
   (:mod:`calver.infer.pool_merge`);
3. **select**: every selector whose model is available (the non-neural ones; the policy's own
   confidence through its sampler; judge / reward model / PRM when given) behind the label firewall;
   neural selections already stored for the whole pool are reused;
4. **evaluate**: per row, all policies' pools together (:func:`calver.evaluation.multi.evaluate_pools`;
   report with K-curves and breakdowns in ``OUT/rows/<row>/``), then ``OUT/table.{md,json,png}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from calver.bench.config import BenchConfig, PolicySpec
from calver.bench.suites import BenchRow, suite_rows
from calver.bench.table import BenchLine, BenchTable, write_table

Log = Callable[[str], None]
TABLE_SELECTORS = ("plurality", "medoid", "calver")


class Stopwatch:
    """Wall seconds per named stage (summed when a stage name repeats)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = round(self.seconds.get(stage, 0.0) + time.perf_counter() - t0, 2)


# ---- 1. build ------------------------------------------------------------------------------------
def kk_source(cfg: BenchConfig) -> str:
    if cfg.kk_source != "auto":
        return cfg.kk_source
    import importlib.util

    return "reasoning_gym" if importlib.util.find_spec("reasoning_gym") else "calver"


def build_row(row: BenchRow, cfg: BenchConfig, out: Path) -> tuple[Path, dict[str, Any]]:
    """The row's problems file (``out/problems.jsonl``) and its adapter summary."""
    from calver.data_gen.benchmark_cli import ADAPTERS, write_problems

    cls, build, _ = ADAPTERS[row.adapter]
    settings = dict(row.settings)
    if row.adapter == "kk":
        settings["source"] = kk_source(cfg)
    problems, summary = build(cls(out=str(out), **settings))
    if cfg.limit is not None:
        summary = {**summary, "limit": cfg.limit, "n_before_limit": len(problems)}
        problems = problems[: cfg.limit]
    if not problems:
        raise ValueError(f"row {row.key!r} built no problems ({json.dumps(summary)[:200]})")
    write_problems(out, problems, summary)  # byte-identical when unchanged: a frozen pool still resumes
    return out / "problems.jsonl", {"n_problems": len(problems), **summary}


# ---- 2. sample -----------------------------------------------------------------------------------
def pool_dir(out: Path, policy: PolicySpec, row: BenchRow) -> Path:
    return out / "pools" / policy.label / row.key


def _shard_dirs(root: Path, n: int) -> list[Path]:
    return [root / f"shard-{i}-of-{n}" for i in range(n)]


def _complete_shards(root: Path) -> list[Path] | None:
    """The shard directories of ``root`` when one full, frozen set of them exists."""
    from calver.infer.pool import Pool

    found = sorted(root.glob("shard-*-of-*")) if root.is_dir() else []
    sizes = {p.name.rsplit("-of-", 1)[1] for p in found}
    if len(sizes) != 1 or not next(iter(sizes)).isdigit():
        return None
    dirs = _shard_dirs(root, int(next(iter(sizes))))
    return dirs if all(d.is_dir() and Pool(d).frozen for d in dirs) else None


def sample_config(cfg: BenchConfig, policy: PolicySpec, row: BenchRow, problems: Path, out: Path):
    from calver.infer.sample_config import SampleConfig

    return SampleConfig(problems=str(problems), out=str(out), model=policy.model, adapter=policy.adapter,
                        backend=cfg.backend, k=cfg.k, seeds=list(cfg.seeds or row.seeds), temperature=cfg.temperature,
                        top_p=cfg.top_p, max_tokens=cfg.max_tokens, batch_units=cfg.batch_units,
                        sampler_kwargs=dict(cfg.sampler_kwargs), model_hash=cfg.model_hash, prompt=cfg.prompt,
                        shard=cfg.shard, num_shards=cfg.num_shards)


class PolicySamplers:
    """One sampler per policy, opened on first use and shared by its rows and its confidence selector."""

    def __init__(self, cfg: BenchConfig) -> None:
        self.cfg, self._open = cfg, {}

    def get(self, policy: PolicySpec):
        if policy.label not in self._open:
            from calver.infer.sampler import make_sampler

            self._open[policy.label] = make_sampler(policy.model, policy.adapter, backend=self.cfg.backend,
                                                    **self.cfg.sampler_kwargs)
        return self._open[policy.label]

    def close(self, policy: PolicySpec | None = None) -> None:
        for label in [policy.label] if policy else list(self._open):
            smp = self._open.pop(label, None)
            if smp is not None:
                smp.close()


def sample_row(cfg: BenchConfig, policy: PolicySpec, row: BenchRow, problems: Path, out: Path,
               samplers: PolicySamplers, log: Log) -> Path:
    """The row's pool for ``policy`` (this shard's, with ``num_shards`` > 1), sampled or resumed."""
    from calver.infer.pool import Pool
    from calver.infer.pool_merge import merge_pools
    from calver.infer.sample import run_sample

    root = pool_dir(out, policy, row)
    if cfg.num_shards > 1:
        target = _shard_dirs(root, cfg.num_shards)[cfg.shard]
    else:
        target = root / "pool"
        shards = _complete_shards(root)
        if not (target / "manifest.json").exists() and shards:
            log(f"{policy.label}/{row.key}: merging {len(shards)} shards")
            merge_pools(shards, target, log=log)
    scfg = sample_config(cfg, policy, row, problems, target)
    pool = Pool(target)
    if pool.frozen:  # resumed: run_sample checks the manifest and that no unit is missing
        run_sample(scfg, log=lambda m: None)
        return target
    run_sample(scfg, sampler=samplers.get(policy), log=log)
    return target


# ---- 3. select -----------------------------------------------------------------------------------
def _stored_complete(pool, name: str) -> bool:
    return name in pool.selection_names() and len(pool.selection(name)) == len(pool.units())


def select_pool(cfg: BenchConfig, pool_root: Path, policy: PolicySpec, samplers: PolicySamplers,
                judge_sampler, log: Log) -> list[str]:
    """Run every available selector on the pool; returns their names."""
    from calver.infer.pool import Pool
    from calver.infer.select import run_selection
    from calver.infer.selectors import NON_NEURAL, build_selector

    pool = Pool(pool_root)
    sels = [build_selector(n) for n in NON_NEURAL]
    neural: list[tuple[str, Callable[[], Any]]] = []
    if cfg.confidence:
        neural.append(("confidence", lambda: build_selector("confidence", sampler=samplers.get(policy))))
    if judge_sampler is not None:
        neural.append(("judge", lambda: build_selector("judge", sampler=judge_sampler())))
    if cfg.reward_model:
        neural.append(("reward_model", lambda: build_selector("reward_model", model_path=cfg.reward_model)))
    if cfg.prm:
        neural.append(("prm", lambda: build_selector("prm", model_path=cfg.prm)))
    for name, make in neural:  # a neural selection already stored for the whole pool is reused
        sels.append(build_selector(name) if _stored_complete(pool, name) else make())
    run_selection(pool, sels, log=log)
    return [s.name for s in sels]


# ---- 4. evaluate ---------------------------------------------------------------------------------
def units_too_long(pool_root: Path) -> int:
    """Units whose prompt alone filled the model's context (no candidate was sampled for them)."""
    from calver.infer.pool import Pool

    return len({(r["problem_id"], r["seed"]) for r in Pool(pool_root).candidate_rows()
                if r.get("finish_reason") == "prompt_too_long"})


def verification_summary(counts: dict[str, int]) -> str:
    """The evaluation's verification modes with unit counts (``EvalResult.verification``)."""
    return ", ".join(f"{m} ({n})" for m, n in sorted(counts.items()))


def evaluate_row(cfg: BenchConfig, row: BenchRow, pools: dict[str, Path], names: list[str], n_problems: int,
                 out: Path) -> list[BenchLine]:
    from calver.evaluation.multi import PoolSpec, evaluate_pools
    from calver.evaluation.report import write_multi_report

    res = evaluate_pools([PoolSpec(label, str(p)) for label, p in pools.items()], names, by=row.by,
                         draws=cfg.draws, audits=False, ladder=False)
    write_multi_report(res, out / "rows" / row.key, figures=cfg.figures)
    lines = []
    for label, r in res.policies.items():
        rec = r.graph_recovery
        lines.append(BenchLine(
            row=row.key, title=row.title, policy=label, n_problems=n_problems, n_units=r.n_units,
            n_clusters=r.n_clusters, parse_rate=r.parse_rate or 0.0, accuracy=dict(r.accuracy),
            gain_plurality=r.paired["plurality"], gain_medoid=r.paired["medoid"], coverage=r.coverage,
            verification=verification_summary(r.verification), n_prompt_too_long=units_too_long(pools[label]),
            exact_recovery=rec.exact if rec is not None else None, edge_f1=rec.f1 if rec is not None else None))
    return lines


def _commit() -> str | None:
    """The package checkout's commit, ``-dirty`` when it has uncommitted changes (None outside git)."""
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=7",
                              "--exclude", "*"], capture_output=True, text=True, timeout=10)
        return (out.stdout.strip() or None) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def run_bench(cfg: BenchConfig, *, log: Log = print) -> BenchTable | None:
    """Every stage for every policy and row; the table (None when only a shard was sampled)."""
    out = Path(cfg.out)
    rows = suite_rows(cfg.suite, cfg.rows)
    policies = cfg.policies()
    clock = Stopwatch()
    built: dict[str, tuple[Path, dict[str, Any]]] = {}
    with clock("build"):
        for row in rows:
            built[row.key] = build_row(row, cfg, out / "problems" / row.key)
            log(f"{row.key}: {built[row.key][1]['n_problems']} problems")
    samplers = PolicySamplers(cfg)
    judge: list[Any] = []

    def judge_sampler():
        if not judge:
            from calver.infer.sampler import make_sampler

            judge.append(make_sampler(cfg.judge_model, None, backend=cfg.backend, **cfg.judge_sampler_kwargs))
        return judge[0]

    pools: dict[str, dict[str, Path]] = {row.key: {} for row in rows}
    names: list[str] = []
    try:
        for policy in policies:
            with clock(f"sample {policy.label}"):
                for row in rows:
                    pools[row.key][policy.label] = sample_row(cfg, policy, row, built[row.key][0], out, samplers, log)
            if cfg.num_shards > 1:
                samplers.close(policy)
                continue
            with clock(f"select {policy.label}"):
                for row in rows:
                    names = select_pool(cfg, pools[row.key][policy.label], policy, samplers,
                                        judge_sampler if cfg.judge_model else None, log)
            samplers.close(policy)
    finally:
        samplers.close()
        for smp in judge:
            smp.close()
    if cfg.num_shards > 1:
        log(f"sampled shard {cfg.shard} of {cfg.num_shards}; when every shard is done, rerun without --shard/"
            "--num_shards to merge, select and evaluate")
        return None
    lines: list[BenchLine] = []
    with clock("evaluate"):
        for row in rows:
            lines += evaluate_row(cfg, row, pools[row.key], names, built[row.key][1]["n_problems"],
                                  out)
    t = BenchTable(suite=cfg.suite, prompt=cfg.prompt, k=cfg.k, lines=lines, selectors=names,
                   policies={p.label: p.model + (f" + {p.adapter}" if p.adapter else "") for p in policies},
                   rows_built={k: v[1] for k, v in built.items()}, seconds=dict(clock.seconds), commit=_commit())
    write_table(t, out, figures=cfg.figures)
    return t


def cmd_bench(args) -> int:
    from calver.config import ConfigError, parse_command
    from calver.infer.firewall import FirewallError
    from calver.infer.pool import PoolError
    from calver.infer.selectors import SelectorError

    cfg = parse_command("bench", BenchConfig, args)
    if cfg is None:
        return 2
    try:
        t = run_bench(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    except (ConfigError, ValueError, PoolError, SelectorError, FirewallError, OSError) as e:
        print(f"calver bench: error: {e}", file=sys.stderr)
        return 2
    if t is not None:
        print((Path(cfg.out) / "table.md").read_text())
    return 0


__all__ = ["Stopwatch", "build_row", "cmd_bench", "evaluate_row", "run_bench", "sample_row", "select_pool"]
