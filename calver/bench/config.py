"""``calver bench`` configuration: :class:`BenchConfig`, read by :mod:`calver.config` (``--config`` YAML,
then one ``--field value`` flag per field)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calver.config import ConfigError, cfg_field, check_types
from calver.infer.sample_config import MAX_K

KK_SOURCES = ("auto", "calver", "reasoning_gym")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class PolicySpec:
    """One ``--policy``: its table label, model and LoRA adapter (None: the model as is)."""

    label: str
    model: str
    adapter: str | None = None


@dataclass
class BenchConfig:
    """``calver bench``: a suite's rows built, sampled, selected and evaluated for each policy, as one table."""

    out: str = cfg_field(help="bench folder: problems/, pools/<policy>/<row>/, rows/<row>/ reports, "
                                   "table.{md,json,png}")
    policy: list[str] = cfg_field(help="policy model (repeatable: NAME=MODEL or MODEL; several give the Table 2 "
                                  "layout, one line per policy and row)")
    adapter: list[str] = cfg_field([], help="LoRA adapter per --policy, in order ('none': no adapter); empty: none")
    suite: str = cfg_field("quick", help="paper (Table 3 at the paper's sizes) | quick (the same rows, sized for a "
                           "2-core CPU)")
    rows: list[str] | None = cfg_field(None, help="only these rows of the suite (null: every row)")
    limit: int | None = cfg_field(None, help="at most this many problems per row (the first in file order)")
    prompt: str = cfg_field("zero_shot", help="zero_shot | compact | few_shot:N | completion (calver sample --prompt)")
    k: int = cfg_field(8, help="candidates per unit (Table 3: K=8)")
    seeds: list[int] | None = cfg_field(None, help="sampling seeds for every row (null: each row's own)")
    temperature: float = cfg_field(0.8, help="sampling temperature")
    top_p: float = cfg_field(1.0, help="nucleus sampling mass")
    max_tokens: int = cfg_field(1024, help="completion tokens at most")
    batch_units: int = cfg_field(16, help="units per generate call")
    backend: str = cfg_field("auto", help="auto | vllm | hf")
    sampler_kwargs: dict[str, Any] = cfg_field({}, help="policy sampler settings (tensor_parallel_size, "
                                               "max_model_len, dtype, ...)")
    model_hash: str = cfg_field("fast", help="full | fast | none (pool manifests)")
    shard: int = cfg_field(0, help="sample only this shard of every row's units (then merge: rerun without --shard)")
    num_shards: int = cfg_field(1, help="shards the units are split into; >1 samples this shard and stops")
    confidence: bool = cfg_field(True, help="also select by the policy's own yes/no confidence (one greedy "
                                 "question per candidate, through the policy's sampler)")
    judge_model: str | None = cfg_field(None, help="LLM judge model (adds the judge selector)")
    judge_sampler_kwargs: dict[str, Any] = cfg_field({}, help="judge sampler settings (e.g. tensor_parallel_size)")
    reward_model: str | None = cfg_field(None, help="HF sequence-classification reward model (adds reward_model)")
    prm: str | None = cfg_field(None, help="distilled PRM directory (adds prm)")
    kk_source: str = cfg_field("auto", help="K&K puzzles: auto (reasoning-gym when installed, else calver) | "
                               "calver | reasoning_gym")
    draws: int = cfg_field(10_000, help="bootstrap draws of the intervals")
    figures: bool = cfg_field(True, help="write the PNG table and each row's K-curve panels")

    def __post_init__(self) -> None:
        check_types(self)
        from calver.bench.suites import suite_rows
        from calver.infer.sample_config import BACKENDS, MODEL_HASH_MODES

        try:
            suite_rows(self.suite, self.rows)
        except ValueError as e:
            raise ConfigError(f"field 'suite'/'rows': {e}") from None
        if not self.policy:
            raise ConfigError("field 'policy' needs at least one model: pass --policy MODEL")
        if self.adapter and len(self.adapter) != len(self.policy):
            raise ConfigError(f"field 'adapter': {len(self.adapter)} adapter(s) for {len(self.policy)} policies; "
                              "give one per --policy ('none' for no adapter) or none at all")
        labels = [p.label for p in self.policies()]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"field 'policy': two policies share the label {labels!r}; name them NAME=MODEL")
        bad = [x for x in labels if not _LABEL.match(x)]
        if bad:
            raise ConfigError(f"field 'policy': label {bad[0]!r} must be letters, digits, '.', '_' or '-' "
                              "(it names a folder)")
        for name in ("k", "max_tokens", "batch_units", "num_shards", "draws"):
            if getattr(self, name) < 1:
                raise ConfigError(f"field {name!r} must be >= 1, got {getattr(self, name)}")
        if self.k > MAX_K:
            raise ConfigError(f"field 'k' must be at most {MAX_K}, got {self.k}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"field 'limit' must be >= 1, got {self.limit}")
        if not 0 <= self.shard < self.num_shards:
            raise ConfigError(f"field 'shard' must satisfy 0 <= shard < num_shards ({self.num_shards}), "
                              f"got {self.shard}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"field 'backend' must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.model_hash not in MODEL_HASH_MODES:
            raise ConfigError(f"field 'model_hash' must be one of {', '.join(MODEL_HASH_MODES)}")
        if self.kk_source not in KK_SOURCES:
            raise ConfigError(f"field 'kk_source' must be one of {', '.join(KK_SOURCES)}, got {self.kk_source!r}")
        if self.seeds is not None and (not self.seeds or len(set(self.seeds)) != len(self.seeds)):
            raise ConfigError(f"field 'seeds' must be distinct ints, got {self.seeds!r}")

    def policies(self) -> list[PolicySpec]:
        out = []
        for i, spec in enumerate(self.policy):
            name, sep, model = spec.partition("=")
            if not (sep and name and not Path(spec).exists()):
                name, model = Path(spec.rstrip("/")).name or spec, spec
            adapter = self.adapter[i] if self.adapter else None
            out.append(PolicySpec(name, model, None if adapter in (None, "", "none") else adapter))
        return out


__all__ = ["BenchConfig", "KK_SOURCES", "PolicySpec"]
