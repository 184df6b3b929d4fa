"""TRL's own CLI with the verifier as its reward: ``trl grpo --reward_funcs calver.train.rewards.verifier_reward``
runs 2 steps of the tiny model on CPU over a ``calver gen`` dataset (the real ``trl`` entry point, a subprocess).

The run sets ``CALVER_REWARD_BUDGET_S``, so the reward scores in worker processes started from inside
TRL's training script (the case that rules out multiprocessing's spawn, which would re-run that script).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import require_trl

pytestmark = [pytest.mark.slow, require_trl]


def _trl() -> list[str]:
    """The installed ``trl`` console script beside this interpreter (else on PATH; else its module)."""
    beside = Path(sys.executable).with_name("trl")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("trl")
    return [found] if found else [sys.executable, "-m", "trl.cli.main"]


def test_trl_grpo_cli_trains_with_the_verifier_reward(tiny_model_dir, tmp_path):
    from calver.cli import main as calver_main

    data = tmp_path / "data"
    assert calver_main(["gen", "--tasks", "backdoor_set", "--n", "4", "--seed", "0", "--n_nodes", "4", "5",
                        "--out", str(data)]) == 0
    out = tmp_path / "out"
    cmd = _trl() + [
        "grpo", "--model_name_or_path", str(tiny_model_dir), "--dtype", "float32",
        "--dataset_name", str(data), "--dataset_config", "grpo",
        "--reward_funcs", "calver.train.rewards.verifier_reward", "calver.train.rewards.verifier_bit_answer",
        "--reward_weights", "1.0", "0.5",
        "--output_dir", str(out), "--max_steps", "2", "--per_device_train_batch_size", "2",
        "--num_generations", "2", "--max_completion_length", "8", "--learning_rate", "1e-4",
        "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2", "--report_to", "none",
        "--bf16", "false", "--use_cpu", "true", "--use_vllm", "false", "--gradient_checkpointing", "false",
        "--dataloader_num_workers", "0", "--dataloader_pin_memory", "false", "--seed", "0",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false",
           "HF_DATASETS_CACHE": str(tmp_path / "hf_datasets"), "CUDA_VISIBLE_DEVICES": "",
           "CALVER_REWARD_BUDGET_S": "60", "CALVER_REWARD_WORKERS": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    if proc.returncode != 0:  # pytest.fail keeps the whole message (an assert's repr is cut to a line)
        pytest.fail(f"trl grpo exited {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n"
                    f"--- stderr\n{proc.stderr[-8000:]}")
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    logged = [h for h in state["log_history"] if "rewards/verifier_reward/mean" in h]
    assert len(logged) == 2, state["log_history"]
    for h in logged:
        assert 0.0 <= h["rewards/verifier_reward/mean"] <= 1.0
        assert h["rewards/verifier_bit_answer/mean"] in (0.0, 0.5, 1.0)  # two completions per step
        for slot in ("graph", "query", "strategy", "derivation", "result", "answer"):
            assert 0.0 <= h[f"verifier/{slot}"] <= 1.0  # per-bit rates reached TRL through log_metric
        assert h["verifier/unscorable"] == 0.0 and h["verifier/timeouts"] == 0.0  # scored by the workers
