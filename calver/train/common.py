"""Shared pieces of the three trainers: config parsing, data rows, model/PEFT/quantization options, timing.

Configs follow TRL's conventions: one YAML file whose keys are the fields of the entry point's
dataclasses (a calver ``*ScriptArguments``, TRL's ``SFTConfig``/``GRPOConfig`` or transformers'
``TrainingArguments``, and TRL's ``ModelConfig``), read with ``yaml.safe_load`` and parsed by
``trl.TrlParser``; ``--field value`` arguments after the file override it. An unknown key is
calver's one :class:`calver.config.ConfigError`, naming the key and the closest known one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from calver.config import ConfigError, check_config_keys, read_yaml

SUMMARY_FILE = "calver_train_summary.json"


@dataclass
class TrainRun:
    """What a trainer entry point returns: the TRL trainer (for inspection) and the written summary."""

    trainer: Any
    summary: dict[str, Any]


# ---- the calver part of every recipe ---------------------------------------------------------------
@dataclass
class ModeArguments:
    """Fine-tuning mode: LoRA when ModelConfig's ``use_peft`` is true; ``qlora`` loads the base in NF4
    (double quant, bf16 compute) under LoRA; ``full_finetune`` must be set explicitly to train every weight."""

    qlora: bool = field(default=False, metadata={"help": "NF4 4-bit base (double quant, bf16 compute) + LoRA"})
    full_finetune: bool = field(default=False, metadata={"help": "train all weights (needs use_peft false)"})


@dataclass
class BaseScriptArguments(ModeArguments):
    """Data and fine-tuning-mode options shared by ``calver train sft|grpo``.

    Data: ``dataset_path`` (``sft.jsonl`` / ``grpo.jsonl`` / ``.parquet`` written by ``calver gen``) or,
    when it is unset, problems generated on the fly with ``generate_tasks`` / ``generate_n`` /
    ``generate_seed`` (the tiny-cpu recipes use this, so tests need no data file).
    Mode: LoRA when ModelConfig's ``use_peft`` is true; ``qlora`` loads the base in NF4 (double quant,
    bf16 compute) under LoRA; ``full_finetune`` must be set explicitly to train every weight.
    """

    dataset_path: str | None = field(default=None, metadata={"help": "training rows (.jsonl/.json/.parquet)"})
    eval_dataset_path: str | None = field(default=None, metadata={"help": "optional evaluation rows"})
    generate_tasks: list[str] = field(default_factory=lambda: ["backdoor_set"],
                                      metadata={"help": "tasks generated when dataset_path is unset"})
    generate_n: int = field(default=64, metadata={"help": "problems per task generated when dataset_path is unset"})
    generate_seed: int = field(default=0, metadata={"help": "generator seed (generation is never silently random)"})
    generate_n_nodes: list[int] = field(default_factory=lambda: [4, 6], metadata={"help": "[min, max] nodes"})
    max_train_samples: int | None = field(default=None, metadata={"help": "truncate the training rows"})
    system_prompt: str = field(default="contract", metadata={
        "help": "system message of generated rows: contract (the full instructions) | compact (one line: the "
                "contract lives in the rows; sample such a policy with --prompt compact)"})


def parse_config(types: Sequence[type], config: str | os.PathLike | None = None, overrides: Sequence[str] = (),
                 values: Mapping[str, Any] | None = None) -> tuple[Any, ...]:
    """Instances of ``types`` (with ``TrlParser``): the YAML ``config``, then typed ``values`` (Python callers
    such as ``calver demo``), then ``--field value`` ``overrides``. Unknown keys and flags are
    :class:`~calver.config.ConfigError` naming the closest field."""
    from trl import TrlParser

    args = list(overrides)
    known = {f.name for t in types for f in dataclasses.fields(t)}
    flags = [a[2:].split("=", 1)[0] for a in args if a.startswith("--")]
    bad = [f for f in flags if f not in known and not (f.startswith("no_") and f[3:] in known)]
    if bad:
        check_config_keys(dict.fromkeys(bad), types, "the command-line overrides")
    data: dict[str, Any] = {}
    if config is not None:
        data = read_yaml(config)
        check_config_keys(data, types, str(config), extra=("env",))
        env = data.pop("env", None) or {}
        if not isinstance(env, dict):
            raise ConfigError(f"field 'env' of {config} must be a mapping of variable: value")
        os.environ.update({str(k): str(v) for k, v in env.items()})  # TrlParser's `env:` convention
    if values:
        check_config_keys(values, types, "the given values")
        data.update(values)
    parser = TrlParser(list(types))
    parser.set_defaults_with_config(**data)  # what TrlParser does with a --config file's mapping
    try:
        return tuple(parser.parse_args_and_config(args=args))
    except ValueError as e:  # dataclass __post_init__ checks end here
        msg = str(e)
        if "bf16" in msg and not cuda_available():
            msg += (" (this recipe asks for bf16 on a machine without a GPU: '--use_cpu true' trains under bf16 "
                    "autocast on the CPU, '--bf16 false' in float32)")
        raise ConfigError(msg) from None


# ---- fine-tuning mode ------------------------------------------------------------------------------
def resolve_mode(script_args: ModeArguments, model_args) -> str:
    """Validate the lora/qlora/full choice (mutating ``model_args`` for ``qlora``); return its name."""
    if script_args.qlora:
        if script_args.full_finetune:
            raise ConfigError("field 'qlora' and field 'full_finetune' exclude each other (QLoRA trains an adapter)")
        model_args.use_peft = True
        model_args.load_in_4bit = True
        model_args.bnb_4bit_quant_type = "nf4"
        model_args.use_bnb_nested_quant = True
    if script_args.full_finetune:
        if model_args.use_peft:
            raise ConfigError("field 'full_finetune' is true but 'use_peft' is also true; set one of them")
        if model_args.load_in_4bit or model_args.load_in_8bit:
            raise ConfigError("field 'full_finetune' cannot train a quantized (load_in_4bit/8bit) base")
        return "full"
    if not model_args.use_peft:
        raise ConfigError("set 'use_peft: true' (LoRA), 'qlora: true', or 'full_finetune: true' explicitly; "
                          "nothing trains every weight by default")
    return "qlora" if model_args.load_in_4bit else "lora"


def quantization_config(model_args):
    """``BitsAndBytesConfig`` for a 4-bit base (NF4, double quant, bf16 compute), or None."""
    if not (model_args.load_in_4bit or model_args.load_in_8bit):
        return None
    import torch
    from transformers import BitsAndBytesConfig

    try:
        import bitsandbytes  # noqa: F401
    except ImportError as e:  # pragma: no cover - the train extra pins it
        raise ConfigError(f"QLoRA needs bitsandbytes ({e}); install calver[train]") from None
    if model_args.load_in_8bit:
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=model_args.bnb_4bit_quant_type,
        bnb_4bit_use_double_quant=model_args.use_bnb_nested_quant,
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_quant_storage=model_args.bnb_4bit_quant_storage,
    )


def peft_config(model_args, task_type: str | None = None):
    """TRL's ``get_peft_config`` (LoRA on ``lora_target_modules``), optionally with another task type."""
    from trl import get_peft_config

    if task_type is not None:
        model_args.lora_task_type = task_type
    return get_peft_config(model_args)


