"""``calver train {sft,grpo,prm} --config RECIPE.yaml [--qlora] [--field value ...]``.

Every ``--field value`` after the recipe overrides that field (TRL ``TrlParser`` conventions: YAML
defaults, command line wins). For multi-GPU runs launch the module entry points with accelerate::

    accelerate launch --config_file configs/accelerate/deepspeed-zero2.yaml -m calver.train.sft \\
        --config configs/sft/qwen2.5-7b-instruct.yaml

(also configs/accelerate/ddp.yaml, deepspeed-zero3.yaml, fsdp2.yaml; across nodes multinode-ddp.yaml or
multinode-zero3.yaml, as in scripts/slurm/train_sft.sbatch and train_grpo.sbatch; see docs/gpu-launch.md)
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calver.config import ConfigError, add_command, cfg_field, check_types

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


@dataclass
class TinyModelConfig:
    """``calver tiny-model``: a random-init Qwen2 policy and its tokenizer, built locally (no hub)."""

    out: str = cfg_field("runs/tiny_model", help="output directory (what configs/*/tiny-cpu.yaml point at)")
    hidden: int = cfg_field(128, help="hidden size (hidden / heads must be 64 for vLLM's CPU attention)")
    layers: int = cfg_field(2, help="decoder layers")
    heads: int = cfg_field(2, help="attention heads")
    intermediate: int = cfg_field(512, help="MLP size")
    vocab: int = cfg_field(800, help="BPE vocabulary target")
    seed: int = cfg_field(0, help="seed of the weights")
    dataset: str | None = cfg_field(None, help="an SFT JSONL (calver data's sft.jsonl): train the tokenizer on its "
                                    "texts and make its fixed phrases (contract instructions, graph headers, "
                                    "edges) single tokens; null: a built-in synthetic corpus")

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("hidden", "layers", "heads", "intermediate", "vocab"):
            if getattr(self, name) < 1:
                raise ConfigError(f"field {name!r} must be a positive integer, got {getattr(self, name)!r}")
        if self.hidden % self.heads:
            raise ConfigError("field 'hidden' must be divisible by 'heads'")
        if self.dataset is not None and not Path(self.dataset).is_file():
            raise ConfigError(f"field 'dataset': no such file {self.dataset!r}")


def _tiny_model(args: argparse.Namespace) -> int:
    from calver.config import parse

    try:
        cfg = parse(TinyModelConfig, args.config, args)
    except ConfigError as e:
        print(f"calver tiny-model: error: {e}", file=sys.stderr)
        return 2
    from calver.train.tiny_model import build_tiny_model, dataset_corpus

    corpus, phrases, prompt_phrases = dataset_corpus(cfg.dataset) if cfg.dataset else (None, (), ())
    out = build_tiny_model(cfg.out, hidden_size=cfg.hidden, num_layers=cfg.layers, num_heads=cfg.heads,
                           intermediate_size=cfg.intermediate, vocab_size=cfg.vocab, corpus=corpus, phrases=phrases,
                           prompt_phrases=prompt_phrases, seed=cfg.seed)
    print(out)
    return 0


def add_commands(subparsers) -> None:
    """Register ``train`` with the sub-subcommands ``sft``, ``grpo`` and ``prm``, and ``tiny-model``."""
    add_command(subparsers, "tiny-model", (TinyModelConfig,), help="build the tiny random-init Qwen2 policy and its "
                "tokenizer locally (tests, CPU recipes)", description=TinyModelConfig.__doc__).set_defaults(
        func=_tiny_model)
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
