"""Lookup drills over the GRAPH line a trace writes (``DrillConfig.lookup_encodings``): a parents map or matrix
copied as shown, as a verbatim GRAPH slot writes it. The line reads back to the drill's graph, the lookup lists
the node's edges as networkx finds them, in the order the line shows them, and it is the very line a rule
rationale writes in a trace over the same GRAPH slot."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from testing_utils import require_modules

from calver.cli import main as cli_main
from calver.data_gen.drills import DrillConfig, LookupDrill, drills
from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.data_gen.prompts import graph_line_order
from calver.data_gen.rationales import listed_edges
from calver.data_gen.trace_style import TraceStyle
from calver.evaluation.drill_report import DrillReportConfig, asked_drills
from calver.verifier.parsers import parse_graph

LINES = ("arrows", "json_parents", "matrix")
CFGS = [DrillConfig(n=80, seed=s, lookup=style, lookup_encodings=LINES, namings=(naming,), min_nodes=2,
                    max_nodes=10)
        for s, (style, naming) in enumerate([("rule", "letters"), ("scan", "identifiers"), ("rule", "phrases")])]


def _oracle(d: LookupDrill) -> set[tuple[str, str]]:
    g = nx.DiGraph(list(d.graph.directed))
    g.add_nodes_from(d.graph.nodes)
    return set(g.in_edges(d.node) if d.kind == "into" else g.out_edges(d.node))


@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: f"{c.lookup}-{c.namings[0]}")
def test_lookup_over_each_graph_line_agrees_with_networkx(cfg):
    plain = drills(DrillConfig(**{**cfg.__dict__, "lookup_encodings": ("arrows",)}))
    seen = set()
    for d, p in zip(drills(cfg), plain):
        assert isinstance(d, LookupDrill) and isinstance(p, LookupDrill)
        # the GRAPH line is drawn last: the graph, its order and the question are the arrow drill's
        assert (d.graph, d.order, d.kind, d.node) == (p.graph, p.order, p.kind, p.node)
        seen.add(d.encoding)
        text = d.graph_line.removeprefix("GRAPH: ")
        assert parse_graph(text, {"json_parents": "json"}.get(d.encoding, d.encoding), kind=d.graph.kind) == d.graph
        lookup = d.answer.rsplit(f"Edges {d.kind} ", 1)[1].split(": ", 1)[1].removesuffix(".")
        listed = listed_edges(lookup)
        assert set(listed) == _oracle(d)
        assert d.solved(d.answer) and d.check(d.answer).lookup.exact == 1
        if d.encoding == "json_parents":  # listed as the map shows them: child by child, each child's parents
            shown = [(par, child) for child, v in json.loads(text).items() for par in v["parents"]]
            assert listed == [e for e in shown if e in _oracle(d)]
        if d.encoding == "arrows":
            assert d.row() == p.row()  # byte for byte what the drills were before lookups had a GRAPH line form
    assert seen == set(LINES)


@pytest.mark.parametrize("encoding", ["json_parents", "matrix"])
def test_a_drill_is_the_lookup_a_trace_writes_over_the_same_graph_slot(encoding):
    cfg = GenConfig(seed=3, n_nodes=(4, 9), encoding=(encoding,), naming=("letters", "phrases"), variants=("any",))
    style = TraceStyle(answers="rule", witnesses=0, rationale="rule", graph_slot="verbatim", system="compact")
    checked = 0
    for problem in generate("backdoor_set", 12, cfg):
        trace = canonical_trace(problem, style)
        t = problem.query["treatment"]
        d = LookupDrill("x", problem.graph, graph_line_order(problem), "into", t, scan=False, encoding=encoding)
        assert trace.split("\nQUERY:", 1)[0] == d.graph_line  # the trace's GRAPH line is the drill's
        if f"Edges into {t}:" in trace:  # the parents rule (where it gives no valid set, no lookup is written)
            assert d.answer in trace  # its lookup of the treatment's parents is the drill's answer
            checked += 1
    assert checked == 12  # variant any: the parents rule holds on every one of these


@require_modules("datasets")
def test_gen_and_drill_report_take_the_graph_lines(tmp_path, capsys):
    out = tmp_path / "d"
    assert cli_main(["gen", "--n", "0", "--seed", "2", "--drills", "30", "--drill_lookup", "rule",
                     "--drill_lookup_encodings", "json_parents", "matrix", "--out", str(out)]) == 0
    rows = [json.loads(r) for r in (out / "sft.jsonl").read_text().splitlines()]
    want = drills(DrillConfig(n=30, seed=2, min_nodes=5, max_nodes=8, namings=("letters",), lookup="rule",
                              lookup_encodings=("json_parents", "matrix")))
    assert [r["messages"] for r in rows] == [d.row()["messages"] for d in want]
    assert not any(r["messages"][1]["content"].startswith("GRAPH: ") and " -> " in r["messages"][1]["content"]
                   for r in rows)  # no arrow list: each line is a parents map or a matrix
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["drill_config"]["lookup_encodings"] == ["json_parents", "matrix"]
    records = [json.loads(r) for r in (out / "drills.jsonl").read_text().splitlines()]
    assert {r["encoding"] for r in records} == {"json_parents", "matrix"}
    asked = asked_drills(DrillReportConfig(model="m", n=10, seed=4, lookup="rule", lookup_encodings=["matrix"]))
    assert {d.encoding for d in asked.items} == {"matrix"}
    # a GRAPH slot never writes prose or CLEAR's sentence: refused before anything is written
    assert cli_main(["gen", "--n", "0", "--seed", "2", "--drills", "3", "--drill_lookup_encodings", "prose",
                     "--out", str(tmp_path / "bad")]) == 2
    assert "lookup_encodings must be a non-empty subset" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
