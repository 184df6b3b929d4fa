"""Configuration of ``calver train rft``: the SFT recipe's fields (``SFTConfig``, ``ModelConfig``, calver's
script arguments) plus the rounds and the sampling of verifier-filtered self-training
(:mod:`calver.train.rft`). ``dataset_path`` names training *problems* here (a ``calver gen`` folder or its
problems.jsonl), not SFT rows: the rows are the policy's own verified traces."""

from __future__ import annotations

from dataclasses import dataclass, field

from calver.train.sft_config import SFTScriptArguments


@dataclass
class RFTScriptArguments(SFTScriptArguments):
    """``calver train rft`` options (see :mod:`calver.train.rft`)."""

    rounds: int = field(default=2, metadata={"help": "sample -> keep the 6/6 traces -> fine-tune, this many times"})
    rft_k: int = field(default=8, metadata={"help": "candidates sampled per problem and round"})
    rft_temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    rft_max_tokens: int = field(default=512, metadata={"help": "most tokens per candidate"})
    rft_max_answers: int = field(default=4, metadata={
        "help": "most 6/6 traces kept per problem and round, one per distinct valid answer"})
    rft_backend: str = field(default="auto", metadata={"help": "sampler: auto (vLLM when it imports) | vllm | hf"})
    rft_check_lookups: bool = field(default=True, metadata={
        "help": "keep no 6/6 trace whose rule rationale states a wrong edge lookup or scan (checked on the "
                "training problem's graph; no bit checks it)"})

    def __post_init__(self) -> None:
        from calver.config import ConfigError

        for name in ("rounds", "rft_k", "rft_max_tokens", "rft_max_answers"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"field {name!r} must be a whole number >= 1, got {v!r}")
        if not 0.0 < float(self.rft_temperature) <= 5.0:
            raise ConfigError(f"field 'rft_temperature' must be in (0, 5], got {self.rft_temperature!r}")
        if self.rft_backend not in ("auto", "vllm", "hf"):
            raise ConfigError(f"field 'rft_backend' must be auto, vllm or hf, got {self.rft_backend!r}")


def config_types() -> tuple[type, ...]:
    from trl import ModelConfig, SFTConfig

    return (RFTScriptArguments, SFTConfig, ModelConfig)


def load_rft_config(config=None, overrides=()):
    """``(RFTScriptArguments, SFTConfig, ModelConfig)`` from a YAML recipe plus ``--field value`` overrides."""
    from calver.train.common import parse_config

    return parse_config(config_types(), config, overrides)
