"""Both sampling backends for real on the tiny model: HF generate in-process, vLLM in a subprocess."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import require_torch

from calver.infer.sampler import (
    Completion,
    HFSampler,
    SamplingConfig,
    child_seed,
    cpu_engine_env,
    make_sampler,
    vllm_available,
)

CHAT = [{"role": "user", "content": "GRAPH: A -> B, B -> C"}]
SAMPLE = SamplingConfig(max_tokens=16, n=3, temperature=0.8)
GREEDY = SamplingConfig(max_tokens=8, temperature=0.0)


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return HFSampler(tiny_model_dir)


@pytest.fixture(scope="module")
def hf_lora(tiny_model_dir, tiny_lora_dir):
    return HFSampler(tiny_model_dir, tiny_lora_dir)


def texts(res):
    return [[c.text for c in r] for r in res]


def test_render_chat_and_plain(hf):
    assert hf.render("GRAPH: A") == "GRAPH: A"
    assert hf.render(CHAT) == "<|im_start|>user\nGRAPH: A -> B, B -> C<|im_end|>\n<|im_start|>assistant\n"
    ids = hf.encode(CHAT)
    assert ids[0] == hf.tokenizer.convert_tokens_to_ids("<|im_start|>")


def test_hf_shapes_and_fields(hf):
    res = hf.generate([CHAT, "GRAPH: A"], SAMPLE, seeds=[1, 2])
    assert len(res) == 2 and all(len(r) == 3 for r in res)
    for c in (c for r in res for c in r):
        assert isinstance(c, Completion) and c.finish_reason in ("stop", "length")
        assert 1 <= c.num_tokens <= 16 and c.num_tokens == len(c.token_ids)
        assert c.mean_logprob is not None and math.isfinite(c.mean_logprob) and c.mean_logprob < 0
        assert c.finish_reason == "stop" or c.num_tokens == 16
    no_lp = hf.generate(["GRAPH"], SamplingConfig(max_tokens=4, logprobs=False))
    assert no_lp[0][0].mean_logprob is None
    assert hf.generate([], SAMPLE) == []
    with pytest.raises(ValueError):
        hf.generate(["a", "b"], SAMPLE, seeds=[1])


def test_hf_seed_reproducibility(hf):
    a = hf.generate([CHAT, "GRAPH: A"], SAMPLE, seeds=[5, 6])
    b = hf.generate([CHAT], SAMPLE, seeds=[5])  # same request alone: batching must not matter
    c = hf.generate([CHAT], SAMPLE, seeds=[7])
    assert texts(a)[0] == texts(b)[0]
    assert [x.mean_logprob for x in a[0]] == pytest.approx([x.mean_logprob for x in b[0]])
    assert texts(a)[0] != texts(c)[0]
    assert len(set(texts(a)[0])) > 1  # the n samples of one request differ
    d = hf.generate([CHAT], SamplingConfig(max_tokens=16, n=3, seed=5))  # default seeds = cfg.seed + i
    assert texts(d)[0] == texts(a)[0]


def test_hf_greedy_and_stop_strings(hf):
    g1 = hf.generate(["GRAPH"], SamplingConfig(max_tokens=24, temperature=0.0), seeds=[1])[0][0]
    g2 = hf.generate(["GRAPH"], SamplingConfig(max_tokens=24, temperature=0.0), seeds=[2])[0][0]
    assert g1.text == g2.text and g1.finish_reason == "length" and g1.num_tokens == 24
    stop = g1.text[len(g1.text) // 2 : len(g1.text) // 2 + 2]
    assert stop.strip("\ufffd")
    s = hf.generate(["GRAPH"], SamplingConfig(max_tokens=24, temperature=0.0, stop=[stop]))[0][0]
    assert s.finish_reason == "stop" and stop not in s.text and g1.text.startswith(s.text)
    assert s.num_tokens < 24


def test_hf_lora_changes_output(hf, hf_lora):
    assert texts(hf.generate([CHAT], GREEDY)) != texts(hf_lora.generate([CHAT], GREEDY))


@require_torch  # builds and samples the tiny model
def test_prompts_longer_than_the_context_get_marked_empty_completions(tmp_path):
    """A prompt that fills the context gets n empty "prompt_too_long" completions (the others are
    sampled as usual, with the same seeds as alone); one that nearly fills it is cut to the room left."""
    from calver.train.tiny_model import build_tiny_model

    smp = HFSampler(build_tiny_model(tmp_path / "m", max_position_embeddings=48, seed=0))
    assert smp.max_context == 48
    short, long_ = "GRAPH: A", "GRAPH: " + " ".join(f"V{i} -> W{i}" for i in range(40))
    n_short = len(smp.encode(short))
    assert len(smp.encode(long_)) > 48
    cfg = SamplingConfig(max_tokens=16, n=2, temperature=0.8)
    both = smp.generate([long_, short], cfg, seeds=[5, 6])
    assert [(c.text, c.finish_reason, c.num_tokens, c.mean_logprob) for c in both[0]] == [
        ("", "prompt_too_long", 0, None)] * 2
    assert texts(both[1:]) == texts(smp.generate([short], cfg, seeds=[6]))
    near = next(t for t in ("GRAPH: " + " ".join(["A"] * i) for i in range(60)) if 38 < len(smp.encode(t)) < 46)
    room = 48 - len(smp.encode(near))
    assert 0 < room < 16
    assert all(c.num_tokens <= room for c in smp.generate([near], cfg, seeds=[1])[0])
    assert smp.completion_budget([0] * n_short, cfg) == 16


def test_child_seed():
    seeds = {child_seed(s, j) for s in range(50) for j in range(8)}
    assert len(seeds) == 400 and all(0 <= x < 2**31 for x in seeds)


def test_make_sampler_hf_and_auto(tiny_model_dir, monkeypatch):
    import calver.infer.sampler as mod

    assert isinstance(make_sampler(tiny_model_dir, backend="hf"), HFSampler)
    monkeypatch.setattr(mod, "vllm_available", lambda: False)
    assert isinstance(mod.make_sampler(tiny_model_dir), HFSampler)
    with pytest.raises(ValueError):
        make_sampler(tiny_model_dir, backend="nope")


# ---------------------------------------------------------------- vLLM (real, in a subprocess)

VLLM_JOBS = [
    {"name": "lora_a", "prompts": [CHAT, "GRAPH: A"], "seeds": [5, 6], "cfg": vars(SAMPLE) | {}, "adapter": True},
    {"name": "lora_b", "prompts": [CHAT], "seeds": [5], "cfg": vars(SAMPLE) | {}, "adapter": True},
    {"name": "lora_c", "prompts": [CHAT], "seeds": [7], "cfg": vars(SAMPLE) | {}, "adapter": True},
    {"name": "lora_greedy", "prompts": [CHAT, "STRATEGY: {"], "cfg": vars(GREEDY) | {}, "adapter": True},
    {"name": "base_greedy", "prompts": [CHAT, "STRATEGY: {"], "cfg": vars(GREEDY) | {}, "adapter": False},
    {"name": "base_a", "prompts": [CHAT, "GRAPH: A"], "seeds": [5, 6], "cfg": vars(SAMPLE) | {}, "adapter": False},
    {"name": "no_logprobs", "prompts": ["GRAPH"], "cfg": {"max_tokens": 4, "logprobs": False}, "adapter": False},
    # many long seeded prompts: more prefill than one scheduler step holds (the CPU worker cannot
    # rewind a seeded generator after a chunked prefill, so the sampler must schedule prompts whole)
    {"name": "long_seeded", "prompts": [f"GRAPH: {i} " + "A -> B, B <-> C, C -> D; " * 25 for i in range(48)],
     "seeds": list(range(48)), "cfg": {"n": 4, "max_tokens": 6, "temperature": 0.8}, "adapter": False},
]


@pytest.fixture(scope="module")
def vllm_run(tiny_model_dir, tiny_lora_dir, tmp_path_factory):
    if not vllm_available():
        pytest.skip("vllm is not importable")
    d = tmp_path_factory.mktemp("vllm")
    spec, out = d / "spec.json", d / "out.json"
    spec.write_text(json.dumps({"jobs": VLLM_JOBS}))
    # INFO: importing trl sets VLLM_LOGGING_LEVEL=ERROR in os.environ, which hides the engine's binding log
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
               VLLM_LOGGING_LEVEL="INFO")
    worker = Path(__file__).with_name("vllm_worker.py")
    proc = subprocess.run(
        [sys.executable, str(worker), str(tiny_model_dir), str(tiny_lora_dir), str(spec), str(out)],
        env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0 and out.exists(), proc.stdout[-4000:] + proc.stderr[-8000:]
    data = json.loads(out.read_text())
    print(f"vLLM init (CPU, LoRA enabled): {data['init_s']:.1f}s")
    return {k: [[Completion(**c) for c in r] for r in v["results"]] for k, v in data["jobs"].items()} | {
        "_init_s": data["init_s"], "_log": proc.stdout + proc.stderr,
        "_bind_env": env.get("VLLM_CPU_OMP_THREADS_BIND"),
    }


CPU_ENGINE_VARS = ("VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND")


@pytest.mark.parametrize(("cpus", "bind"), [({0, 1}, "0,1"), ({3, 5, 4}, "3,4,5"), ({0}, None),
                                            (set(range(8)), None)])
def test_cpu_engine_env_binds_every_core_of_a_small_machine(monkeypatch, cpus, bind):
    for k in CPU_ENGINE_VARS:
        monkeypatch.delenv(k, raising=False)
    applied = cpu_engine_env(cpus)
    assert applied == {"VLLM_CPU_KVCACHE_SPACE": "1"} | ({"VLLM_CPU_OMP_THREADS_BIND": bind} if bind else {})
    assert os.environ.get("VLLM_CPU_OMP_THREADS_BIND") == bind  # None: vLLM's own `auto` stands


def test_cpu_engine_env_keeps_what_the_user_set(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "auto")
    assert cpu_engine_env({0, 1}) == {}
    assert (os.environ["VLLM_CPU_KVCACHE_SPACE"], os.environ["VLLM_CPU_OMP_THREADS_BIND"]) == ("4", "auto")


@pytest.mark.vllm
def test_vllm_engine_binds_the_cores_cpu_engine_env_chose(vllm_run):
    """What vLLM's engine logged as its worker's OpenMP cores is what cpu_engine_env set (or vLLM's auto)."""
    cpus, bind = sorted(os.sched_getaffinity(0)), vllm_run["_bind_env"]
    log = vllm_run["_log"]
    assert "OpenMP thread binding info" in log, log[-3000:]
    if bind is None and 1 < len(cpus) <= 3:
        assert f"local_rank=0, core ids={cpus}" in log, log[-3000:]
    elif bind and bind not in ("auto", "nobind") and "|" not in bind:  # set before the worker started
        want = sorted({c for part in bind.split(",") for c in _id_range(part)})
        assert f"local_rank=0, core ids={want}" in log, log[-3000:]


def _id_range(part: str) -> range:
    lo, _, hi = part.partition("-")
    return range(int(lo), int(hi or lo) + 1)


@pytest.mark.vllm
def test_vllm_runs(vllm_run):
    res = vllm_run["base_a"]
    assert len(res) == 2 and all(len(r) == 3 for r in res)
    for c in (c for r in res for c in r):
        assert c.finish_reason in ("stop", "length") and 1 <= c.num_tokens <= 16
        assert c.mean_logprob is not None and math.isfinite(c.mean_logprob) and c.mean_logprob < 0
    assert vllm_run["no_logprobs"][0][0].mean_logprob is None


@pytest.mark.vllm
def test_vllm_many_long_seeded_prompts(vllm_run):
    res = vllm_run["long_seeded"]
    assert len(res) == 48 and all(len(r) == 4 and all(c.num_tokens >= 1 for c in r) for r in res)


@pytest.mark.vllm
def test_vllm_seed_reproducibility_with_lora(vllm_run):
    a, b, c = (texts(vllm_run[k]) for k in ("lora_a", "lora_b", "lora_c"))
    assert a[0] == b[0] and a[0] != c[0] and len(set(a[0])) > 1
    assert a[1][0] not in a[0]  # consecutive request seeds do not share random streams


@pytest.mark.vllm
def test_vllm_lora_applied(vllm_run):
    assert texts(vllm_run["lora_greedy"]) != texts(vllm_run["base_greedy"])
    assert texts(vllm_run["lora_a"]) != texts(vllm_run["base_a"])


@pytest.mark.vllm
@pytest.mark.parametrize("which", ["base", "lora"])
def test_vllm_greedy_matches_hf(vllm_run, hf, hf_lora, which):
    """Same model, same prompt ids, greedy: both backends pick the same tokens with the same logprobs."""
    ref = (hf if which == "base" else hf_lora).generate([CHAT, "STRATEGY: {"], GREEDY)
    got = vllm_run[f"{which}_greedy"]
    for r_hf, r_vllm in zip(ref, got):
        assert r_hf[0].token_ids == r_vllm[0].token_ids
        assert r_hf[0].mean_logprob == pytest.approx(r_vllm[0].mean_logprob, abs=1e-3)
