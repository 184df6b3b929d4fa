"""Configuration of ``calver train sft``: calver's script arguments plus TRL's ``SFTConfig`` and ``ModelConfig``.

A recipe (``configs/sft/*.yaml``) is one mapping over the fields of the three dataclasses, e.g.::

    model_name_or_path: Qwen/Qwen2.5-7B-Instruct
    use_peft: true
    lora_r: 64
    lora_alpha: 128
    lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
    learning_rate: 5.0e-5
    assistant_only_loss: true
    dataset_path: data/sft/train.jsonl

The paper's recipe (supplement): LoRA r=64, alpha=128 on q/k/v/o, AdamW, lr 5e-5, effective batch 16
(per_device_train_batch_size x gradient_accumulation_steps x processes), about 1,000 steps, loss on
the assistant turn only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from calver.train.common import BaseScriptArguments

PAPER_RECIPE = {
    "lora_r": 64,
    "lora_alpha": 128,
    "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    "learning_rate": 5e-5,
    "optim": "adamw_torch",
    "effective_batch_size": 16,
    "max_steps": 1000,
}


@dataclass
class SFTScriptArguments(BaseScriptArguments):
    """``calver train sft`` data/mode options (see :class:`calver.train.common.BaseScriptArguments`).

    Rows are chat rows ``{"messages": [system, user, assistant]}`` (``calver.data_gen`` export, or
    generated canonical traces); the loss covers the assistant turn only (``assistant_only_loss``).
    """

    lookup_loss_weight: float = field(default=1.0, metadata={
        "help": "weight of the rule rationale's looked-up edges (the list after 'Edges into X:') in the token-mean "
                "loss; 1 is TRL's plain loss (needs padded batches: no packing, no padding_free)"})


def config_types() -> tuple[type, ...]:
    from trl import ModelConfig, SFTConfig

    return (SFTScriptArguments, SFTConfig, ModelConfig)


def load_sft_config(config=None, overrides=()):
    """``(SFTScriptArguments, SFTConfig, ModelConfig)`` from a YAML recipe plus ``--field value`` overrides."""
    from calver.train.common import parse_config

    return parse_config(config_types(), config, overrides)
