"""``calver demo``: the whole pipeline end to end, on a laptop CPU by default.

1. seeded problems (several families): training problems with canonical six-slot SFT traces, and
   held-out problems that share no graph with them;
2. SFT: a tiny Qwen2 policy built here (tokenizer with the prompts' fixed phrases as tokens, rule
   answers in the traces) and fully fine-tuned, or a real model LoRA-tuned from a recipe;
3. GRPO from the SFT policy with the verifier reward (``calver train grpo``'s code path);
4. frozen pools on the held-out problems: the untrained base, the SFT and the GRPO policy (K each);
5. a PRM distilled from verifier scores on pools over *training* problems;
6. every selector on both policy pools, the policy statistics, the shuffled-problem control, the
   SFT -> GRPO comparison, K-curves and refinement, written to ``report/report.md``.

Each pool is scored once: its score table (``POOL/scores/``, :mod:`calver.infer.score_table`) is built
when a stage first needs it and held for the run, so refinement, the PRM, selection, evaluation and
the report all read the same scores (pools over the same problems share a memo of repeated texts).

Everything lands under one run directory, with the resolved config saved as ``config.yaml``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from calver.config import ConfigError, add_command
from calver.demo import stages
from calver.demo.config import DemoConfig, base_pool_names, is_base_pool, load_demo_config


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


STAGES = ("problems and SFT traces", "SFT policy", "GRPO", "frozen pools", "distilled PRM", "selection",
          "refinement", "report")


class _Stages:
    """Numbered stage banners and wall times."""

    def __init__(self, console) -> None:
        self.console, self.timings, self._name, self._t = console, {}, None, 0.0

    def start(self, name: str) -> None:
        self.stop()
        self.console.rule(f"[bold]{STAGES.index(name) + 1}/{len(STAGES)} {name}")
        self._name, self._t = name, time.time()

    def stop(self) -> None:
        if self._name is not None:
            self.timings[self._name] = self.timings.get(self._name, 0.0) + time.time() - self._t
            self._name = None


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    from rich.console import Console

    from calver.data_gen.export import export_dataset
    from calver.data_gen.trace_style import TraceStyle
    from calver.demo.report import build_report, markdown, print_headline, summary_json

    console = Console(stderr=True)
    t0 = time.time()
    run = Path(cfg.out)
    run.mkdir(parents=True, exist_ok=True)
    config_text = yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    # the same config in the same run directory: finished training stages and frozen pools are reused
    resume = (run / "config.yaml").is_file() and (run / "config.yaml").read_text() == config_text
    (run / "config.yaml").write_text(config_text)
    for key, value in (("WANDB_MODE", "offline"), ("WANDB_DIR", str(run)), ("WANDB_PROJECT", "calver-demo")):
        if not os.environ.get(key):  # never reach for the network unless the user set wandb up
            os.environ[key] = value
    log = lambda m: console.print(m, style="dim")  # noqa: E731
    st = _Stages(console)
    out: dict[str, Any] = {"config": cfg.to_dict()}

    st.start("problems and SFT traces")
    gen, train, held_out = stages.make_problems(cfg)
    export_dataset(train, run / "data" / "train", gen, style=TraceStyle(cfg.sft_answers, cfg.sft_witnesses))
    export_dataset(held_out, run / "data" / "eval", gen)
    step = max(1, len(train) // cfg.prm_problems)
    prm_problems = stages.write_problems(train[::step][:cfg.prm_problems], run / "data" / "prm_problems.jsonl")
    console.print(f"{len(train)} training problems, {len(held_out)} held-out problems ({', '.join(cfg.tasks)})")

    if cfg.pretrained is not None:  # convert once into the run; every stage then loads the checkpoint folder
        from calver.train.pretrained import build_pretrained

        path, converted = build_pretrained(cfg.pretrained, run / "model" / "pretrained")
        console.print(f"{cfg.pretrained}: {'converted to' if converted else 'reusing'} {path}")
        cfg = dataclasses.replace(cfg, model=str(path), pretrained=None)

    st.start("SFT policy")
    base = stages.build_base(cfg, run / "data" / "train", run) if cfg.model is None else None
    model, adapter, out["sft"] = stages.train_sft(cfg, run / "data" / "train", run, base, resume=resume)
    if resume and stages.finished_summary(run / "model" / "sft"):
        console.print("SFT: reusing the finished run in model/sft (same config)")
    policies: dict[str, tuple[str, str | None]] = {}
    prompts: dict[str, str] = {}  # pool name -> prompt style (zero_shot unless listed)
    if cfg.base_k:
        for name, style in base_pool_names(cfg).items():
            policies[name], prompts[name] = (str(base) if base is not None else str(cfg.model), None), style
    policies["sft"] = (model, adapter)

    if cfg.grpo_steps:
        st.start("GRPO")
        out["grpo"], policies["grpo"] = stages.train_grpo(cfg, run / "data" / "train", run, model, adapter,
                                                          resume=resume)

    st.start("frozen pools")
    eval_problems = run / "data" / "eval" / "problems.jsonl"
    pools: dict[str, Path] = {}
    prm_pools: list[Path] = []
    memo: dict = {}  # (problem hash, text) -> score, across pools
    tables: dict[str, Any] = {}  # pool root -> its score table, held so every later stage reuses it

    def table(root: Path):
        if str(root) not in tables:
            tables[str(root)] = stages.score_pool(root, log, memo)
        return tables[str(root)]

    groups: dict[tuple[str, str | None], list[str]] = {}  # one sampler (one engine start) per policy
    for name, (m, a) in policies.items():
        groups.setdefault(stages.sampling_policy(cfg, run, name, m, a), []).append(name)
    for (m, a), names in groups.items():
        with stages.open_sampler(cfg, m, a) as sampler:
            for name in names:
                k = cfg.base_k if is_base_pool(name) else cfg.k
                style = prompts.get(name, "zero_shot")
                console.print(f"{name} policy ({style}): {k} candidates x {len(held_out)} held-out problems")
                pools[name] = stages.sample_pool(cfg, sampler, eval_problems, run / "pools" / name, m, a, k, log,
                                                 prompt=style).root
                if cfg.with_prm and name in ("sft", "grpo"):
                    console.print(f"{name} policy: {cfg.prm_k} candidates x {cfg.prm_problems} training problems "
                                  "(PRM)")
                    prm_pools.append(stages.sample_pool(cfg, sampler, prm_problems, run / "prm_pools" / name, m, a,
                                                        cfg.prm_k, log).root)
                if cfg.refine and name == "grpo":
                    st.start("refinement")
                    table(pools[name])
                    out["refine"] = stages.refine(cfg, sampler, pools[name], run / "report" / "refine", log)
                    st.start("frozen pools")

    selectors: list[Any] = list(cfg.selectors)
    if cfg.with_prm:
        st.start("distilled PRM")
        for root in prm_pools:
            table(root)
        out["prm"] = stages.train_prm(cfg, run, prm_pools, policies["sft"][0])
        selectors.append(stages.prm_selector(run))

    st.start("selection")
    from calver.evaluation.units import load_units

    out["pools"] = {name: str(p) for name, p in pools.items()}
    out["evaluations"] = {}
    units = {name: load_units(str(root), table=table(root)) for name, root in pools.items()}  # eval and report
    for name, root in pools.items():
        if is_base_pool(name):
            continue
        out["evaluations"][name] = stages.select_and_evaluate(cfg, root, selectors, log, units[name])

    st.start("report")
    report = build_report(cfg, run, out, pools, st.timings, units)
    st.stop()
    report["timings_s"] = {**st.timings, "total": time.time() - t0}
    (run / "report" / "report.md").write_text(markdown(cfg, report))  # again, with the report's own time
    (run / "report" / "demo_summary.json").write_text(summary_json(report))
    print_headline(report, run, console)
    return report
