"""The package layering that keeps the label firewall a boundary, checked on the import graph.

(a) importing anything under ``calver.infer`` loads no ``calver.evaluation`` / ``calver.train``;
(b) no module under ``calver/infer`` imports them (lazy imports included) or reads a gold field;
(c) calver's packages (verifier, data_gen, infer, evaluation, train, top-level modules) import one
    another without a cycle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import calver

PKG = Path(calver.__file__).parent
INFER = PKG / "infer"
ABOVE_INFER = ("calver.evaluation", "calver.train")

# What counts as reading a gold field under calver/infer. Each name is where a label lives today:
# - attributes: ``Pool.labels()`` (the label column), ``.correct`` (graded correctness: UnitFacts,
#   graded rows), ``.grading_problem`` (a problem with the hidden source graph reattached),
#   ``.meta`` (Problem.meta holds the generator's validity class and reference answers);
# - string keys (subscript or .get/.pop/.setdefault): the labels column and its fields
#   (``labels``/``label``, ``validity_class``, ``valid_sets``/``valid_answers``, ``source_graph``,
#   ``ground_truth``, ``reference_answer(s)``), graded correctness (``correct``, ``is_correct``,
#   ``correctness``) and anything ``gold*``;
# - the verifier's grader (``grade`` imported or called, ``family.grade``: the task predicate on
#   the source graph G*) and a ``correct=`` keyword (the label-reading best/worst tie rules).
# Names a selector legitimately computes (its own ``answer``, ``validity_class`` *solved* on a
# consensus graph) are not on the list.
GOLD_ATTRS = frozenset({"labels", "correct", "grading_problem", "meta"})
GOLD_KEYS = frozenset({"labels", "label", "validity_class", "valid_sets", "valid_answers", "source_graph",
                       "ground_truth", "reference_answer", "reference_answers", "correct", "is_correct", "correctness"})
GOLD_KEY_PREFIXES = ("gold",)
KEY_METHODS = frozenset({"get", "pop", "setdefault"})
# Files that may touch a name above, and why. A stale entry fails the test too.
EXEMPT = {
    "firewall.py": {"meta"},  # check_view refuses a view whose problem still carries meta
    "pool.py": {"labels"},  # the storage layer writes the label column; only calver.evaluation.grading reads it back
    "sample.py": {"labels"},  # copies the problems file's label column into the pool, unread
}


def _py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, tree: ast.AST) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, at any depth (lazy ones too);
    ``from pkg import name`` yields ``pkg.name`` so a submodule import is seen as such."""
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _gold_reads(tree: ast.AST) -> list[tuple[int, str]]:
    hits = []

    def key_hit(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            k = node.value.lower()
            if k in GOLD_KEYS or k.startswith(GOLD_KEY_PREFIXES):
                return node.value
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in GOLD_ATTRS:
            hits.append((node.lineno, node.attr))
        elif isinstance(node, ast.Subscript) and key_hit(node.slice):
            hits.append((node.lineno, key_hit(node.slice)))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in KEY_METHODS and node.args and key_hit(node.args[0]):
                hits.append((node.lineno, key_hit(node.args[0])))
            if (isinstance(f, ast.Name) and f.id == "grade") or (isinstance(f, ast.Attribute) and f.attr == "grade"):
                hits.append((node.lineno, "grade"))
            hits += [(node.lineno, "correct") for kw in node.keywords if kw.arg == "correct"]
        elif isinstance(node, ast.ImportFrom) and any(a.name == "grade" for a in node.names):
            hits.append((node.lineno, "grade"))
    return hits


def test_importing_infer_loads_no_evaluation_or_train():
    # One fresh interpreter imports every module under calver.infer in turn; after each, anything
    # from calver.evaluation / calver.train that appeared is charged to that module.
    mods = [_module_name(p) for p in _py_files(INFER)]
    code = (
        "import importlib, json, sys\n"
        f"bad = {{}}\nfor m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        f"    hit = sorted(k for k in sys.modules if k.startswith({ABOVE_INFER!r}))\n"
        "    if hit:\n"
        "        bad[m] = hit\n"
        "        break\n"
        "print(json.dumps(bad))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {}
    assert "calver.infer.select" in mods and "calver.infer.refine.refine" in mods  # the walk saw the package


def test_no_infer_module_imports_evaluation_or_train():
    bad = []
    for path in _py_files(INFER):
        for line, name in _imported(path, ast.parse(path.read_text(), str(path))):
            if name.startswith(ABOVE_INFER):
                bad.append(f"{path.relative_to(PKG)}:{line} imports {name}")
    assert bad == []


def test_no_infer_module_reads_a_gold_field():
    bad, used = [], defaultdict(set)
    for path in _py_files(INFER):
        rel = path.relative_to(INFER).as_posix()
        for line, what in _gold_reads(ast.parse(path.read_text(), str(path))):
            if what in EXEMPT.get(rel, ()):
                used[rel].add(what)
            else:
                bad.append(f"infer/{rel}:{line} reads {what!r}")
    assert bad == []
    assert {k: v for k, v in EXEMPT.items()} == dict(used), "an exemption is no longer needed: remove it"


def test_gold_scan_catches_reads():
    # The scan itself must see each kind of read it claims to (else the test above is vacuous).
    src = ("from calver.verifier import grade\n"
           "def f(pool, row, p, u, fam):\n"
           "    pool.labels(); row['correct']; row.get('gold_answer'); u.correct; p.meta\n"
           "    fam.grade(p, 1); select_from_scores([1], 'best', correct=[True])\n")
    found = {w for _, w in _gold_reads(ast.parse(src))}
    assert found == {"grade", "labels", "correct", "gold_answer", "meta"}
    assert _gold_reads(ast.parse("def g(v, fam):\n    v.answer; fam.validity_class(v.g, {})\n")) == []


def test_only_grading_reads_pool_labels():
    callers = []
    for path in _py_files(PKG):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "labels":
                callers.append(path.relative_to(PKG).as_posix())
    assert sorted(set(callers)) == ["evaluation/grading.py"]


# ---- (c) package import graph ------------------------------------------------------------------------
def _node(module: str) -> str | None:
    """The graph node a calver module belongs to: its subpackage, or the top-level module itself."""
    parts = module.split(".")
    if parts[0] != "calver":
        return None
    if len(parts) == 1:
        return "calver"
    if (PKG / parts[1]).is_dir():
        return parts[1]
    return parts[1] if (PKG / f"{parts[1]}.py").exists() else "calver"  # `from calver import __version__`


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in _py_files(PKG):
        src = _node(_module_name(path))
        graph[src]
        for _, name in _imported(path, ast.parse(path.read_text(), str(path))):
            dst = _node(name)
            if dst is not None and dst != src:
                graph[src].add(dst)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_package_import_graph_is_acyclic():
    graph = package_graph()
    assert {"verifier", "data_gen", "infer", "evaluation", "train"} <= set(graph)
    assert "infer" in graph["evaluation"]  # evaluation sits on infer, not the reverse
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


@pytest.mark.parametrize("edges, cyclic", [({"a": {"b"}, "b": {"c"}, "c": set()}, False),
                                           ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True)])
def test_find_cycle(edges, cyclic):
    assert (find_cycle(edges) is not None) == cyclic


def test_the_reward_core_sits_on_the_verifier_only():
    """``calver.reward`` (the torch-free reward every trainer adapter stands on) imports calver.verifier and
    itself, nothing above; train and integrations import it, never the reverse."""
    allowed = ("calver.reward", "calver.verifier")
    bad = [f"{path.relative_to(PKG)}:{line} imports {name}"
           for path in _py_files(PKG / "reward")
           for line, name in _imported(path, ast.parse(path.read_text(), str(path)))
           if name.startswith("calver") and not name.startswith(allowed)]
    assert bad == []
    graph = package_graph()
    assert "reward" in graph["train"] and "reward" in graph["integrations"]
    assert "train" not in graph["integrations"]  # a torch-free adapter no longer climbs into the training package
    code = "import sys, calver.reward, calver.integrations.verl; print(sorted(m for m in sys.modules if m in " \
           "('torch', 'transformers', 'trl') or m.startswith(('calver.train', 'calver.data_gen.cli'))))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr[-2000:]
