"""``calver demo``: the whole pipeline end to end, on a laptop CPU by default.

1. generate many-satisfier problems (mixed families) and canonical six-slot SFT traces;
2. build the tiny policy locally and fully fine-tune it on the traces (or LoRA-tune a real model
   from a recipe), then report the share of its samples that parse into all six slots;
3. sample a frozen K-candidate pool on held-out problems (vLLM when importable, HF otherwise);
4. run every selector that needs no downloaded model (and a PRM trained on the fly with --with-prm);
5. write the evaluation report (clustered CIs, K-curve, audits) and print the headline table.

Everything lands under one run directory, with the resolved config saved as ``config.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from calver.config import ConfigError, add_command
from calver.demo_config import DemoConfig, load_demo_config


def add_commands(sub) -> None:
    p = add_command(sub, "demo", (DemoConfig,), help="run the whole pipeline end to end (CPU-friendly defaults)",
                    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                    config_help="demo YAML (e.g. configs/demo/qwen2.5-0.5b.yaml); flags override it")
    p.add_argument("--quick", action="store_true", help="smoke-sized run (a few minutes on 2 CPU cores): "
                   "QUICK's values under the config file and flags")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    try:
        cfg = load_demo_config(args.config, args, quick=args.quick)
    except ConfigError as e:
        print(f"calver demo: error: {e}", file=sys.stderr)
        return 2
    run_demo(cfg)
    return 0


def _stage(console, i: int, text: str) -> None:
    console.rule(f"[bold]{i}/5 {text}")


def _problem_key(p) -> str:
    return json.dumps([p.task, p.graph.to_text() if p.graph is not None else p.text, p.query], sort_keys=True,
                      default=str)


def make_problems(cfg: DemoConfig):
    """Training problems and held-out evaluation problems (no evaluation item repeats a training one)."""
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import generate

    gen = GenConfig(seed=cfg.seed, n_nodes=tuple(cfg.n_nodes), many_satisfier=cfg.many_satisfier)
    train, held_out = [], []
    for task in cfg.tasks:
        train += generate(task, cfg.n_train_per_task, gen)
    seen = {_problem_key(p) for p in train}
    for task in cfg.tasks:
        start, got = cfg.n_train_per_task, []
        while len(got) < cfg.n_eval_per_task and start < cfg.n_train_per_task + 50 * cfg.n_eval_per_task:
            for p in generate(task, cfg.n_eval_per_task, gen, start=start):
                if _problem_key(p) not in seen and len(got) < cfg.n_eval_per_task:
                    got.append(p)
                    seen.add(_problem_key(p))
            start += cfg.n_eval_per_task
        held_out += got
    return gen, train, held_out


def train_policy(cfg: DemoConfig, data_dir: Path, run: Path, console) -> tuple[str, str | None, dict[str, Any]]:
    """(model path, adapter path or None, training summary)."""
    from calver.train.common import parse_config
    from calver.train.sft import run_sft
    from calver.train.sft_config import config_types

    common = {"dataset_path": str(data_dir / "sft.jsonl"), "report_to": os.environ.get("CALVER_REPORT_TO", "none"),
              "save_strategy": "no", "logging_steps": max(1, cfg.sft_steps // 10), "seed": cfg.seed,
              "output_dir": str(run / "model" / "sft")}
    if cfg.model is None:
        from calver.train.tiny_model import build_tiny_model

        rows = [json.loads(line) for line in (data_dir / "sft.jsonl").read_text().splitlines()]
        corpus = [m["content"] for r in rows for m in r["messages"]]
        base = build_tiny_model(run / "model" / "base", corpus=corpus, hidden_size=cfg.tiny_hidden,
                                num_layers=cfg.tiny_layers, num_heads=cfg.tiny_heads,
                                intermediate_size=cfg.tiny_intermediate, vocab_size=cfg.tiny_vocab, seed=cfg.seed)
        console.print(f"built the tiny policy at {base} (random init, tokenizer trained on the traces)")
        values = {"model_name_or_path": str(base), "full_finetune": True, "use_peft": False,
                  "max_steps": cfg.sft_steps, "per_device_train_batch_size": cfg.sft_batch_size,
                  "learning_rate": cfg.sft_learning_rate, "lr_scheduler_type": "cosine",
                  "warmup_steps": max(1, cfg.sft_steps // 20), "assistant_only_loss": True, "max_length": 1024,
                  "bf16": False, "dataloader_num_workers": 0, "dataset_num_proc": 1, "dtype": "float32"}
        result = run_sft(*parse_config(config_types(), None, values={**values, **common}))
        return str(run / "model" / "sft"), None, result.summary
    if cfg.sft_recipe is None:  # a real model used as is (no training)
        return cfg.model, None, {"trainer": "none"}
    result = run_sft(*parse_config(config_types(), cfg.sft_recipe, values={"model_name_or_path": cfg.model, **common}))
    adapter = str(run / "model" / "sft") if result.summary.get("mode") in ("lora", "qlora") else None
    return (cfg.model if adapter else str(run / "model" / "sft")), adapter, result.summary


def contract_share(pool) -> float:
    """Share of candidates whose text holds all six slots exactly once."""
    from calver.verifier import split_slots

    rows = list(pool.candidate_rows())
    ok = sum(1 for r in rows if not split_slots(r["text"]).problems)
    return ok / len(rows) if rows else 0.0


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    from rich.console import Console

    from calver.data_gen.export import export_dataset
    from calver.evaluation.evaluate import evaluate
    from calver.evaluation.report import write_report
    from calver.evaluation.scaling import K_GRID
    from calver.infer.sample import run_sample
    from calver.infer.sample_config import SampleConfig
    from calver.infer.select import run_selection

    console = Console(stderr=True)
    t0 = time.time()
    run = Path(cfg.out)
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    timings: dict[str, float] = {}

    _stage(console, 1, "problems and SFT traces")
    t = time.time()
    gen, train, held_out = make_problems(cfg)
    export_dataset(train, run / "data" / "train", gen)
    export_dataset(held_out, run / "data" / "eval", gen)
    console.print(f"{len(train)} training problems, {len(held_out)} held-out problems ({', '.join(cfg.tasks)})")
    timings["data"] = time.time() - t

    _stage(console, 2, "policy")
    t = time.time()
    model, adapter, train_summary = train_policy(cfg, run / "data" / "train", run, console)
    timings["train"] = time.time() - t

    _stage(console, 3, f"frozen pool (K={cfg.k})")
    t = time.time()
    scfg = SampleConfig(problems=str(run / "data" / "eval" / "problems.jsonl"), out=str(run / "pool"), model=model,
                        adapter=adapter, backend=cfg.backend, k=cfg.k, seeds=list(cfg.sample_seeds),
                        temperature=cfg.temperature, max_tokens=cfg.max_tokens, model_hash="fast")
    pool = run_sample(scfg, log=lambda m: console.print(m, style="dim"), progress=True)
    share = contract_share(pool)
    console.print(f"{share:.1%} of the policy's samples parse into all six slots")
    timings["sample"] = time.time() - t

    _stage(console, 4, "selection")
    t = time.time()
    selectors = list(cfg.selectors)
    if cfg.with_prm:
        selectors.append(train_prm(cfg, pool, run, console))
    run_selection(pool, selectors, log=lambda m: console.print(m, style="dim"))
    timings["select"] = time.time() - t

    _stage(console, 5, "evaluation report")
    t = time.time()
    names = [s if isinstance(s, str) else s.name for s in selectors]
    ks = [k for k in K_GRID if k <= cfg.k]
    res = evaluate(str(pool.root), names, draws=cfg.draws, decomp_draws=cfg.decomp_draws, seed=cfg.seed, ks=ks,
                   audits=cfg.audits)
    res["demo"] = {"contract_share": share, "train": train_summary, "model": model, "adapter": adapter,
                   "timings_s": timings}
    write_report(res, run / "report")
    timings["eval"] = time.time() - t
    timings["total"] = time.time() - t0
    (run / "report" / "demo_summary.json").write_text(json.dumps(res["demo"], indent=2, default=str))
    print_headline(res, share, timings, run, console)
    return res


def train_prm(cfg: DemoConfig, pool, run: Path, console):
    """Distil a PRM from verifier scores on a separate pool over training problems (never the eval pool)."""
    from calver.infer.sample import run_sample
    from calver.infer.sample_config import SampleConfig
    from calver.infer.selectors import build_selector
    from calver.train.common import parse_config
    from calver.train.prm import run_prm
    from calver.train.prm_config import config_types

    manifest = pool.manifest()
    prm_pool = run / "prm_pool"
    n = max(8, min(40, cfg.n_train_per_task))
    rows = (run / "data" / "train" / "problems.jsonl").read_text().splitlines()
    subset = run / "data" / "prm_problems.jsonl"
    step = max(1, len(rows) // n)
    subset.write_text("\n".join(rows[::step][:n]) + "\n")
    run_sample(SampleConfig(problems=str(subset), out=str(prm_pool), model=manifest.get("model", {}).get("path")
                            or str(run / "model" / "sft"), backend=cfg.backend, k=4, seeds=[cfg.seed],
                            temperature=cfg.temperature, max_tokens=cfg.max_tokens, model_hash="fast"),
               log=lambda m: console.print(m, style="dim"))
    base = str(run / "model" / "base") if cfg.model is None else cfg.model
    values = {"model_name_or_path": base, "pool_paths": [str(prm_pool)], "output_dir": str(run / "model" / "prm"),
              "max_steps": cfg.prm_steps, "report_to": "none", "dtype": "float32"}
    summary = run_prm(*parse_config(config_types(), None, values=values)).summary
    console.print(f"PRM: validation RMSE {summary.get('best_eval_rmse', summary.get('eval_rmse'))}")
    return build_selector("prm", model_path=str(run / "model" / "prm"))


def print_headline(res: dict[str, Any], share: float, timings: dict[str, float], run: Path, console) -> None:
    from rich.table import Table

    table = Table(title=f"calver demo: {res['n_units']} units, {res['n_clusters']} source problems, "
                        f"95% clustered bootstrap CIs ({res['accuracy'][next(iter(res['accuracy']))]['draws']} draws)")
    table.add_column("selector")
    table.add_column("accuracy", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("Δ vs calver", justify="right")
    for name, r in sorted(res["accuracy"].items(), key=lambda kv: -kv[1]["estimate"]):
        d = res["paired"].get(name)
        delta = f"{-d['mean_diff']:+.1%}" if d else "-"
        table.add_row(name, f"{r['estimate']:.1%}", f"[{r['ci_low']:.1%}, {r['ci_high']:.1%}]", delta)
    cov = res["coverage"]
    table.add_row("coverage (ceiling)", f"{cov['estimate']:.1%}", f"[{cov['ci_low']:.1%}, {cov['ci_high']:.1%}]", "")
    console.print(table)
    console.print(f"six-slot contract followed by {share:.1%} of samples; wall time {timings['total']:.0f}s "
                  f"(" + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items() if k != "total") + ")")
    console.print(f"report: {run / 'report' / 'report.md'}")
