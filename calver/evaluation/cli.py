"""Commands whose output grades candidates against labels (registered via ``add_commands``):

* ``calver eval`` -- compare selectors on one frozen pool or several (one policy each: per-policy and
  pooled rows, ``--by`` breakdowns; report.md, results.json, figures); with ``--tie_audit`` /
  ``--selection_accuracy`` also the label-reading tie audits and per-selection accuracy;
* ``calver audit-judges`` -- acceptance of deterministic corruptions by verifier / PRM / judge;
* ``calver refine`` -- verifier-guided refinement vs token-matched best-of-K', graded;
* ``calver route`` -- the extract-or-verify router's dev-set threshold and its test report.

The label-free halves of ``refine`` and ``route`` live in :mod:`calver.infer.refine`. Settings follow
:mod:`calver.config`: an optional ``--config`` YAML file, then ``--field value`` flags.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from calver.config import ConfigError, add_command, cfg_field, check_types, parse_command
from calver.evaluation.bootstrap import DECOMPOSITION_DRAWS, HEADLINE_DRAWS
from calver.evaluation.scaling import K_GRID
from calver.infer.sample_config import BACKENDS


def _check(cfg, positive: tuple[str, ...] = (), backend: bool = False) -> None:
    check_types(cfg)
    for name in positive:
        value = getattr(cfg, name)
        if value is not None and value < 1:
            raise ConfigError(f"field {name!r} must be >= 1, got {value}")
    if backend and cfg.backend not in BACKENDS:
        raise ConfigError(f"field 'backend' must be one of {BACKENDS}, got {cfg.backend!r}")


@dataclass
class EvalConfig:
    """``calver eval``: what to compare on which pool, and which audits to run."""

    pool: list[str] = cfg_field(help="pool directory (manifest.json, problems.jsonl, candidates.jsonl); several "
                                "(repeat --pool, or a YAML list) are evaluated together, one policy per pool: "
                                "NAME=PATH labels it, else the directory name does")
    selectors: list[str] | None = cfg_field(None, help="selectors to compare: stored selections/<name>.jsonl and/or "
                                            "built-ins first, plurality, calver (null: built-ins plus every stored "
                                            "selection)")
    out: str | None = cfg_field(None, help="report directory (required unless only tie_audit / selection_accuracy "
                                "is wanted)")
    draws: int = cfg_field(HEADLINE_DRAWS, help="bootstrap draws for headline intervals")
    decomp_draws: int = cfg_field(DECOMPOSITION_DRAWS, help="bootstrap draws for decompositions")
    seed: int = cfg_field(0, help="bootstrap / audit RNG seed")
    prefixes: list[int] = cfg_field(list(K_GRID), help="K-prefix grid of the K-curve")
    threshold: float = cfg_field(6, help="score threshold for calibration")
    by: list[str] = cfg_field([], help="breakdown fields (repeatable): task, graph_class, mode, verification, source, "
                              "network, encoding, text_level, people, ate_margin, validity_class; policy with several "
                              "pools")
    union: bool = cfg_field(False, help="several pools over different problem sets: evaluate their union (the "
                            "report says so); without it such pools are refused")
    audits: bool = cfg_field(True, help="run the renaming / swap / damage audits")
    ladder: bool = cfg_field(True, help="run the graph-corruption ladder")
    audit_limit: int | None = cfg_field(None, help="audit at most this many candidates")
    ladder_frac: float = cfg_field(0.1, help="edge fraction for delete/add/reverse rungs")
    figures: bool = cfg_field(True, help="write the PNG figures")
    wandb: bool = cfg_field(False, help="also log the tables to wandb")
    wandb_mode: str = cfg_field("offline", help="offline | online | disabled")
    wandb_project: str = cfg_field("calver", help="wandb project")
    tie_audit: bool = cfg_field(False, help="write the label-reading calver_best / calver_worst tie audits as "
                                "selections (full pool and every K-prefix with a stored selection)")
    selection_accuracy: bool = cfg_field(False, help="print the accuracy of every stored selection (labels "
                                         "reattached after selection)")

    def __post_init__(self) -> None:
        if isinstance(self.pool, str):  # `pool: DIR` in a YAML file
            self.pool = [self.pool]
        _check(self, ("draws", "decomp_draws", "audit_limit"))
        if not self.pool:
            raise ConfigError("field 'pool' needs at least one pool directory")
        if len(self.pool) > 1 and (self.tie_audit or self.selection_accuracy):
            raise ConfigError("tie_audit / selection_accuracy work on one pool at a time")
        if not self.prefixes or min(self.prefixes) < 1:
            raise ConfigError(f"field 'prefixes' must be K-prefixes >= 1, got {self.prefixes!r}")
        if self.wandb_mode not in ("offline", "online", "disabled"):
            raise ConfigError(f"field 'wandb_mode' must be offline, online or disabled, got {self.wandb_mode!r}")


@dataclass
class RefineRun:
    """``calver refine``: the pool, policy and output (the loop's own settings are RefineConfig's)."""

    pool: str = cfg_field(help="pool directory (round 0)")
    out: str = cfg_field(help="output directory")
    model: str | None = cfg_field(None, help="policy model (default: the pool manifest's model)")
    adapter: str | None = cfg_field(None, help="policy adapter (default: the pool manifest's adapter)")
    backend: str = cfg_field("auto", help="auto | vllm | hf")

    def __post_init__(self) -> None:
        _check(self, backend=True)


@dataclass
class AuditJudgesConfig:
    """``calver audit-judges``."""

    pool: str = cfg_field(help="pool directory")
    out: str = cfg_field(help="output directory")
    prm: str | None = cfg_field(None, help="distilled PRM directory (calver train prm) or an HF "
                                "sequence-classification model")
    prm_threshold: float = cfg_field(5.5, help="PRM accept threshold (predicted verifier total)")
    judge_model: str | None = cfg_field(None, help="LLM judge model (through the shared sampler)")
    judge_threshold: float = cfg_field(0.5, help="judge accept threshold on its [0, 1] score")
    judge_max_tokens: int = cfg_field(16, help="judge completion tokens")
    judge_sampler_kwargs: dict[str, Any] = cfg_field(
        {}, help="extra backend arguments of the judge's sampler (YAML mapping, e.g. tensor_parallel_size, dtype)")
    max_sources: int | None = cfg_field(None, help="audit only the first N source traces")
    sources: list[str] = cfg_field(["pool", "canonical"], help="pool (max-score correct candidates) and/or "
                                   "canonical (commas also split)")
    backend: str = cfg_field("auto", help="auto | vllm | hf")
    seed: int = cfg_field(0, help="corruption RNG seed")
    draws: int = cfg_field(2000, help="bootstrap draws")

    def __post_init__(self) -> None:
        _check(self, ("judge_max_tokens", "max_sources", "draws"), backend=True)
        self.sources = [x.strip() for spec in self.sources for x in spec.split(",") if x.strip()]


@dataclass
class RouteConfig:
    """``calver route``."""

    pool: str = cfg_field(help="development pool (or the single pool to split)")
    out: str = cfg_field(help="output directory")
    test_pool: str | None = cfg_field(None, help="test pool (default: split pool by source_id)")
    dev_frac: float = cfg_field(0.5, help="share of source problems in the dev split")
    split_seed: int = cfg_field(0, help="seed of the by-source split")
    k: int | None = cfg_field(None, help="candidates per unit (the pool's first k); null: all of them")
    draws: int = cfg_field(2000, help="bootstrap draws")

    def __post_init__(self) -> None:
        _check(self, ("k", "draws"))


def add_commands(subparsers) -> None:
    p = add_command(
        subparsers, "eval", (EvalConfig,),
        help="compare selectors on frozen pools: accuracy, paired clustered-bootstrap gains, breakdowns, audits",
        description="Evaluate selectors on one frozen pool, or on several (one policy each: per-policy rows, the "
        "pooled units and CALVER's paired gains per policy), and write report.md, results.json and PNG figures. "
        "Correctness is the task predicate on the source graph; intervals are clustered by source problem, "
        "across pools.",
        renamed={"--k": "--prefixes K [K ...]"},
    )
    p.set_defaults(func=run_eval)
    _add_experiments(subparsers)


def run_eval(args: argparse.Namespace) -> int:
    cfg = parse_command("eval", EvalConfig, args)
    return 2 if cfg is None else eval_pool(cfg)


def eval_pool(cfg: EvalConfig) -> int:
    from calver.infer.firewall import FirewallError
    from calver.infer.pool import PoolError
    from calver.infer.selectors import SelectorError

    if not (cfg.out or cfg.tie_audit or cfg.selection_accuracy):
        print("calver eval: error: --out is required (or ask for --tie_audit / --selection_accuracy only)",
              file=sys.stderr)
        return 2
    try:
        if cfg.tie_audit or cfg.selection_accuracy:
            _selection_tables(cfg.pool[0], cfg.tie_audit, cfg.selection_accuracy)
    except (PoolError, SelectorError, FirewallError, KeyError, ValueError) as e:
        print(f"calver eval: error: {e}", file=sys.stderr)
        return 2
    return _report(cfg) if cfg.out else 0


def _stored_ks(names: list[str]) -> list[int | None]:
    """None (the full pool) and every K-prefix ``k`` named by a stored ``<selector>@<k>``."""
    ks = {int(k) for base, _, k in (n.rpartition("@") for n in names) if base and k.isdigit()}
    return [None, *sorted(ks)]


def _selection_tables(pool_dir: str, tie_audit: bool, selection_accuracy: bool) -> None:
    from calver.evaluation.grading import accuracy, calver_audit
    from calver.infer.pool import Pool

    pool = Pool(pool_dir)
    pool.manifest()
    if tie_audit:
        for k in _stored_ks(pool.selection_names()):
            for tie in ("best", "worst"):
                calver_audit(pool, tie, k)
    if selection_accuracy:
        for name in pool.selection_names():
            base, _, k = name.rpartition("@")
            print(f"{name}\t{accuracy(pool, name, int(k) if base and k.isdigit() else None):.4f}")


def _report(cfg: EvalConfig) -> int:
    from calver.evaluation.evaluate import evaluate
    from calver.evaluation.multi import PoolSpec, evaluate_pools
    from calver.evaluation.report import ci_text, log_wandb, policy_table, write_multi_report, write_report
    from calver.infer.firewall import FirewallError
    from calver.infer.pool import PoolError
    from calver.infer.selectors import SelectorError

    settings = dict(draws=cfg.draws, decomp_draws=cfg.decomp_draws, seed=cfg.seed, ks=cfg.prefixes,
                    threshold=cfg.threshold, audits=cfg.audits, ladder=cfg.ladder, audit_limit=cfg.audit_limit,
                    ladder_frac=cfg.ladder_frac)
    try:
        if len(cfg.pool) == 1 and not cfg.union:
            res = evaluate(PoolSpec.parse(cfg.pool[0]).path, cfg.selectors, by=cfg.by, **settings)
        else:
            multi = evaluate_pools(cfg.pool, cfg.selectors, union=cfg.union, by=cfg.by, **settings)
    except (PoolError, SelectorError, FirewallError, KeyError, ValueError) as e:
        print(f"calver eval: error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    if len(cfg.pool) == 1 and not cfg.union:
        paths = write_report(res, cfg.out, figures=cfg.figures)
        for name, r in res.accuracy.items():
            print(f"{name:>16}: {ci_text(r)}")
        for name, r in res.paired.items():
            print(f"{res.target} - {name}: {ci_text(r, True)} pp")
        if cfg.wandb:
            note = log_wandb(res, project=cfg.wandb_project, mode=cfg.wandb_mode, out_dir=cfg.out)
            if note:
                print(f"calver eval: {note}", file=sys.stderr)
    else:
        paths = write_multi_report(multi, cfg.out, figures=cfg.figures)
        print("\n".join(policy_table(multi)))
        if cfg.wandb:
            for name, r in multi.policies.items():
                note = log_wandb(r, project=cfg.wandb_project, mode=cfg.wandb_mode, run_name=name, out_dir=cfg.out)
                if note:
                    print(f"calver eval: {note}", file=sys.stderr)
                    break
    print(f"wrote {paths['report']}")
    return 0


# ---- refine, audit-judges, route -------------------------------------------------------------------
def _add_experiments(sub) -> None:
    from calver.infer.refine.refine import RefineConfig

    add_command(
        sub, "refine", (RefineRun, RefineConfig),
        help="verifier-guided refinement vs token-matched best-of-K on a pool",
        description="For units whose pool has no max-score candidate, feed slot-level verifier feedback back to the "
        "policy for up to T rounds; compare with best-of-K' CALVER at the same sampled-token budget. Writes "
        "refine.json, refine_units.jsonl and refine.md under --out.",
        config_help="refine config YAML (configs/refine/*.yaml); flags override it",
    ).set_defaults(func=_refine)
    add_command(
        sub, "audit-judges", (AuditJudgesConfig,),
        help="acceptance of deterministic corruptions by the verifier, a PRM and an LLM judge",
        description="From max-score traces (the pool's and/or canonical ones), make clean / answer-swap / "
        "consistent-swap / strategy-only / edge-deletion / truncation variants and report acceptance rates and "
        "deltas vs clean per scorer.",
    ).set_defaults(func=_audit)
    add_command(
        sub, "route", (RouteConfig,),
        help="extract-or-verify router: threshold on graph agreement chosen on a dev split",
        description="Route each unit to consensus-graph extraction + exact solving (high agreement) or CALVER "
        "(low); the threshold is chosen on --pool (dev) and evaluated on --test_pool, or on a seeded by-source "
        "split of one pool.",
    ).set_defaults(func=_route)


def _manifest_model(pool_dir: str) -> tuple[str | None, str | None]:
    from calver.infer.pool import Pool, PoolError

    try:
        m = Pool(pool_dir).manifest()
    except (PoolError, OSError, ValueError):  # no, unreadable or non-JSON manifest: nothing to name
        return None, None
    model = m.get("model")
    model = model.get("path") if isinstance(model, dict) else model
    adapter = m.get("adapter")
    adapter = adapter.get("path") if isinstance(adapter, dict) else adapter
    return model, adapter


def _err(cmd: str, e: Exception) -> int:
    print(f"calver {cmd}: error: {e}", file=sys.stderr)
    return 2


def _refine(args) -> int:
    from calver.evaluation.refine_eval import markdown, run_refine
    from calver.infer.refine.refine import RefineConfig
    from calver.infer.sampler import make_sampler

    loaded = parse_command("refine", (RefineRun, RefineConfig), args)
    if loaded is None:
        return 2
    run, cfg = loaded
    model, adapter = _manifest_model(run.pool)
    model, adapter = run.model or model, run.adapter or adapter
    if not model:
        return _err("refine", ValueError("no --model given and the pool manifest names none"))
    with make_sampler(model, adapter, backend=run.backend, **cfg.sampler_kwargs) as sampler:
        res = run_refine(run.pool, sampler, cfg, run.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(markdown(res))
    return 0


def _audit(args) -> int:
    from calver.evaluation.audit_judges import markdown, run_audit

    cfg = parse_command("audit-judges", AuditJudgesConfig, args)
    if cfg is None:
        return 2
    prm = judge = None
    if cfg.prm:
        from calver.infer.selectors import load_prm

        prm = load_prm(cfg.prm)
    if cfg.judge_model:
        from calver.infer.sampler import make_sampler

        judge = make_sampler(cfg.judge_model, backend=cfg.backend, **cfg.judge_sampler_kwargs)
    try:
        res = run_audit(cfg.pool, prm=prm, prm_threshold=cfg.prm_threshold, judge_sampler=judge,
                        judge_threshold=cfg.judge_threshold, judge_max_tokens=cfg.judge_max_tokens,
                        max_sources=cfg.max_sources, sources=cfg.sources, seed=cfg.seed, draws=cfg.draws,
                        out=cfg.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if judge is not None:
            judge.close()
    print(markdown(res))
    return 0


def _route(args) -> int:
    from calver.evaluation.router_calibration import markdown, run_route

    cfg = parse_command("route", RouteConfig, args)
    if cfg is None:
        return 2
    try:
        res = run_route(cfg.pool, cfg.test_pool, dev_frac=cfg.dev_frac, split_seed=cfg.split_seed, k=cfg.k,
                        draws=cfg.draws, out=cfg.out)
    except ValueError as e:
        return _err("route", e)
    print(markdown(res))
    return 0
