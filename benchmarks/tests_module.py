"""Load a module of ``tests/`` (fixtures, corpora, oracles) by path for a benchmark script.

It is registered in ``sys.modules`` under its own name, so the module's own ``import fuzz_corpus`` /
``from oracles import ...``, forked workers and pickling all see one module; ``sys.path`` is not
changed. Benchmarks run as scripts, so ``from tests_module import tests_module`` finds this file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1] / "tests"


def tests_module(name: str) -> ModuleType:
    """``tests/<name>.py``, loaded once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"no module {name!r} under {TESTS}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
