"""`calver sample` configuration: :class:`SampleConfig`, read by :mod:`calver.config`.

YAML (``yaml.safe_load``), then ``--field value`` flags; unknown keys are errors naming the closest
field; values are type-checked. Relative paths are taken relative to the current directory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, build, cfg_field, check_types, parse
from calver.data_gen.prompt_styles import ALLOWED_FORMS, parse_prompt_style

BACKENDS = ("auto", "vllm", "hf")
MODEL_HASH_MODES = ("full", "fast", "none")

__all__ = ["BACKENDS", "MODEL_HASH_MODES", "ConfigError", "SampleConfig", "from_dict", "load_config", "validate"]


MAX_K = 4096  # candidates per unit (the paper's pools: K = 32)


@dataclass
class SampleConfig:
    problems: str = cfg_field(help="JSONL of Problem dicts (or {problem: ..., labels: ...} rows), or a dataset dir")
    out: str = cfg_field(help="pool directory")
    model: str = cfg_field(help="local model dir (or hub id)")
    model_revision: str | None = cfg_field(None, help="hub revision of the model")
    adapter: str | None = cfg_field(None, help="LoRA adapter directory")
    backend: str = cfg_field("auto", help="auto (vLLM when importable, else HF) | vllm | hf")
    k: int = cfg_field(8, help="candidates per unit (one unit = one problem x one seed)")
    seeds: list[int] = cfg_field([0], help="sampling seeds; each gives every problem one unit of k candidates")
    temperature: float = cfg_field(0.8, help="sampling temperature")
    top_p: float = cfg_field(1.0, help="nucleus sampling mass")
    max_tokens: int = cfg_field(1024, help="completion tokens at most")
    stop: list[str] | None = cfg_field(None, help="stop strings")
    batch_units: int = cfg_field(16, help="units per generate call (each unit = one prompt, n = k)")
    limit: int | None = cfg_field(None, help="first N problems only")
    tasks: list[str] | None = cfg_field(None, help="keep only these task families")
    quantization: dict[str, Any] | None = cfg_field(
        None, help="recorded in the manifest; pass the backend's own flags via sampler_kwargs")
    sampler_kwargs: dict[str, Any] = cfg_field({}, help="extra backend arguments (YAML mapping)")
    model_hash: str = cfg_field("full", help="full | fast (sizes + head/tail of big files) | none")
    prompt_version: str = cfg_field("calver-prompt/1", help="recorded in the manifest")
    prompt: str = cfg_field("zero_shot", help=f"prompt style: {ALLOWED_FORMS} (few_shot: N worked training "
                            "examples of the item's family; completion: one untemplated string, for base models)")
    selector_context: dict[str, Any] = cfg_field({}, help="manifest extras a selector may read")
    freeze: bool = cfg_field(True, help="freeze the pool once every unit is written")
    shard: int = cfg_field(0, help="this process's shard: it samples the units whose index i in the canonical unit "
                           "order (problems in file order, then seeds) has i % num_shards == shard")
    num_shards: int = cfg_field(1, help="number of shards the units are split into (merge them with "
                                "`calver pool merge`)")

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def validate(cfg: SampleConfig) -> None:
    check_types(cfg)
    if cfg.backend not in BACKENDS:
        raise ConfigError(f"field 'backend' must be one of {BACKENDS}, got {cfg.backend!r}")
    if cfg.model_hash not in MODEL_HASH_MODES:
        raise ConfigError(f"field 'model_hash' must be one of {MODEL_HASH_MODES}, got {cfg.model_hash!r}")
    try:
        parse_prompt_style(cfg.prompt)
    except ConfigError as e:
        raise ConfigError(f"field 'prompt': {e}") from None
    if not 1 <= cfg.k <= MAX_K:  # a pool holds K candidates per unit: a typo'd k would sample until killed
        raise ConfigError(f"field 'k' must be in [1, {MAX_K}], got {cfg.k}")
    if not cfg.seeds:
        raise ConfigError(f"field 'seeds' must be a non-empty list of ints, got {cfg.seeds!r}")
    if len(set(cfg.seeds)) != len(cfg.seeds):
        raise ConfigError(f"field 'seeds' has duplicates: {cfg.seeds!r}")
    if not 0 <= cfg.temperature <= 10:
        raise ConfigError(f"field 'temperature' must be in [0, 10], got {cfg.temperature}")
    if not 0 < cfg.top_p <= 1:
        raise ConfigError(f"field 'top_p' must be in (0, 1], got {cfg.top_p}")
    if cfg.num_shards < 1:
        raise ConfigError(f"field 'num_shards' must be >= 1, got {cfg.num_shards}")
    if not 0 <= cfg.shard < cfg.num_shards:
        raise ConfigError(f"field 'shard' must satisfy 0 <= shard < num_shards ({cfg.num_shards}), got {cfg.shard}")
    for name in ("max_tokens", "batch_units", "limit"):
        value = getattr(cfg, name)
        if value is not None and value < 1:
            raise ConfigError(f"field {name!r} must be >= 1, got {value}")


def from_dict(d: dict[str, Any]) -> SampleConfig:
    return build(SampleConfig, d, "the sample config")


def load_config(path: str | Path | None, args: Sequence[str] = (), **overrides: Any) -> SampleConfig:
    """The YAML file ``path``, then ``--field value`` ``args``, then keyword ``overrides``."""
    return parse(SampleConfig, path, args, overrides=overrides)
