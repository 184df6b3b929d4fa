"""``calver train grpo``: TRL ``GRPOTrainer`` with the symbolic verifier as the reward.

The reward is :class:`calver.train.rewards.VerifierReward` (S/6 by default; strict and per-bit
weighted variants); per-bit pass rates are logged as ``verifier/<slot>`` next to TRL's own metrics,
and unscorable completions are excluded (None) and counted. LoRA, QLoRA or explicit full
fine-tuning; ``beta > 0`` keeps a frozen reference model; ``use_vllm`` (colocate/server) is passed
through to TRL for GPU runs; ``log_completions`` + ``report_to: [wandb]`` logs the completions table.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Sequence

from calver.train.common import (
    ConfigError,
    TrainRun,
    build_dataset,
    check_precision,
    cuda_available,
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
from calver.train.rewards import VerifierReward

logger = logging.getLogger(__name__)


def check_generation_backend(training_args) -> None:
    """``use_vllm`` is a GPU option: say so clearly instead of failing inside TRL/vLLM."""
    if not training_args.use_vllm:
        return
    if training_args.vllm_mode not in ("colocate", "server"):
        raise ConfigError(f"field 'vllm_mode' must be 'colocate' or 'server', got {training_args.vllm_mode!r}")
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError("field 'use_vllm' is true but vllm is not installed; install vllm on the GPU host "
                          "or set 'use_vllm: false' (TRL then generates with transformers)")
    if training_args.vllm_mode == "colocate" and not cuda_available():
        raise ConfigError("use_vllm with vllm_mode 'colocate' needs a CUDA device; on CPU set 'use_vllm: false' "
                          "(TRL then generates with transformers)")


def make_reward(script_args) -> VerifierReward:
    try:
        return VerifierReward(script_args.reward_variant, script_args.reward_bit_weights, script_args.problem_column,
                              allow_ungrounded=script_args.allow_ungrounded_reward,
                              budget_s=script_args.reward_budget_s, workers=script_args.reward_workers)
    except ValueError as e:
        raise ConfigError(f"fields 'reward_variant'/'reward_bit_weights'/'reward_budget_s'/'reward_workers': {e}"
                          ) from None


def merged_policy(path: str, adapter: str, mode: str, training_args):
    """The base with an SFT adapter merged in: GRPO's new LoRA trains on top of it, and with
    ``beta > 0`` the adapter-disabled model (the frozen reference) is the SFT policy."""
    from peft import PeftModel
    from trl.trainer.utils import create_model_from_path

    if mode != "lora":
        raise ConfigError(f"field 'init_adapter' needs LoRA mode (got {mode}): a 4-bit base cannot take a merged "
                          "adapter, and full fine-tuning would take its reference from the unmerged base; merge the "
                          "SFT adapter into a saved model and set model_name_or_path to it instead")
    kw = dict(training_args.model_init_kwargs)
    training_args.model_init_kwargs = None  # the model is built here
    # As TRL's own loaders do (GRPOTrainer.__init__, trl/trainer/grpo_trainer.py: "Distributed training requires
    # device_map=None ('auto' fails)"): create_model_from_path defaults to device_map="auto" on GPU, which under
    # DDP/DeepSpeed spreads every rank's copy over all visible GPUs and accelerate then refuses to train it.
    if training_args.distributed_state.distributed_type in ["MULTI_GPU", "DEEPSPEED"]:
        kw["device_map"] = None
    base = create_model_from_path(path, **kw)
    return PeftModel.from_pretrained(base, adapter).merge_and_unload()


def build_grpo_trainer(script_args, training_args, model_args, callbacks=()):
    """The configured ``GRPOTrainer``, its ``VerifierReward`` and the fine-tuning mode name."""
    from trl import GRPOTrainer

    mode = resolve_mode(script_args, model_args)
    check_precision(training_args)
    check_generation_backend(training_args)
    path = require_model_path(model_args)
    reward = make_reward(script_args)
    train = build_dataset(script_args, "grpo", script_args.dataset_path)
    if script_args.problem_column not in train.column_names:
        raise ConfigError(f"GRPO rows need a {script_args.problem_column!r} column for the verifier reward; "
                          f"got columns {train.column_names}")
    evald = build_dataset(script_args, "grpo", script_args.eval_dataset_path) if script_args.eval_dataset_path else None
    training_args.model_init_kwargs = model_init_kwargs(model_args, training_args)
    tok = load_tokenizer(path, training_args.model_init_kwargs["trust_remote_code"], model_args.model_revision)
    tok.padding_side = "left"
    model = path
    if script_args.init_adapter:
        model = merged_policy(path, script_args.init_adapter, mode, training_args)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=training_args,
        train_dataset=train,
        eval_dataset=evald,
        processing_class=tok,
        quantization_config=quantization_config(model_args),
        peft_config=peft_config(model_args) if mode != "full" else None,
        callbacks=list(callbacks),
    )
    return trainer, reward, mode


def run_grpo(script_args, training_args, model_args) -> TrainRun:
    timer = step_timer()
    trainer, reward, mode = build_grpo_trainer(script_args, training_args, model_args, callbacks=[timer])
    trainable, total = trainable_parameter_count(trainer.model)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    logged = [h for h in timer.log_history if "reward" in h or any(k.startswith("verifier/") for k in h)]
    summary = {
        "trainer": "grpo",
        "mode": mode,
        "model": model_args.model_name_or_path,
        "output_dir": training_args.output_dir,
        "trainable_params": trainable,
        "total_params": total,
        "beta": training_args.beta,
        "reference_model": ("none (beta=0)" if training_args.beta == 0 else
                            "adapter-disabled base" if mode != "full" else "frozen copy"),
        "num_generations": training_args.num_generations,
        "use_vllm": training_args.use_vllm,
        "reward_stats": reward.stats(),
        "reward_share_of_step_time": (reward.seconds / sum(timer.step_times)) if timer.step_times else None,
        "logged_metrics": logged,
        "train_rows": len(trainer.train_dataset),
        **timer.summary(),
    }
    if reward.unscorable:
        logger.warning("verifier reward excluded %d unscorable completions: %s", reward.unscorable,
                       dict(reward.unscorable_reasons))
    return finish_run(trainer, training_args, summary)


def main(argv: Sequence[str] | None = None, config: str | None = None) -> TrainRun:
    """Entry point for ``accelerate launch -m calver.train.grpo --config FILE [--field value ...]``."""
    from calver.train.common import split_config_arg
    from calver.train.grpo_config import load_grpo_config

    config, overrides = split_config_arg(argv, config)
    return run_grpo(*load_grpo_config(config, overrides))


if __name__ == "__main__":
    main()
