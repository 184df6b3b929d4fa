"""calver.data_gen: seeded synthetic problem generators, prompt rendering and dataset export.

Main entry points (imported lazily, so ``import calver.data_gen`` stays cheap):

- ``GenConfig`` (``gen_config``): validated generator configuration (YAML via ``load_config``).
- ``generate(task, n, cfg)`` / ``generate_item(task, idx, cfg)`` / ``GENERATORS`` /
  ``available_tasks()`` (``generators``): index-addressable, seeded problem generators.
- ``canonical_trace(problem, style)``: a six-slot trace scoring 6, written in a ``TraceStyle`` (``trace_style``).
- ``render_prompt(problem)`` (``prompts``): THE chat-prompt renderer (system = contract instructions).
- ``export_dataset(problems, out_dir, cfg)`` / ``to_sft_rows`` / ``to_grpo_rows`` (``export``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GenConfig": "calver.data_gen.gen_config",
    "ConfigError": "calver.data_gen.gen_config",
    "load_config": "calver.data_gen.gen_config",
    "GENERATORS": "calver.data_gen.generators",
    "available_tasks": "calver.data_gen.generators",
    "canonical_trace": "calver.data_gen.generators",
    "generate": "calver.data_gen.generators",
    "generate_item": "calver.data_gen.generators",
    "render_prompt": "calver.data_gen.prompts",
    "TraceStyle": "calver.data_gen.trace_style",
    "export_dataset": "calver.data_gen.export",
    "to_sft_rows": "calver.data_gen.export",
    "to_grpo_rows": "calver.data_gen.export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'calver.data_gen' has no attribute {name!r}")
