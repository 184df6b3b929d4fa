"""Configuration of ``calver demo``: :class:`DemoConfig`, read by :mod:`calver.config`.

The defaults are the CPU demo (a tiny policy built and trained from scratch); ``--quick`` applies
:data:`QUICK` on top; ``configs/demo/*.yaml`` recipes point the same pipeline at real models. The
selector list defaults to every non-neural selector (:data:`calver.infer.selectors.NON_NEURAL`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, cfg_field, check_types, parse

DEFAULT_TASKS = ["backdoor_set", "separation_set", "frontdoor_set", "blocking_set", "cycle_witness"]

# The old name of the one config error (calver.config.ConfigError), kept for callers that catch it.
DemoConfigError = ConfigError


def _non_neural() -> list[str]:
    from calver.infer.selectors import NON_NEURAL

    return list(NON_NEURAL)


@dataclass
class DemoConfig:
    out: str = cfg_field("runs/demo", help="run directory")
    seed: int = cfg_field(0, help="seed of generation, training and evaluation")
    # data
    tasks: list[str] = cfg_field(DEFAULT_TASKS, help="task families")
    n_train_per_task: int = cfg_field(160, help="training problems per task")
    n_eval_per_task: int = cfg_field(24, help="held-out evaluation problems per task")
    n_nodes: list[int] = cfg_field([4, 6], help="[min, max] graph nodes")
    many_satisfier: bool = cfg_field(True, help="keep only queries with >= 2 valid answers")
    # policy: model=None builds the tiny model locally and fully fine-tunes it
    model: str | None = cfg_field(None, help="policy model (null: build the tiny Qwen2 policy locally and fully "
                                  "fine-tune it)")
    tiny_hidden: int = cfg_field(256, help="tiny policy hidden size")
    tiny_layers: int = cfg_field(4, help="tiny policy layers")
    tiny_heads: int = cfg_field(4, help="tiny policy attention heads (head_dim must be 64)")
    tiny_intermediate: int = cfg_field(768, help="tiny policy MLP size")
    tiny_vocab: int = cfg_field(1500, help="tiny policy tokenizer vocabulary")
    sft_recipe: str | None = cfg_field(None, help="a configs/sft/*.yaml recipe (LoRA/QLoRA for real models)")
    sft_steps: int = cfg_field(300, help="SFT steps of the tiny policy")
    sft_batch_size: int = cfg_field(8, help="SFT batch size of the tiny policy")
    sft_learning_rate: float = cfg_field(2e-3, help="SFT learning rate of the tiny policy")
    # pool
    k: int = cfg_field(8, help="candidates per unit (32 for the full K-scaling curve)")
    sample_seeds: list[int] = cfg_field([0], help="sampling seeds (one unit per problem and seed)")
    temperature: float = cfg_field(0.8, help="sampling temperature")
    max_tokens: int = cfg_field(256, help="completion tokens at most")
    backend: str = cfg_field("auto", help="sampling backend: auto | vllm | hf")
    # selection and evaluation
    selectors: list[str] = cfg_field(help="selectors to run (default: every non-neural one)",
                                     default_factory=_non_neural)
    with_prm: bool = cfg_field(False, help="also train and select with a distilled PRM")
    prm_steps: int = cfg_field(60, help="PRM training steps")
    draws: int = cfg_field(10_000, help="bootstrap draws for headline intervals")
    decomp_draws: int = cfg_field(2_000, help="bootstrap draws for decompositions")
    audits: bool = cfg_field(True, help="run the renaming / swap / damage audits")

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
    check_types(cfg)
    for name in ("n_train_per_task", "n_eval_per_task", "sft_steps", "sft_batch_size", "k", "max_tokens",
                 "prm_steps", "draws", "decomp_draws", "tiny_hidden", "tiny_layers", "tiny_heads",
                 "tiny_intermediate", "tiny_vocab"):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"field {name!r} must be a positive integer, got {getattr(cfg, name)!r}")
    if cfg.tiny_hidden % cfg.tiny_heads or cfg.tiny_hidden // cfg.tiny_heads != 64:
        raise ConfigError("fields 'tiny_hidden'/'tiny_heads' must give head_dim 64 (vLLM's CPU attention needs it)")
    if cfg.temperature < 0:
        raise ConfigError(f"field 'temperature' must be a number >= 0, got {cfg.temperature!r}")
    if cfg.sft_learning_rate <= 0:
        raise ConfigError(f"field 'sft_learning_rate' must be > 0, got {cfg.sft_learning_rate!r}")
    if cfg.backend not in ("auto", "vllm", "hf"):
        raise ConfigError(f"field 'backend' must be auto, vllm or hf, got {cfg.backend!r}")
    if not (len(cfg.n_nodes) == 2 and 3 <= cfg.n_nodes[0] <= cfg.n_nodes[1]):
        raise ConfigError(f"field 'n_nodes' must be [min, max] with 3 <= min <= max, got {cfg.n_nodes!r}")
    from calver.verifier import families

    unknown = [t for t in cfg.tasks if t not in families()]
    if not cfg.tasks or unknown:
        raise ConfigError(f"field 'tasks' has unregistered task(s) {unknown}; registered: {sorted(families())}")
    if not cfg.sample_seeds:
        raise ConfigError("field 'sample_seeds' must be a non-empty list of integers")
    from calver.infer.selectors import SELECTORS

    unknown = [s for s in cfg.selectors if s not in SELECTORS]
    if not cfg.selectors or unknown:
        raise ConfigError(f"field 'selectors' has unknown selector(s) {unknown}; known: {', '.join(SELECTORS)}")


def load_demo_config(path: str | Path | None = None, args: Sequence[str] | Any = (), *, quick: bool = False,
                     **overrides: Any) -> DemoConfig:
    """Defaults, then ``QUICK`` if asked, then the YAML file, then ``--field value`` ``args`` (or a parsed
    namespace), then keyword overrides (None = unset)."""
    return parse(DemoConfig, path, args, base=QUICK if quick else None, overrides=overrides)
