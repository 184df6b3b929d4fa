"""The ``cue_first`` trace style (`calver gen --graph_slot cue_first`): child-first arrow lines for the families
whose rule looks up a node's parents, and their lookups written ``Edges into L: L <- K``. Every fact is checked
against networkx; every trace still scores 6, and the readers (lookup checks, the lookup loss's spans, fit-report's
line split) read the child-first items as the same edges."""

from __future__ import annotations

import random
import re

import pytest
from fixtures import random_dag
from testing_utils import DATA_STACK, require_modules

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_answer, canonical_trace, generate
from calver.data_gen.prompts import PARENT_LOOKUP_TASKS, graph_line_order, slot_graph, verbatim_graph
from calver.data_gen.rationales import LOOKUP_RE, check_lookups, listed_edges, rule_rationale
from calver.data_gen.trace_style import TraceStyle
from calver.evaluation.trace_fit import trace_lines
from calver.verifier import score
from calver.verifier.contract import split_slots
from calver.verifier.formats.arrows import render
from calver.verifier.formats.common import RenderOrder
from calver.verifier.parsers import parse_graph

ENCODINGS = ("arrows", "clear", "prose", "json_parents", "matrix")
CUE, CUE_SCAN = TraceStyle("rule", 0, "rule", "cue_first"), TraceStyle("rule", 0, "scan", "cue_first")


def _problems(task, n=30, seed=7):
    cfg = GenConfig(seed=seed, n_nodes=(4, 9), naming=("letters", "identifiers", "phrases"), encoding=ENCODINGS,
                    shuffle_order=0.5)
    return generate(task, n, cfg)


def test_child_first_arrow_text_reads_back_the_same_graph_in_its_order():
    rng = random.Random(3)
    for i in range(30):
        g = random_dag(rng, 3 + i % 7)
        if i % 3 == 0 and len(g.nodes) > 2:
            a, b = sorted(g.nodes)[:2]
            g = g.with_edges(add_bidirected=[(a, b)], kind="ADMG")
        order = RenderOrder(*(tuple(rng.sample(sorted(x), len(x))) for x in (g.nodes, g.directed, g.bidirected)))
        text = render(g, order, child_first=True)
        assert parse_graph(text, "arrows", g.kind) == g
        items = [t for t in text.split(", ") if " <- " in t]
        assert items == [f"{c} <- {a}" for a, c in order.directed]  # child first, in the order given
        assert " -> " not in text
        assert render(g, order) == render(g, order, child_first=False)


@pytest.mark.parametrize("task", ["backdoor_set", "separation_set", "frontdoor_set", "blocking_set",
                                  "cycle_witness", "mediator"])
def test_cue_first_slot_is_child_first_only_where_the_rule_looks_up_parents(task):
    seen = {"child_first": 0, "verbatim": 0, "arrows": 0}
    for p in _problems(task):
        trace = canonical_trace(p, TraceStyle("rule", 0, graph_slot="cue_first"))
        assert score(trace, p).total == 6
        slot = split_slots(trace).values["GRAPH"]
        arrows = canonical_trace(p, TraceStyle("rule", 0))
        assert trace.split("\nQUERY: ", 1)[1] == arrows.split("\nQUERY: ", 1)[1]  # only the GRAPH slot differs
        if p.meta["encoding"] in ("json_parents", "matrix"):
            assert slot == verbatim_graph(p) == slot_graph(p, "cue_first")
            seen["verbatim"] += 1
        elif task in PARENT_LOOKUP_TASKS:
            assert slot == render(p.graph, graph_line_order(p), child_first=True)
            assert parse_graph(slot, "arrows", p.graph.kind) == p.graph
            seen["child_first"] += 1 if p.graph.directed else 0
        else:
            assert trace == arrows
            seen["arrows"] += 1
    assert seen["verbatim"] >= 3
    assert seen["child_first" if task in PARENT_LOOKUP_TASKS else "arrows"] >= 5
    with pytest.raises(ValueError, match="graph_slot"):
        slot_graph(_problems(task, n=1)[0], "child")


