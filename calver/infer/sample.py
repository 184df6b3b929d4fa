"""`calver sample --config CONFIG.yaml [--field value ...]`: sample a K-candidate pool for every (problem, seed) unit.

Resumable: every unit's K rows go to ``candidates.jsonl`` in one fsynced append, and each unit's
sampler seed is ``unit_seed(seed, problem_id)`` (independent of batching and order). On start the
existing rows are read; complete units (candidate indices exactly 0..K-1) are kept, rows of partial
units (a kill between rows of one append) are removed, and only the missing units are sampled. A
killed run therefore resumes without losing or duplicating candidates and ends with the same rows
as an uninterrupted run of the same seeds (exactly so on a backend that is deterministic for a fixed
seed, e.g. HF ``generate`` on CPU).

Sharding: ``shard`` / ``num_shards`` split the units across processes (GPUs, nodes): a shard samples the
units at canonical index i (problems in file order, then seeds) with ``i % num_shards == shard`` into its
own pool directory; ``calver pool merge`` (:mod:`calver.infer.pool_merge`) checks and joins the shards
into the pool an unsharded run writes.

Prompts: system = the family's contract instructions, user = the problem text (supplied mode: the
graph in arrow text, then the family's question), rendered by ``calver.data_gen.prompts``; the
``prompt`` style (``zero_shot`` | ``few_shot:N`` | ``completion``, :mod:`calver.data_gen.prompt_styles`)
adds worked examples or makes one untemplated string. The manifest records the style, its template
hash, and hashes of the system prompts and of the rendered user prompts, so a resume with a changed
renderer or template is refused.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from calver.data_gen.prompt_styles import build_prompt, parse_prompt_style, response_prefix, template_hash
from calver.data_gen.prompts import system_prompt, user_text
from calver.infer.manifest import (
    build_manifest,
    canonical_units,
    is_hub_id,
    mismatches,
    resolve_hub_model,
    shard_units,
    unit_seed,
)
from calver.infer.pool import Pool, PoolError, read_jsonl
from calver.infer.sample_config import SampleConfig
from calver.verifier import Problem

SLOW_ENV = "CALVER_SAMPLE_BATCH_DELAY_S"  # testing hook: sleep after each appended batch


# ---- problems ----------------------------------------------------------------------------------
def _read_problems(path: str | Path) -> list[tuple[Problem, dict[str, Any]]]:
    """(problem, labels) per row of a JSONL file (rows are Problem dicts or ``{"problem": ..., "labels": ...}``),
    or of a directory holding ``problems.jsonl`` (else its ``*.jsonl`` files); each row parsed once."""
    p = Path(path)
    if p.is_dir():
        files = [p / "problems.jsonl"] if (p / "problems.jsonl").exists() else sorted(p.glob("*.jsonl"))
        if not files:
            raise FileNotFoundError(f"{p}: no problems.jsonl or *.jsonl files")
    elif p.exists():
        files = [p]
    else:
        raise FileNotFoundError(f"problems source {p} does not exist")
    out = []
    for f in files:
        for i, r in enumerate(read_jsonl(f)):
            if "problem" in r and isinstance(r["problem"], dict):
                prob, labels = r["problem"], dict(r.get("labels") or {})
            else:
                prob, labels = r, {}
            pr = Problem.from_dict(prob)
            if not pr.id:
                raise ValueError(f"{f}:{i + 1}: problem has no 'id'")
            out.append((pr, labels))
    dup = sorted(i for i, n in Counter(pr.id for pr, _ in out).items() if n > 1)
    if dup:
        raise ValueError(f"duplicate problem id(s): {', '.join(dup[:5])}")
    return out


def load_problem_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows ``{"problem": Problem dict, "labels": {...}}`` from a source :func:`_read_problems` reads."""
    return [{"problem": pr.to_dict(), "labels": labels} for pr, labels in _read_problems(path)]


def load_problems(path: str | Path) -> list[Problem]:
    """The problems of a source :func:`_read_problems` reads (a training set's, for a contamination or
    exclusion check), each parsed once."""
    return [pr for pr, _ in _read_problems(path)]


def select_rows(rows: list[dict[str, Any]], cfg: SampleConfig) -> list[dict[str, Any]]:
    if cfg.tasks is not None:
        rows = [r for r in rows if r["problem"]["task"] in cfg.tasks]
    if cfg.limit is not None:
        rows = rows[: cfg.limit]
    return rows


