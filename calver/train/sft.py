"""``calver train sft``: TRL ``SFTTrainer`` on six-slot chat rows, loss on the assistant turn only.

LoRA (``use_peft``), QLoRA (``qlora``: NF4 base, double quant, bf16 compute) or explicit full
fine-tuning (``full_finetune``, meant for the tiny from-scratch demo model); ``lookup_loss_weight`` weights the
rationale's looked-up edges in the loss (:mod:`calver.train.lookup_loss`). The adapter (or the full
model) and the tokenizer are saved to ``output_dir`` with ``calver_train_summary.json`` (mode,
trainable parameters, per-step wall times, last logged loss).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from calver.train.common import (
    TrainRun,
    build_dataset,
    check_precision,
    finish_run,
    load_tokenizer,
    model_init_kwargs,
    peft_config,
    quantization_config,
    require_model_path,
    resolve_mode,
    step_timer,
    trainable_parameter_count,
)
from calver.train.lookup_loss import check_weight, weighted_sft_trainer_class

logger = logging.getLogger(__name__)


def build_sft_trainer(script_args, training_args, model_args, callbacks: Sequence[Any] = ()):
    """The configured ``SFTTrainer`` (not yet trained) and the fine-tuning mode name."""
    from trl import SFTTrainer

    mode = resolve_mode(script_args, model_args)
    check_precision(training_args)
    path = require_model_path(model_args)
    if not training_args.assistant_only_loss and not training_args.completion_only_loss:
        logger.warning("assistant_only_loss is false: the loss also covers the system and user turns")
    train = build_dataset(script_args, "sft", script_args.dataset_path)
    evald = build_dataset(script_args, "sft", script_args.eval_dataset_path) if script_args.eval_dataset_path else None
    training_args.model_init_kwargs = model_init_kwargs(model_args, training_args)
    tok = load_tokenizer(path, training_args.model_init_kwargs["trust_remote_code"], model_args.model_revision)
    weight = script_args.lookup_loss_weight
    check_weight(weight, training_args)
    trainer_class, extra = (SFTTrainer, {}) if weight == 1 else \
        (weighted_sft_trainer_class(), {"lookup_loss_weight": weight})
    trainer = trainer_class(
        model=path,
        args=training_args,
        train_dataset=train,
        eval_dataset=evald,
        processing_class=tok,
        quantization_config=quantization_config(model_args),
        peft_config=peft_config(model_args) if mode != "full" else None,
        callbacks=list(callbacks),
        **extra,
    )
    return trainer, mode


def run_sft(script_args, training_args, model_args) -> TrainRun:
    """Train, save the adapter/model + tokenizer to ``output_dir``, and write the run summary."""
    timer = step_timer()
    trainer, mode = build_sft_trainer(script_args, training_args, model_args, callbacks=[timer])
    trainable, total = trainable_parameter_count(trainer.model)
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    losses = [h["loss"] for h in timer.log_history if "loss" in h]
    summary = {
        "trainer": "sft",
        "mode": mode,
        "model": model_args.model_name_or_path,
        "output_dir": training_args.output_dir,
        "trainable_params": trainable,
        "total_params": total,
        "train_loss": result.training_loss,
        "last_logged_loss": losses[-1] if losses else None,
        "train_rows": len(trainer.train_dataset),
        "lookup_loss_weight": script_args.lookup_loss_weight,
        **getattr(trainer, "token_counts", {}),
        **timer.summary(),
    }
    return finish_run(trainer, training_args, summary)


def main(argv: Sequence[str] | None = None, config: str | None = None) -> TrainRun:
    """Entry point for ``accelerate launch -m calver.train.sft --config FILE [--field value ...]``."""
    from calver.train.common import split_config_arg
    from calver.train.sft_config import load_sft_config

    config, overrides = split_config_arg(argv, config)
    return run_sft(*load_sft_config(config, overrides))


if __name__ == "__main__":
    main()