@pytest.mark.parametrize("task", ["backdoor_set", "separation_set", "frontdoor_set"])
def test_cue_first_lookups_list_the_node_s_edges_node_first(task):
    """Into-lookups list exactly the node's in-edges (networkx predecessors), each ``L <- K``, in the GRAPH
    line's order; out-of lookups stay ``X -> C``; the lookups read back exact, and the rule rationale is the
    plain one with the items reversed."""
    seen = 0
    for p in _problems(task, n=40):
        obj = canonical_answer(p, "rule")
        plain, cue = rule_rationale(p, obj), rule_rationale(p, obj, cue_first=True)
        if plain is None:
            assert cue is None
            continue
        nxg = p.graph.to_networkx()
        rank = {e: i for i, e in enumerate(graph_line_order(p).directed)}
        for _, kind, node, text in LOOKUP_RE.findall(cue):
            seen += 1
            items = [] if text == "none" else text.split(", ")
            want = sorted(nxg.in_edges(node) if kind == "into" else nxg.out_edges(node), key=rank.__getitem__)
            if kind == "into":
                assert items == [f"{c} <- {a}" for a, c in want]
            else:
                assert items == [f"{a} -> {c}" for a, c in want]
            assert listed_edges(text) == want
        # the plain rationale but for the lookups' items, which name the same edges
        assert LOOKUP_RE.sub("", cue) == LOOKUP_RE.sub("", plain)
        assert [listed_edges(m[3]) for m in LOOKUP_RE.findall(cue)] == \
            [listed_edges(m[3]) for m in LOOKUP_RE.findall(plain)]
        trace = canonical_trace(p, CUE)
        found = check_lookups(trace, p.graph)
        assert found.exact == found.lookups == len(LOOKUP_RE.findall(cue)) and score(trace, p).total == 6
    assert seen >= 10


def test_cue_first_scans_mark_the_edges_as_the_lookup_writes_them():
    seen = 0
    for p in _problems("backdoor_set", n=30):
        trace = canonical_trace(p, CUE_SCAN)
        assert score(trace, p).total == 6
        found = check_lookups(trace, p.graph)
        seen += found.scans
        assert found.complete == found.scans and found.marks_right == found.scanned
        for kind, text in re.findall(r"Scan for edges (into|out of) .+?: (.+?)\.(?= Edges )", trace):
            assert kind == "into" and all(" <- " in item for item in text.split(", ") if item != "none")
    assert seen >= 5


def test_listed_edges_read_both_directions_and_wrong_lookups_are_caught():
    assert listed_edges("L <- K, L <- N") == [("K", "L"), ("N", "L")] == listed_edges("K -> L, N -> L")
    assert listed_edges("none") == []
    p = next(x for x in _problems("backdoor_set") if len(x.graph.parents(x.query["treatment"])) >= 2)
    x = p.query["treatment"]
    parents = sorted(p.graph.parents(x))
    good = f"GRAPH: A\n\nRule: adjust for the parents of {x}. Edges into {x}: " + \
        ", ".join(f"{x} <- {a}" for a in parents) + ".\n\nSTRATEGY: {}"
    assert check_lookups(good, p.graph).exact == 1
    dropped = good.replace(f", {x} <- {parents[-1]}", "")
    reversed_ = good.replace(f"{x} <- {parents[0]}", f"{parents[0]} <- {x}")
    for bad in (dropped, reversed_):
        assert check_lookups(bad, p.graph).exact == 0


def test_the_lookup_loss_spans_and_fit_report_lines_cover_the_child_first_items():
    for p in _problems("separation_set", n=20):
        trace = canonical_trace(p, CUE)
        want = [m.group(4) for m in LOOKUP_RE.finditer(trace)]
        got = [trace[a:b].strip(" .") for name, a, b in trace_lines(trace) if name == "Lookup"]
        assert got == want
        for text in want:
            assert text == "none" or all(" <- " in item for item in text.split(", "))


@require_modules(*DATA_STACK)
def test_gen_writes_cue_first_rows_and_records_the_style(tmp_path):
    import json

    from calver.cli import main

    out = tmp_path / "mix"
    assert main(["gen", "--tasks", "backdoor_set", "frontdoor_set", "--n", "6", "--seed", "3", "--answers", "rule",
                 "--rationale", "rule", "--graph_slot", "cue_first", "--encoding", "arrows", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sft_graph_slot"] == "cue_first"
    rows = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    for row in rows:
        graph = row["messages"][-1]["content"].split("\n", 1)[0]
        if row["task"] == "backdoor_set":
            assert " -> " not in graph and " <- " in graph
        else:
            assert " <- " not in graph
