"""Configuration of ``calver train prm``: calver's PRM arguments plus transformers' ``TrainingArguments``
and TRL's ``ModelConfig``.

The distilled PRM (supplement): a regression head on frozen Qwen2.5-0.5B-Instruct with a LoRA adapter
(task type SEQ_CLS, so the head is trained and saved with the adapter), MSE on the verifier's 0-6
totals of pool candidates, validation RMSE per epoch, best checkpoint kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calver.train.common import ModeArguments


@dataclass
class PRMScriptArguments(ModeArguments):
    """Pools, split and input options of ``calver train prm``.

    Every candidate of every pool in ``pool_paths`` becomes one example: input = the problem's user
    text + the candidate trace, label = ``score(trace, problem).total`` (0-6). The validation split
    holds out whole problems (``eval_fraction`` of them, chosen with ``split_seed``).
    """

    pool_paths: list[str] = field(default_factory=list, metadata={"help": "candidate pool directories"})
    eval_fraction: float = field(default=0.1, metadata={"help": "fraction of problems held out for validation"})
    split_seed: int = field(default=0, metadata={"help": "seed of the problem-level split"})
    max_length: int = field(default=2048, metadata={"help": "token limit of problem + trace (left-truncated)"})
    max_examples: int | None = field(default=None, metadata={"help": "cap on training examples (smoke runs)"})
    trust_remote_code: bool = field(default=False, metadata={"help": "allow custom model code from the Hub"})
    loss: str = field(default="mse", metadata={
        "help": "mse (regress the 0-6 total) | ranking (pairwise logistic loss between candidates of the same "
                "problem with different totals; batches hold whole problems)"})

    def __post_init__(self) -> None:
        if self.loss not in ("mse", "ranking"):
            from calver.train.common import ConfigError

            raise ConfigError(f"field 'loss' must be mse or ranking, got {self.loss!r}")


def config_types() -> tuple[type, ...]:
    from transformers import TrainingArguments
    from trl import ModelConfig

    return (PRMScriptArguments, TrainingArguments, ModelConfig)


def load_prm_config(config=None, overrides=()):
    """``(PRMScriptArguments, TrainingArguments, ModelConfig)`` from a YAML recipe plus overrides."""
    from calver.train.common import parse_config

    return parse_config(config_types(), config, overrides)