def model_init_kwargs(model_args, training_args) -> dict[str, Any]:
    """``from_pretrained`` kwargs from ModelConfig; ``trust_remote_code`` stays off unless the config sets it."""
    kw: dict[str, Any] = dict(getattr(training_args, "model_init_kwargs", None) or {})
    kw.setdefault("revision", model_args.model_revision)
    if model_args.attn_implementation is not None:
        kw.setdefault("attn_implementation", model_args.attn_implementation)
    dtype = model_args.dtype
    if dtype is None and model_args.load_in_4bit:
        dtype = "bfloat16"
    if dtype is not None:
        kw.setdefault("dtype", dtype)
    kw.setdefault("trust_remote_code", bool(getattr(training_args, "trust_remote_code", False)))
    return kw


def load_tokenizer(model_path: str, trust_remote_code: bool = False, revision: str | None = None):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code, revision=revision)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def require_model_path(model_args) -> str:
    if not model_args.model_name_or_path:
        raise ConfigError("field 'model_name_or_path' is required (a local directory or a Hub id)")
    return model_args.model_name_or_path


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001  # pragma: no cover - a broken torch means no CUDA here
        return False


def check_precision(training_args) -> None:
    """fp16 mixed precision needs a GPU: fail with a clear message instead of deep inside accelerate."""
    if getattr(training_args, "fp16", False) and not cuda_available():
        raise ConfigError("field 'fp16' needs a CUDA device; on CPU set 'fp16: false' (bf16 or float32 work)")


# ---- rows ------------------------------------------------------------------------------------------
def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl`` / ``.json`` (list of objects) / ``.parquet`` file or a directory of them."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix in (".jsonl", ".json", ".parquet"))
        if not files:
            raise ConfigError(f"dataset directory {p} holds no .jsonl/.json/.parquet files")
        return [r for f in files for r in read_rows(f)]
    if not p.is_file():
        raise ConfigError(f"dataset file {p} does not exist")
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(p).to_pylist()
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".json":
        data = json.loads(text)
        if not isinstance(data, list):
            raise ConfigError(f"{p}: a .json dataset must be a list of row objects")
        return data
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def generate_problems(tasks: Iterable[str], n: int, seed: int, n_nodes: Sequence[int] = (4, 6)) -> list:
    """``n`` problems per task from ``calver.data_gen`` (seeded, with validity classes in ``meta``)."""
    from calver.data_gen.generators import GenConfig, generate

    cfg = GenConfig(seed=seed, n_nodes=tuple(n_nodes))
    return [p for t in tasks for p in generate(t, n, cfg)]