# ---- resume --------------------------------------------------------------------------------------
def existing_units(pool: Pool, k: int) -> tuple[set[tuple[str, int]], list[dict[str, Any]], int]:
    """(complete units, rows to keep, number of dropped partial rows)."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in pool.candidate_rows():
        groups[(r["problem_id"], int(r["seed"]))].append(r)
    done, keep, dropped = set(), [], 0
    for unit, rows in groups.items():
        idx = sorted(int(r["candidate_index"]) for r in rows)
        if idx == list(range(k)):
            done.add(unit)
            keep += sorted(rows, key=lambda r: r["candidate_index"])
        else:
            dropped += len(rows)
    return done, keep, dropped


def prepare_pool(cfg: SampleConfig, manifest: dict[str, Any], problem_rows: list[dict[str, Any]],
                 log=print) -> tuple[Pool, set]:
    pool = Pool(cfg.out)
    if pool.manifest_path.exists():
        bad = mismatches(pool.manifest(), manifest)
        if bad:
            raise PoolError(f"{pool.root} was sampled with a different configuration ({', '.join(bad)}); "
                            "use a new --out or delete the pool")
        if pool.frozen:
            return pool, {(r["problem_id"], int(r["seed"])) for r in pool.candidate_rows()}
        done, keep, dropped = existing_units(pool, cfg.k)
        if dropped:
            log(f"resume: dropping {dropped} row(s) of partially written units")
            pool.rewrite_candidates(keep)
        log(f"resume: {len(done)} complete unit(s) found in {pool.root}")
        return pool, done
    if pool.candidates_path.exists():
        raise PoolError(f"{pool.root} holds candidates but no manifest; refusing to mix runs")
    # problems first, manifest last: a manifest marks a fully initialized pool
    pool.write_problems([Problem.from_dict(r["problem"]) for r in problem_rows],
                        {r["problem"]["id"]: r["labels"] for r in problem_rows})
    pool.write_manifest(manifest)
    return pool, set()


# ---- main ----------------------------------------------------------------------------------------
def resolve_backend(cfg: SampleConfig) -> str:
    from calver.infer.sampler import resolve_backend_name

    return resolve_backend_name(cfg.backend)


def run_sample(cfg: SampleConfig, *, sampler=None, log=print, progress: bool = False) -> Pool:
    """Sample (or resume) the pool described by ``cfg``; ``sampler`` overrides building one.
    ``progress`` shows a tqdm bar over the units still to sample."""
    problem_rows = select_rows(load_problem_rows(cfg.problems), cfg)
    if not problem_rows:
        raise ValueError("no problems to sample (check 'problems', 'tasks' and 'limit')")
    if sampler is None and cfg.model and is_hub_id(cfg.model):  # sample, and record, one pinned snapshot
        path, rev = resolve_hub_model(cfg.model, cfg.model_revision)
        log(f"model {cfg.model}: snapshot {rev} ({path})")
        cfg = dataclasses.replace(cfg, model=path, model_revision=rev)
    problems = {r["problem"]["id"]: Problem.from_dict(r["problem"]) for r in problem_rows}
    backend = sampler.backend if sampler is not None else resolve_backend(cfg)
    style = parse_prompt_style(cfg.prompt)
    systems = {p.task: system_prompt(p.task, style.system) for p in problems.values()}
    prefixes = {p.task: response_prefix(p, style) for p in problems.values()}  # depends on the task only
    manifest = build_manifest(cfg, problem_rows=problem_rows, system_prompts=systems,
                              user_prompts=[user_text(p) for p in problems.values()], backend=backend,
                              prompt_style=style.spec, template_hash=template_hash(style, systems),
                              response_prefixes={t: x for t, x in prefixes.items() if x})
    pool, done = prepare_pool(cfg, manifest, problem_rows, log)
    units = shard_units(canonical_units(problems, cfg.seeds), cfg.shard, cfg.num_shards)
    if cfg.num_shards > 1:
        log(f"shard {cfg.shard}/{cfg.num_shards}: {len(units)} of {manifest['n_units']} unit(s)")
    todo = [u for u in units if u not in done]
    if pool.frozen:
        if todo:
            raise PoolError(f"{pool.root} is frozen but lacks {len(todo)} unit(s)")
        log(f"{pool.root} is frozen and complete")
        return pool
    if todo:
        from calver.infer.sampler import SamplingConfig, make_sampler

        own = sampler is None
        if own:
            sampler = make_sampler(cfg.model, cfg.adapter, backend=backend, **cfg.sampler_kwargs)
        scfg = SamplingConfig(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, n=cfg.k,
                              stop=cfg.stop, logprobs=True)
        delay = float(os.environ.get(SLOW_ENV, "0") or 0)
        t0, n = time.time(), 0
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc=f"sampling K={cfg.k}", unit="unit")
        try:
            for b in range(0, len(todo), cfg.batch_units):
                batch = todo[b : b + cfg.batch_units]
                prompts = [build_prompt(problems[pid], style) for pid, _ in batch]
                res = sampler.generate(prompts, scfg, seeds=[unit_seed(s, pid) for pid, s in batch], progress=False)
                for (pid, s), comps in zip(batch, res):
                    if len(comps) != cfg.k:
                        raise RuntimeError(f"sampler returned {len(comps)} completions for unit {pid}/{s}, "
                                           f"expected {cfg.k}")
                    pool.append_candidates(
                        {
                            "problem_id": pid, "source_id": problems[pid].source_id, "seed": s,
                            # a completion prompt already wrote the first slot label: store the whole trace
                            "candidate_index": i, "text": prefixes[problems[pid].task] + c.text,
                            "finish_reason": c.finish_reason,
                            "num_tokens": int(c.num_tokens), "mean_logprob": c.mean_logprob,
                        }
                        for i, c in enumerate(comps)
                    )
                n += len(batch)
                if bar is not None:
                    bar.update(len(batch))
                else:
                    log(f"sampled {n}/{len(todo)} unit(s) ({time.time() - t0:.1f}s)")
                if delay:
                    time.sleep(delay)
        finally:
            if bar is not None:
                bar.close()
            if own:
                sampler.close()
    if cfg.freeze:
        pool.freeze()
        log(f"froze {pool.root}: {len(units)} unit(s) x K={cfg.k}")
    return pool


def cmd_sample(args) -> int:
    """``calver sample``: the settings are ``--config`` YAML, then ``--field value`` flags (:mod:`calver.config`)."""
    from calver.config import ConfigError, parse

    try:
        cfg = parse(SampleConfig, args.config, args)
        run_sample(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
    except (ConfigError, PoolError, ValueError) as e:
        print(f"calver sample: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # --out names a file, a folder that cannot be written, a missing --problems ...
        where = f" ({e.filename})" if e.filename else ""
        print(f"calver sample: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2
    return 0
