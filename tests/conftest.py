"""Shared fixtures: a tiny random Qwen2 model (built once per session) and a random LoRA adapter."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")


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
