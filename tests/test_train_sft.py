"""SFT on the tiny model from the tiny-cpu recipe: LoRA, QLoRA (bitsandbytes CPU backend), full fine-tuning."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/sft/tiny-cpu.yaml"


def _args(model_dir, out, *extra):
    from calver.train.sft_config import load_sft_config

    return load_sft_config(RECIPE, ["--model_name_or_path", str(model_dir), "--output_dir", str(out),
                                    "--generate_n", "6", *extra])


@pytest.fixture(scope="module")
def lora_run(tiny_model_dir, tmp_path_factory):
    from calver.data_gen.export import export_dataset
    from calver.train.common import generate_problems
    from calver.train.sft import run_sft

    tmp = tmp_path_factory.mktemp("sft")
    export_dataset(generate_problems(["backdoor_set"], 6, seed=3, n_nodes=(4, 5)), tmp / "data")  # = `calver gen`
    out = tmp / "lora"
    return run_sft(*_args(tiny_model_dir, out, "--max_steps", "3", "--dataset_path", str(tmp / "data/sft.jsonl"))), out


def test_lora_sft_trains_and_saves_adapter(lora_run):
    from safetensors.torch import load_file

    run, out = lora_run
    s = run.summary
    assert s["mode"] == "lora" and s["steps"] == 3 and len(s["step_times_s"]) == 3
    # resident memory after each step, bounded by the kernel's own peak for this process (ru_maxrss, KiB on Linux)
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert len(s["step_rss_gib"]) == 3 and all(0.05 < r <= peak_gib * 1.001 for r in s["step_rss_gib"])
    assert s["rss_gib_max"] == max(s["step_rss_gib"]) and s["rss_gib_last"] == s["step_rss_gib"][-1]
    assert 0 < s["trainable_params"] < s["total_params"]
    assert json.loads((out / "calver_train_summary.json").read_text())["steps"] == 3
    weights = load_file(out / "adapter_model.safetensors")
    lora_b = {k: v for k, v in weights.items() if "lora_B" in k}
    assert lora_b and {k.split(".")[-3] for k in lora_b} >= {"q_proj", "k_proj", "v_proj", "o_proj"}
    # LoRA B starts at zero: non-zero after training means the adapter's parameters changed
    assert all(float(v.abs().sum()) > 0 for v in lora_b.values())
    assert (out / "tokenizer.json").exists() and (out / "adapter_config.json").exists()


def test_loss_is_masked_to_the_assistant_turn(lora_run):
    run, _ = lora_run
    trainer = run.trainer
    tok = trainer.processing_class
    example = trainer.train_dataset[0]
    batch = trainer.data_collator([example])
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    trained = ids[labels != -100]
    assert 0 < len(trained) < len(ids)
    text = tok.decode(trained)
    full = tok.decode(ids)
    assistant = full.split("<|im_start|>assistant\n", 1)[1]
    assert text == assistant.rstrip("\n")  # the trace + <|im_end|>, nothing of the system/user turns
    assert text.startswith("GRAPH:") and text.endswith("<|im_end|>")
    first = int((labels != -100).nonzero()[0])
    assert "<|im_start|>user" in tok.decode(ids[:first]) and (labels[:first] == -100).all()


def test_adapter_reloads_and_samples_through_the_infer_sampler(lora_run, tiny_model_dir):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from calver.infer.sampler import HFSampler, SamplingConfig

    _, out = lora_run
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, out)
    saved = load_file(out / "adapter_model.safetensors")
    params = dict(model.named_parameters())
    for k, v in saved.items():
        name = next(n for n in params if n.replace(".default", "") == k)
        assert torch.equal(params[name].detach(), v)
    prompt = [{"role": "user", "content": "The causal graph: A -> B\n\nFind a backdoor set for A and B."}]
    with HFSampler(tiny_model_dir, adapter_path=out, device="cpu") as sampler:
        res = sampler.generate([prompt], SamplingConfig(max_tokens=8, n=2, seed=1))
    assert len(res) == 1 and len(res[0]) == 2 and all(c.num_tokens > 0 for c in res[0])


def test_qlora_sft_runs_on_cpu(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb

    from calver.train.sft import run_sft

    out = tmp_path / "qlora"
    run = run_sft(*_args(tiny_model_dir, out, "--max_steps", "1", "--qlora", "true"))
    assert run.summary["mode"] == "qlora" and run.summary["steps"] == 1
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in run.trainer.model.modules())
    assert (out / "adapter_model.safetensors").exists()


def test_full_finetune_of_the_tiny_model(tiny_model_dir, tmp_path):
    from calver.train.sft import run_sft

    out = tmp_path / "full"
    run = run_sft(*_args(tiny_model_dir, out, "--max_steps", "1", "--use_peft", "false", "--full_finetune", "true"))
    assert run.summary["mode"] == "full" and run.summary["trainable_params"] == run.summary["total_params"]
    assert (out / "model.safetensors").exists() and not (out / "adapter_config.json").exists()
