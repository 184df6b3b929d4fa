"""``calver.infer`` never imports ``calver.train`` (train -> infer is allowed; the reverse made a package cycle).

Two checks: a source scan that also sees lazy imports inside functions, and a fresh interpreter that
imports every module under ``calver.infer`` and lists the ``calver.train`` modules that came along.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

INFER = Path(__file__).resolve().parents[1] / "calver" / "infer"


def _train_imports(path: Path) -> list[str]:
    hits = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        hits += [f"{path.name}:{node.lineno} {n}" for n in names
                 if n == "calver.train" or n.startswith("calver.train.")]
    return hits


def test_no_infer_source_imports_train_even_lazily():
    files = sorted(INFER.rglob("*.py"))
    assert len(files) > 10
    assert [h for f in files for h in _train_imports(f)] == []


def test_the_scan_sees_a_lazy_train_import(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text("def g():\n    from calver import train\n    import calver.train.prm as p\n")
    assert [h.split()[-1] for h in _train_imports(f)] == ["calver.train", "calver.train.prm"]


def test_importing_every_infer_module_loads_no_train_module():
    code = (
        "import importlib, pkgutil, sys\n"
        "import calver.infer as pkg\n"
        "mods = [m.name for m in pkgutil.walk_packages(pkg.__path__, 'calver.infer.')]\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "print(len(mods))\n"
        "print(sorted(m for m in sys.modules if m == 'calver.train' or m.startswith('calver.train.')))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=INFER.parents[1])
    assert res.returncode == 0, res.stderr[-3000:]
    n, loaded = res.stdout.strip().splitlines()[-2:]
    assert int(n) > 10 and loaded == "[]", res.stdout
