"""scripts/gpu_train_check.py dry-runs on CPU with --tiny (the GPU numbers come from the same code)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("peft")
pytestmark = pytest.mark.slow


def test_gpu_train_check_tiny_dry_run(capsys):
    path = Path(__file__).resolve().parents[1] / "scripts/gpu_train_check.py"
    spec = importlib.util.spec_from_file_location("gpu_train_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.QWEN25_05B["hidden_size"] == 896 and mod.QWEN25_05B["vocab_size"] == 151936
    assert mod.main(["--tiny", "--steps", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    for phase in ("sft", "grpo"):
        r = report[phase]
        assert r["steps"] == 1 and r["steps_per_s"] > 0 and r["tokens_per_s"] > 0
        assert any(k.startswith("peak_") for k in r)
    assert 0 < report["params_trainable"] < report["params_total"]
