"""`calver sample` configuration: a dataclass read from YAML (``yaml.safe_load``).

Unknown keys are errors naming the key; values are type-checked. Relative paths are taken relative to
the current directory. ``override(cfg, ["k=4", "seeds=[0, 1]"])`` applies ``--set`` pairs (values
parsed as YAML).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

BACKENDS = ("auto", "vllm", "hf")
MODEL_HASH_MODES = ("full", "fast", "none")


class ConfigError(ValueError):
    """A sample config is malformed; the message names the offending field."""


@dataclass
class SampleConfig:
    problems: str  # JSONL of Problem dicts (or {"problem": ..., "labels": ...}), or a dataset dir
    out: str  # pool directory
    model: str  # local model dir (or hub id)
    model_revision: str | None = None
    adapter: str | None = None
    backend: str = "auto"
    k: int = 8
    seeds: list[int] = field(default_factory=lambda: [0])
    temperature: float = 0.8
    top_p: float = 1.0
    max_tokens: int = 1024
    stop: list[str] | None = None
    batch_units: int = 16  # units per generate call (each unit = one prompt, n = k)
    limit: int | None = None  # first N problems only
    tasks: list[str] | None = None  # keep only these task families
    quantization: dict[str, Any] | None = None  # recorded in the manifest; pass the backend's own flags via sampler_kwargs
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)
    model_hash: str = "full"  # full | fast (sizes + head/tail of big files) | none
    prompt_version: str = "calver-prompt/1"
    selector_context: dict[str, Any] = field(default_factory=dict)  # manifest extras a selector may read
    freeze: bool = True  # freeze the pool once every unit is written

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_TYPES: dict[str, tuple[type, ...]] = {
    "problems": (str,), "out": (str,), "model": (str,), "model_revision": (str, type(None)),
    "adapter": (str, type(None)), "backend": (str,), "k": (int,), "seeds": (list,),
    "temperature": (int, float), "top_p": (int, float), "max_tokens": (int,), "stop": (list, type(None)),
    "batch_units": (int,), "limit": (int, type(None)), "tasks": (list, type(None)),
    "quantization": (dict, type(None)), "sampler_kwargs": (dict,), "model_hash": (str,),
    "prompt_version": (str,), "selector_context": (dict,), "freeze": (bool,),
}


def validate(cfg: SampleConfig) -> None:
    for name, types in _TYPES.items():
        v = getattr(cfg, name)
        if isinstance(v, bool) and bool not in types:
            raise ConfigError(f"field {name!r} must be {'/'.join(t.__name__ for t in types)}, got a bool")
        if not isinstance(v, types):
            raise ConfigError(f"field {name!r} must be {'/'.join(t.__name__ for t in types)}, got {type(v).__name__} {v!r}")
    if cfg.backend not in BACKENDS:
        raise ConfigError(f"field 'backend' must be one of {BACKENDS}, got {cfg.backend!r}")
    if cfg.model_hash not in MODEL_HASH_MODES:
        raise ConfigError(f"field 'model_hash' must be one of {MODEL_HASH_MODES}, got {cfg.model_hash!r}")
    if cfg.k < 1:
        raise ConfigError(f"field 'k' must be >= 1, got {cfg.k}")
    if not cfg.seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in cfg.seeds):
        raise ConfigError(f"field 'seeds' must be a non-empty list of ints, got {cfg.seeds!r}")
    if len(set(cfg.seeds)) != len(cfg.seeds):
        raise ConfigError(f"field 'seeds' has duplicates: {cfg.seeds!r}")
    if not 0 <= cfg.temperature <= 10:
        raise ConfigError(f"field 'temperature' must be in [0, 10], got {cfg.temperature}")
    if not 0 < cfg.top_p <= 1:
        raise ConfigError(f"field 'top_p' must be in (0, 1], got {cfg.top_p}")
    if cfg.max_tokens < 1:
        raise ConfigError(f"field 'max_tokens' must be >= 1, got {cfg.max_tokens}")
    if cfg.batch_units < 1:
        raise ConfigError(f"field 'batch_units' must be >= 1, got {cfg.batch_units}")
    if cfg.limit is not None and cfg.limit < 1:
        raise ConfigError(f"field 'limit' must be >= 1, got {cfg.limit}")
    if cfg.stop is not None and not all(isinstance(s, str) for s in cfg.stop):
        raise ConfigError("field 'stop' must be a list of strings")
    if cfg.tasks is not None and not all(isinstance(s, str) for s in cfg.tasks):
        raise ConfigError("field 'tasks' must be a list of task names")


def from_dict(d: dict[str, Any]) -> SampleConfig:
    if not isinstance(d, dict):
        raise ConfigError(f"a sample config must be a mapping, got {type(d).__name__}")
    names = [f.name for f in dataclasses.fields(SampleConfig)]
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(map(str, unknown))} (known: {', '.join(names)})")
    missing = [f.name for f in dataclasses.fields(SampleConfig)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in d]
    if missing:
        raise ConfigError(f"missing required config field(s): {', '.join(missing)}")
    return SampleConfig(**d)


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> SampleConfig:
    import yaml

    try:
        d = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    d = dict(d or {})
    for item in overrides:
        key, value = parse_override(item)
        d[key] = value
    return from_dict(d)


def parse_override(item: str) -> tuple[str, Any]:
    import yaml

    if "=" not in item:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value is not valid YAML: {e}") from None
    return key.strip(), value
