"""The graph formats are cut by format: each module under calver.verifier.formats holds its parse and
render together, and no module reaches into another's private names (the old cut imported _BARE,
_NUM, _PHRASES, _STOP across files)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.parsers import FORMATS

ROOT = Path(__file__).resolve().parents[1]
FORMAT_FILES = sorted((ROOT / "calver" / "verifier" / "formats").glob("*.py"))
ADMG = CausalGraph.build(["A", "B", "C", "D", "E"], [("A", "B"), ("B", "C")], [("C", "D")], GraphClass.ADMG)


def _private_reaches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    modules = set()  # local names bound to calver modules
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("calver"):
            for a in node.names:
                if a.name.startswith("_"):
                    out.append(f"from {node.module} import {a.name}")
                modules.add(a.asname or a.name)
            if node.module == "calver.verifier.parsers" and path.parent.name == "formats":
                out.append("a format module imports the facade")
        elif isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("calver"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            out.append(f"{node.value.id}.{node.attr}")
    return out


@pytest.mark.parametrize("path", FORMAT_FILES + [ROOT / "calver" / "verifier" / "parsers.py"], ids=lambda p: p.name)
def test_no_module_uses_another_modules_private_names(path):
    assert _private_reaches(path) == []


def test_the_private_name_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from calver.verifier.formats import prose\nfrom calver.verifier.formats.arrows import _BARE\n"
                   "x = prose._STOP\n")
    assert _private_reaches(bad) == ["from calver.verifier.formats.arrows import _BARE", "prose._STOP"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_module_reads_back_what_it_renders(fmt):
    mod = importlib.import_module(f"calver.verifier.formats.{fmt}")
    renders = [mod.render] + ([mod.render_parents] if fmt == "json" else [])
    for render in renders:
        nodes, d, b, _ = mod.parse(render(ADMG))
        assert set(nodes) == set(ADMG.nodes) and set(d) == ADMG.directed
        assert {frozenset(e) for e in b} == {frozenset(e) for e in ADMG.bidirected}


# ---- edge spellings the arrow format does not read are refused, not made into nodes (audit 2026-12-03, L5) ----
@pytest.mark.parametrize("text", ["A o-o B", "A o-> B", "A <-o B", "A <-> B [bidirected]", "A <-> B (bidirected)",
                                  "X -> A, A confounded with B", "X -> A, A and B share a hidden cause",
                                  "A -> B [latent]"])
def test_unread_edge_spellings_are_parse_errors(text):
    from calver.verifier.parsers import ParseError, parse_graph

    with pytest.raises(ParseError):
        parse_graph(text)


def test_names_that_look_like_those_spellings_still_read_when_quoted():
    from calver.verifier.parsers import parse_graph

    g = parse_graph('"o-o" -> B, "A (bidirected)" -> B, "confounded with" -> B')
    assert set(g.nodes) == {"o-o", "A (bidirected)", "confounded with", "B"}
