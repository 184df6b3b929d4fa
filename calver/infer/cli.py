"""``calver sample``, ``calver pool merge`` and ``calver select`` (registered on the top-level CLI via
``add_commands``).

Both read their settings through :mod:`calver.config`: an optional YAML ``--config`` file, then
``--field value`` flags (:class:`~calver.infer.sample_config.SampleConfig`, :class:`SelectConfig`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calver.config import ArgumentParser, ConfigError, add_command, cfg_field, check_types, parse
from calver.infer.sample_config import BACKENDS, SampleConfig


@dataclass
class SelectConfig:
    """``calver select``: which selectors run over which pool, at which K-prefixes."""

    pool: str = cfg_field(help="pool directory")
    selectors: list[str] = cfg_field(["non-neural"], help="selector names, or 'non-neural', or 'all': every "
                                     "non-neural selector plus each neural one whose model is available (a "
                                     "--judge_model / --reward_model / --prm flag, the policy for 'confidence' "
                                     "(--policy or the pool manifest's model), or scores stored in the pool); the "
                                     "neural ones left out are named on stderr (commas also split)")
    prefixes: list[int] | None = cfg_field(None, help="K-prefixes to select at (e.g. 1 2 4 8); null: the full pool")
    policy: str | None = cfg_field(None, help="policy model for 'confidence' (default: the pool manifest's "
                                   "model + adapter)")
    judge_model: str | None = cfg_field(None, help="model for the LLM judge")
    reward_model: str | None = cfg_field(None, help="HF sequence-classification reward model for reward_model / "
                                         "reward_model_trace")
    prm: str | None = cfg_field(None, help="distilled PRM directory")
    backend: str = cfg_field("auto", help="sampler backend for confidence / judge: auto | vllm | hf")
    judge_sampler_kwargs: dict[str, Any] = cfg_field(
        {}, help="extra backend arguments of the judge's sampler (YAML mapping, e.g. tensor_parallel_size, dtype)")
    policy_sampler_kwargs: dict[str, Any] = cfg_field(
        {}, help="extra backend arguments of the confidence selector's policy sampler (YAML mapping)")

    def __post_init__(self) -> None:
        check_types(self)
        self.selectors = [n.strip() for spec in self.selectors for n in spec.split(",") if n.strip()]
        if not self.selectors:
            raise ConfigError("field 'selectors' names no selector")
        if self.backend not in BACKENDS:
            raise ConfigError(f"field 'backend' must be one of {BACKENDS}, got {self.backend!r}")
        if self.prefixes is not None and (not self.prefixes or min(self.prefixes) < 1):
            raise ConfigError(f"field 'prefixes' must be K-prefixes >= 1, got {self.prefixes!r}")
        if self.prm is not None and not Path(self.prm).is_dir():
            raise ConfigError(f"field 'prm': no PRM directory {self.prm!r} (calver train prm writes one)")


def add_commands(sub) -> None:
    p = add_command(
        sub, "sample", (SampleConfig,),
        help="sample a resumable K-candidate pool from a YAML config",
        description="Sample K candidates per (problem, seed) unit into a pool directory (resumable; frozen at the "
        "end). Settings: --config YAML (configs/sample/*.yaml), then --field value. See docs/pools.md.",
        renamed={"--set": "--field value (e.g. --k 4 --seeds 0 1)"},
    )
    p.set_defaults(func=_sample)

    pool = sub.add_parser("pool", help="pool utilities (merge the shards of a sharded `calver sample`)",
                          description="Pool utilities. See docs/pools.md.")
    pool_sub = pool.add_subparsers(dest="pool_command", metavar="SUBCOMMAND", required=True)
    m = pool_sub.add_parser(
        "merge", help="check and merge the shards of one sharded `calver sample` into one frozen pool",
        description="Merge the shard pools of `calver sample --shard I --num_shards N` into the pool an unsharded "
        "run writes (units in canonical order, manifest without the shard block), then freeze it. Refuses (exit "
        "2) when the shards' manifests disagree, a shard is missing, given twice, unfrozen or incomplete, or a "
        "unit appears twice.",
    )
    m.add_argument("--out", required=True, help="the merged pool directory (must not exist, or be empty)")
    m.add_argument("shards", nargs="+", metavar="SHARD_DIR", help="every shard's pool directory")
    m.set_defaults(func=_pool_merge)

    s = add_command(
        sub, "select", (SelectConfig,),
        help="run selectors over a pool (behind the label firewall)",
        description="Write selections/<name>[@k].jsonl for each selector. Neural selectors given no model "
        "re-select from the scores stored in the pool.",
        renamed={"--k": "--prefixes K [K ...]"},
    )
    s.set_defaults(func=_select)


def _sample(args) -> int:
    from calver.infer.sample import cmd_sample

    return cmd_sample(args)


def _pool_merge(args) -> int:
    from calver.infer.pool_merge import cmd_pool_merge

    return cmd_pool_merge(args)


def _names(specs: list[str]) -> tuple[list[str], set[str]]:
    """The selector names to run, and the neural names that only ``all`` brought in: those run only
    when their model is available (:func:`_unavailable`); a neural selector named explicitly always runs
    (and fails clearly when it has neither a model nor stored scores)."""
    from calver.infer.selectors import NEURAL, NON_NEURAL, SELECTORS

    out: list[str] = []
    explicit: set[str] = set()
    for n in specs:
        if n == "all":
            out += list(SELECTORS)
        elif n == "non-neural":
            out += list(NON_NEURAL)
        elif n not in SELECTORS:
            raise ConfigError(f"field 'selectors': unknown selector {n!r}; known: {', '.join(SELECTORS)}")
        else:
            out.append(n)
            explicit.add(n)
    names = list(dict.fromkeys(out))
    return names, {n for n in names if n in NEURAL and n not in explicit}


# The flag that gives each neural selector its model (what `all` names when it leaves one out).
MODEL_FLAGS = {"confidence": "--policy", "judge": "--judge_model", "reward_model": "--reward_model",
               "reward_model_trace": "--reward_model", "prm": "--prm"}


def _unavailable(names: set[str], cfg: SelectConfig, pool) -> dict[str, str]:
    """``{name: flag}`` for each neural selector in ``names`` with no model: no flag given, no policy in the
    pool manifest (``confidence``) and no scores stored in the pool."""
    stored = set(pool.selection_names())
    manifest_policy = ((pool.manifest().get("model") or {}).get("path"))
    given = {"confidence": cfg.policy or manifest_policy, "judge": cfg.judge_model, "reward_model": cfg.reward_model,
             "reward_model_trace": cfg.reward_model, "prm": cfg.prm}
    return {n: MODEL_FLAGS[n] for n in sorted(names) if not given.get(n) and n not in stored}


def _build(names: list[str], cfg: SelectConfig, pool):
    from calver.infer.selectors import build_selector

    sels, samplers = [], {}

    def sampler_for(model: str, adapter: str | None, kwargs: dict[str, Any]):
        # one sampler per model + settings: judge and policy share it only when their kwargs agree
        key = (model, adapter, repr(sorted(kwargs.items())))
        if key not in samplers:
            from calver.infer.sampler import make_sampler

            samplers[key] = make_sampler(model, adapter, backend=cfg.backend, **kwargs)
        return samplers[key]

    for n in names:
        if n == "confidence" and (cfg.policy or "confidence" not in pool.selection_names()):
            m = pool.manifest()
            model = cfg.policy or (m.get("model") or {}).get("path")
            adapter = None if cfg.policy else (m.get("adapter") or {}).get("path")
            if model:
                sels.append(build_selector(n, sampler=sampler_for(model, adapter, cfg.policy_sampler_kwargs)))
                continue
        if n == "judge" and cfg.judge_model:
            sels.append(build_selector(n, sampler=sampler_for(cfg.judge_model, None, cfg.judge_sampler_kwargs)))
        elif n in ("reward_model", "reward_model_trace") and cfg.reward_model:
            sels.append(build_selector(n, model_path=cfg.reward_model))
        elif n == "prm" and cfg.prm:
            sels.append(build_selector(n, model_path=cfg.prm))
        else:
            sels.append(build_selector(n))
    return sels, samplers


def _select(args) -> int:
    try:
        cfg = parse(SelectConfig, args.config, args)
        names, optional = _names(cfg.selectors)
    except ConfigError as e:
        print(f"calver select: error: {e}", file=sys.stderr)
        return 2
    return run_select(cfg, names, optional)


def run_select(cfg: SelectConfig, names: list[str], optional: set[str] = frozenset()) -> int:
    """Run ``names`` over ``cfg.pool``; the neural names in ``optional`` (brought in by ``all``) are
    dropped, and named on stderr with the flag that would add them, when their model is unavailable."""
    from calver.infer.firewall import FirewallError
    from calver.infer.pool import Pool, PoolError
    from calver.infer.select import run_selection
    from calver.infer.selectors import SelectorError, build_selector

    pool = Pool(cfg.pool)
    ks: list[int | None] = list(cfg.prefixes) if cfg.prefixes else [None]
    try:
        pool.manifest()
        if not pool.frozen:
            _log(f"warning: {pool.root} is not frozen; selections on a pool still being sampled are not final")
        shard = pool.manifest().get("shard")
        if isinstance(shard, dict):
            _log(f"warning: {pool.root} is shard {shard.get('index')} of {shard.get('num_shards')}, not a whole pool; "
                 "merge the shards first (`calver pool merge --out DIR SHARD_DIR ...`)")
        skipped = _unavailable(set(optional), cfg, pool)
        if skipped:
            names = [n for n in names if n not in skipped]
            _log("all: leaving out " + ", ".join(f"{n} (no model: pass {flag})" for n, flag in skipped.items()))
        sels, samplers = _build(names, cfg, pool)
        try:
            # Full-K first so that neural scores computed here are stored before any prefix reuses them.
            if any(k is not None for k in ks) and any(getattr(s, "neural", False) and s.has_model() for s in sels):
                run_selection(pool, [s for s in sels if s.neural and s.has_model()], None, log=_log)
                sels = [build_selector(s.name) if s.neural else s for s in sels]
            for k in ks:
                run_selection(pool, sels, k, log=_log)
        finally:
            for smp in samplers.values():
                smp.close()
    except (PoolError, SelectorError, FirewallError, ValueError) as e:
        print(f"calver select: error: {e}", file=sys.stderr)
        return 2
    return 0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:  # `python -m calver.infer.cli`
    ap = argparse.ArgumentParser(prog="calver")
    add_commands(ap.add_subparsers(dest="command", required=True, parser_class=ArgumentParser))
    args = ap.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