def problem_json(problem) -> str:
    """``Problem.to_dict()`` as canonical JSON (what data_gen export writes to the ``problem_json`` column)."""
    from calver.data_gen.export import problem_json as pj

    return pj(problem)


def sft_rows(problems: Iterable, system: str = "contract") -> list[dict[str, Any]]:
    """data_gen export's SFT rows: ``messages`` = [system, user, assistant = canonical trace] (+ id, task)."""
    from calver.data_gen.export import to_sft_rows
    from calver.data_gen.trace_style import TraceStyle

    return to_sft_rows(list(problems), style=TraceStyle(system=system))


def prompt_rows(problems: Iterable, system: str = "contract") -> list[dict[str, Any]]:
    """data_gen export's GRPO rows: ``prompt`` = [system, user] plus ``problem_json`` and problem columns."""
    from calver.data_gen.export import to_grpo_rows

    return to_grpo_rows(list(problems), system=system)


def build_dataset(script_args: BaseScriptArguments, kind: str, path: str | None = None):
    """A ``datasets.Dataset`` of ``kind`` ("sft" or "grpo") rows, from ``path`` or generated."""
    from datasets import Dataset

    if path is not None:
        rows = read_rows(path)
    else:
        problems = generate_problems(script_args.generate_tasks, script_args.generate_n, script_args.generate_seed,
                                     script_args.generate_n_nodes)
        rows = sft_rows(problems, script_args.system_prompt) if kind == "sft" else \
            prompt_rows(problems, script_args.system_prompt)
    if script_args.max_train_samples is not None:
        rows = rows[: script_args.max_train_samples]
    need = "messages" if kind == "sft" else "prompt"
    if not rows:
        raise ConfigError(f"the {kind} dataset is empty")
    if need not in rows[0]:
        raise ConfigError(f"{kind} rows need a {need!r} column; got columns {sorted(rows[0])}")
    if kind == "sft":  # only the chat goes to the SFT collator
        rows = [{"messages": r["messages"]} for r in rows]
    return Dataset.from_list(rows)


# ---- timing and summaries --------------------------------------------------------------------------
def resident_gib() -> float | None:
    """This process's resident memory now, in GiB (Linux ``/proc``; None where it cannot be read)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**30


def step_timer():
    """A ``TrainerCallback`` recording the wall time of every optimizer step (``.step_times``) and the process's
    resident memory after it (``.step_rss_gib``: a run that grows step by step shows it in its summary)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.step_times: list[float] = []
            self.step_rss_gib: list[float] = []
            self.log_history: list[dict[str, Any]] = []
            self._t0 = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.step_times.append(time.perf_counter() - self._t0)
            rss = resident_gib()
            if rss is not None:
                self.step_rss_gib.append(rss)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs:
                self.log_history.append(dict(logs))

        def summary(self) -> dict[str, Any]:
            t = self.step_times
            m = self.step_rss_gib
            return {"steps": len(t), "step_time_mean_s": (sum(t) / len(t)) if t else None,
                    "step_time_median_s": sorted(t)[len(t) // 2] if t else None, "step_times_s": t,
                    "rss_gib_max": max(m) if m else None, "rss_gib_last": m[-1] if m else None, "step_rss_gib": m}

    return StepTimer()


def write_summary(output_dir: str | os.PathLike, summary: dict[str, Any]) -> Path:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str))
    return path


def trainable_parameter_count(model) -> tuple[int, int]:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return trainable, total


def split_config_arg(argv: Sequence[str] | None, config: str | None) -> tuple[str | None, list[str]]:
    """``(config path, remaining --field value overrides)`` from a trainer's command line."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if config is None and "--config" in args:
        i = args.index("--config")
        if i + 1 >= len(args):
            raise ConfigError("--config needs a YAML path")
        config = args[i + 1]
        del args[i : i + 2]
    return config, args


def finish_run(trainer, training_args, summary: dict[str, Any]) -> TrainRun:
    """Write the run summary (main process), close trackers and the process group, wrap up."""
    if trainer.accelerator.is_main_process:
        write_summary(training_args.output_dir, summary)
    if hasattr(trainer, "end"):  # transformers >= 5.18: finish trackers (wandb) and the process group
        trainer.end()
    return TrainRun(trainer, summary)
