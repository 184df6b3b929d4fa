"""Configuration of ``calver demo``: one YAML mapping over :class:`DemoConfig`'s fields.

The defaults are the CPU demo (a tiny policy built and trained from scratch); ``--quick`` applies
:data:`QUICK` on top; ``configs/demo/*.yaml`` recipes point the same pipeline at real models.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_TASKS = ["backdoor_set", "separation_set", "frontdoor_set", "blocking_set", "cycle_witness"]
NON_NEURAL_SELECTORS = ["first", "plurality", "medoid", "structure", "calver", "extract_solve"]


class DemoConfigError(ValueError):
    """A demo config is malformed; the message names the field."""


@dataclass
class DemoConfig:
    out: str = "runs/demo"
    seed: int = 0
    # data
    tasks: list[str] = field(default_factory=lambda: list(DEFAULT_TASKS))
    n_train_per_task: int = 160
    n_eval_per_task: int = 24
    n_nodes: list[int] = field(default_factory=lambda: [4, 6])
    many_satisfier: bool = True
    # policy: model=None builds the tiny model locally and fully fine-tunes it
    model: str | None = None
    tiny_hidden: int = 256
    tiny_layers: int = 4
    tiny_heads: int = 4
    tiny_intermediate: int = 768
    tiny_vocab: int = 1500
    sft_recipe: str | None = None  # a configs/sft/*.yaml recipe (LoRA/QLoRA for real models)
    sft_steps: int = 300
    sft_batch_size: int = 8
    sft_learning_rate: float = 2e-3
    # pool
    k: int = 8
    sample_seeds: list[int] = field(default_factory=lambda: [0])
    temperature: float = 0.8
    max_tokens: int = 256
    backend: str = "auto"
    # selection and evaluation
    selectors: list[str] = field(default_factory=lambda: list(NON_NEURAL_SELECTORS))
    with_prm: bool = False
    prm_steps: int = 60
    draws: int = 10_000
    decomp_draws: int = 2_000
    audits: bool = True

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


QUICK: dict[str, Any] = {
    "n_train_per_task": 48,
    "n_eval_per_task": 6,
    "tiny_hidden": 128,
    "tiny_layers": 2,
    "tiny_heads": 2,
    "tiny_intermediate": 256,
    "sft_steps": 40,
    "k": 4,
    "max_tokens": 200,
    "draws": 2_000,
    "decomp_draws": 500,
    "prm_steps": 10,
}


def _validate(cfg: DemoConfig) -> None:
    for name in ("seed", "n_train_per_task", "n_eval_per_task", "sft_steps", "sft_batch_size", "k", "max_tokens",
                 "prm_steps", "draws", "decomp_draws", "tiny_hidden", "tiny_layers", "tiny_heads",
                 "tiny_intermediate", "tiny_vocab"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and name != "seed"):
            raise DemoConfigError(f"field {name!r} must be a positive integer, got {value!r}")
    if cfg.tiny_hidden % cfg.tiny_heads or cfg.tiny_hidden // cfg.tiny_heads != 64:
        raise DemoConfigError("fields 'tiny_hidden'/'tiny_heads' must give head_dim 64 (vLLM's CPU attention needs it)")
    if not (isinstance(cfg.temperature, (int, float)) and cfg.temperature >= 0):
        raise DemoConfigError(f"field 'temperature' must be a number >= 0, got {cfg.temperature!r}")
    if not (isinstance(cfg.sft_learning_rate, (int, float)) and cfg.sft_learning_rate > 0):
        raise DemoConfigError(f"field 'sft_learning_rate' must be > 0, got {cfg.sft_learning_rate!r}")
    if cfg.backend not in ("auto", "vllm", "hf"):
        raise DemoConfigError(f"field 'backend' must be auto, vllm or hf, got {cfg.backend!r}")
    if not (isinstance(cfg.n_nodes, list) and len(cfg.n_nodes) == 2 and 3 <= cfg.n_nodes[0] <= cfg.n_nodes[1]):
        raise DemoConfigError(f"field 'n_nodes' must be [min, max] with 3 <= min <= max, got {cfg.n_nodes!r}")
    from calver.verifier import families

    unknown = [t for t in cfg.tasks if t not in families()]
    if not cfg.tasks or unknown:
        raise DemoConfigError(f"field 'tasks' has unregistered task(s) {unknown}; registered: {sorted(families())}")
    if not cfg.sample_seeds or not all(isinstance(s, int) for s in cfg.sample_seeds):
        raise DemoConfigError("field 'sample_seeds' must be a non-empty list of integers")


def load_demo_config(path: str | Path | None = None, *, quick: bool = False, **overrides: Any) -> DemoConfig:
    """Defaults, then ``QUICK`` if asked, then the YAML file, then explicit overrides (None = unset)."""
    values: dict[str, Any] = dict(QUICK) if quick else {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise DemoConfigError(f"cannot read demo config {path}: {e}") from None
        if not isinstance(data, dict):
            raise DemoConfigError(f"demo config {path} must be a mapping of field: value")
        values.update(data)
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in dataclasses.fields(DemoConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise DemoConfigError(f"unknown demo config field(s): {', '.join(unknown)}")
    return DemoConfig(**values)
