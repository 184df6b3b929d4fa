"""`GenConfig`: the validated configuration of the synthetic generator (and its YAML form).

Every bad value raises :class:`ConfigError` naming the field. The seed is required: generation is
never silently random. YAML files are read with ``yaml.safe_load``; unknown keys are errors.

YAML run files (``calver gen --config FILE``) hold the :class:`GenConfig` keys plus the run keys
``task`` / ``tasks``, ``n``, ``out`` and ``level`` (see ``configs/gen/*.yaml``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calver.data_gen.names import NAMINGS

GRAPH_CLASSES = ("DAG", "ADMG", "directed")
ENCODINGS = ("arrows", "json", "json_parents", "matrix", "graphml", "dot", "prose", "clear")
RUN_KEYS = ("task", "tasks", "n", "out", "level")
LEVELS = ("L1", "L2", "L3")
MAX_NODES = 26


class ConfigError(ValueError):
    """A generator configuration value is invalid; the message names the field."""


def _as_tuple(value: Any, field_name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"field {field_name!r} must be a string or a non-empty list of strings, got {value!r}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class GenConfig:
    """Per-item generation parameters.

    - ``seed`` (required): item ``idx`` of task ``t`` uses ``Random(f"calver-gen/{t}/{seed}/{idx}")``,
      so it is the same whatever else is generated.
    - ``n_nodes``: node count, an int or an inclusive ``[min, max]`` range (3..26).
    - ``density``: probability of each forward (topological-order) directed edge.
    - ``graph_class``: ``DAG`` / ``ADMG`` / ``directed``, or a list (one chosen per item), or None
      for the family default (cycle_witness: directed; frontdoor_set: ADMG; others: DAG, or ADMG
      when ``latent`` > 0).
    - ``latent``: probability of a bidirected edge (latent confounder) per node pair in an ADMG
      (an ADMG always gets at least one).
    - ``naming``: ``letters``, ``medicine``, ``economics``, ``education``, ``ecology`` or ``mixed``.
    - ``encoding``: how the prompt renders the graph; one or a list (chosen per item).
    - ``variants``: query variants to draw from (None: all of the family's; with
      ``many_satisfier`` single-answer variants such as mediator ``all`` are left out).
    - ``many_satisfier``: keep only queries whose validity class has >= ``min_valid`` members
      (families with one yes/no answer are exempt and say so in ``meta``).
    - ``max_attempts``: deterministic retries (within the item's rng) before an item is skipped.
    - ``max_candidates``: set families skip queries with more candidate nodes than this
      (validity-class enumeration is 2^candidates).
    - ``max_class``: enumeration cap for validity classes that can explode (cycles).
    """

    seed: int
    n_nodes: tuple[int, int] = (5, 8)
    density: float = 0.3
    graph_class: tuple[str, ...] | None = None
    latent: float = 0.0
    naming: str = "letters"
    encoding: tuple[str, ...] = ("arrows",)
    variants: tuple[str, ...] | None = None
    many_satisfier: bool = False
    min_valid: int = 2
    max_attempts: int = 64
    max_candidates: int = 12
    max_class: int = 10_000
    extra: dict[str, Any] = field(default_factory=dict, compare=False)  # family-specific (ate/kk)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not _is_int(self.seed):
            raise ConfigError(f"field 'seed' must be an integer, got {self.seed!r}")
        nn = self.n_nodes
        if _is_int(nn):
            nn = (nn, nn)
        if not (isinstance(nn, (list, tuple)) and len(nn) == 2 and all(_is_int(v) for v in nn)):
            raise ConfigError(f"field 'n_nodes' must be an int or a [min, max] pair of ints, got {self.n_nodes!r}")
        lo, hi = int(nn[0]), int(nn[1])
        if not 3 <= lo <= hi <= MAX_NODES:
            raise ConfigError(f"field 'n_nodes' must satisfy 3 <= min <= max <= {MAX_NODES}, got {[lo, hi]}")
        set_(self, "n_nodes", (lo, hi))
        for name in ("density", "latent"):
            v = getattr(self, name)
            if not _is_num(v) or not 0.0 <= float(v) <= 1.0:
                raise ConfigError(f"field {name!r} must be a number in [0, 1], got {v!r}")
            set_(self, name, float(v))
        if self.graph_class is not None:
            classes = _as_tuple(self.graph_class, "graph_class")
            norm = []
            for c in classes:
                match = [k for k in GRAPH_CLASSES if k.lower() == c.strip().lower()]
                if not match:
                    raise ConfigError(f"field 'graph_class' must be among {GRAPH_CLASSES}, got {c!r}")
                norm.append(match[0])
            set_(self, "graph_class", tuple(norm))
        if self.naming not in NAMINGS:
            raise ConfigError(f"field 'naming' must be one of {NAMINGS}, got {self.naming!r}")
        enc = _as_tuple(self.encoding, "encoding")
        bad = [e for e in enc if e not in ENCODINGS]
        if bad:
            raise ConfigError(f"field 'encoding' must be among {ENCODINGS}, got {bad[0]!r}")
        set_(self, "encoding", enc)
        if self.variants is not None:
            set_(self, "variants", _as_tuple(self.variants, "variants"))
        if not isinstance(self.many_satisfier, bool):
            raise ConfigError(f"field 'many_satisfier' must be true or false, got {self.many_satisfier!r}")
        for name, low in (("min_valid", 1), ("max_attempts", 1), ("max_candidates", 1), ("max_class", 1)):
            v = getattr(self, name)
            if not _is_int(v) or v < low:
                raise ConfigError(f"field {name!r} must be an integer >= {low}, got {v!r}")
        if not isinstance(self.extra, dict):
            raise ConfigError(f"field 'extra' must be a mapping, got {type(self.extra).__name__}")

    # ---- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GenConfig":
        if not isinstance(data, dict):
            raise ConfigError(f"a generator config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown generator config field(s): {', '.join(map(str, unknown))}; "
                              f"known: {', '.join(sorted(known))}")
        if "seed" not in data:
            raise ConfigError("field 'seed' is required (generation is never silently random)")
        return cls(**data)

    def replace(self, **changes: Any) -> "GenConfig":
        return dataclasses.replace(self, **changes)


@dataclass
class RunConfig:
    """A generation run: which tasks, how many items each, where to write, and the GenConfig."""

    gen: GenConfig
    tasks: tuple[str, ...] = ()
    n: int = 0
    out: str | None = None
    level: str | None = None

    def __post_init__(self) -> None:
        if self.tasks:
            self.tasks = _as_tuple(list(self.tasks) if not isinstance(self.tasks, str) else self.tasks, "tasks")
        if not _is_int(self.n) or self.n < 0:
            raise ConfigError(f"field 'n' must be a non-negative integer, got {self.n!r}")
        if self.out is not None and not isinstance(self.out, str):
            raise ConfigError(f"field 'out' must be a path string, got {self.out!r}")
        if self.level is not None and self.level not in LEVELS:
            raise ConfigError(f"field 'level' must be one of {LEVELS}, got {self.level!r}")


def run_config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Split a flat mapping into run keys and :class:`GenConfig` keys (unknown keys are errors)."""
    if not isinstance(data, dict):
        raise ConfigError(f"a generator config file must hold a mapping, got {type(data).__name__}")
    data = dict(data)
    run = {k: data.pop(k) for k in RUN_KEYS if k in data}
    if "task" in run and "tasks" in run:
        raise ConfigError("give either field 'task' or field 'tasks', not both")
    tasks = run.pop("task", None) or run.pop("tasks", None) or ()
    if tasks:
        tasks = _as_tuple(tasks, "tasks")
    return RunConfig(gen=GenConfig.from_dict(data), tasks=tuple(tasks), **run)


def load_config(path: str | Path) -> RunConfig:
    """Read a YAML run config with ``yaml.safe_load``."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read generator config {path}: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"generator config {path} is not valid YAML: {e}") from None
    return run_config_from_dict(data or {})
