"""``calver train {sft,grpo,prm} --config RECIPE.yaml [--qlora] [--field value ...]``.

Every ``--field value`` after the recipe overrides that field (TRL ``TrlParser`` conventions: YAML
defaults, command line wins). For multi-GPU runs launch the module entry points with accelerate::

    accelerate launch --config_file configs/accelerate/zero2.yaml -m calver.train.sft \\
        --config configs/sft/qwen2.5-7b-instruct.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

TRAINERS = {
    "sft": ("calver.train.sft_config", "load_sft_config", "calver.train.sft", "run_sft",
            "supervised fine-tuning on six-slot traces (TRL SFTTrainer, assistant-turn loss)"),
    "grpo": ("calver.train.grpo_config", "load_grpo_config", "calver.train.grpo", "run_grpo",
             "GRPO with the symbolic verifier as reward (TRL GRPOTrainer)"),
    "prm": ("calver.train.prm_config", "load_prm_config", "calver.train.prm", "run_prm",
            "distilled PRM: regression head + LoRA on the verifier's 0-6 scores of pool candidates"),
}


class _OverridesParser(argparse.ArgumentParser):
    """A subcommand parser that keeps unknown ``--field value`` arguments as ``args.overrides``
    (they are validated later against the recipe's dataclasses) instead of rejecting them."""

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        ns, extras = super().parse_known_args(args, namespace)
        ns.overrides = list(getattr(ns, "overrides", None) or []) + list(extras)
        return ns, []


def _run(args: argparse.Namespace) -> int:
    import importlib

    from calver.config import ConfigError

    cfg_mod, cfg_fn, run_mod, run_fn, _ = TRAINERS[args.train_command]
    overrides = list(args.overrides or [])
    if args.qlora:
        overrides += ["--qlora", "true"]
    try:
        parsed = getattr(importlib.import_module(cfg_mod), cfg_fn)(args.config, overrides)
        run = getattr(importlib.import_module(run_mod), run_fn)(*parsed)
    except ConfigError as e:  # exit status 2, like every calver command's config errors
        print(f"calver train {args.train_command}: error: {e}", file=sys.stderr)
        return 2
    summary: dict[str, Any] = {k: v for k, v in run.summary.items() if k not in ("step_times_s", "logged_metrics")}
    print(json.dumps(summary, indent=2, default=str))
    return 0


def add_commands(subparsers) -> None:
    """Register ``train`` with the sub-subcommands ``sft``, ``grpo`` and ``prm``."""
    train = subparsers.add_parser("train", help="train policies (SFT, GRPO) and the distilled PRM",
                                  description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = train.add_subparsers(dest="train_command", metavar="TRAINER", parser_class=_OverridesParser)
    sub.required = True
    for name, (*_, help_text) in TRAINERS.items():
        p = sub.add_parser(name, help=help_text, description=f"{help_text}. Unknown --field value arguments "
                           "override the recipe's fields "
                           "(SFTConfig/GRPOConfig/TrainingArguments, ModelConfig, calver's).")
        p.add_argument("--config", required=True, help="YAML recipe (configs/%s/*.yaml)" % name)
        p.add_argument("--qlora", action="store_true", help="load the base in NF4 (double quant, bf16 compute) + LoRA")
        p.set_defaults(func=_run, overrides=[])
