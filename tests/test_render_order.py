"""Graphs listed in a given order (RenderOrder, `calver gen` shuffle_order): every format reads the same graph
back, edge lists follow the order, and a generated item's SFT trace copies the graph in its prompt's order."""

from __future__ import annotations

import json
import random
import re

import pytest
from fixtures import edges_as_read, random_dag

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.data_gen.prompts import render_order
from calver.data_gen.trace_style import TraceStyle
from calver.verifier import Problem, get_family, score
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphError
from calver.verifier.parsers import RENDER_FORMATS, parse_graph, reading_order, render_graph


def _shuffled(g: CausalGraph, rng: random.Random) -> RenderOrder:
    return RenderOrder(*(tuple(rng.sample(sorted(x), len(x))) for x in (g.nodes, g.directed, g.bidirected)))


def _admg(rng):
    g = random_dag(rng, 7)
    a, b = sorted(g.nodes)[:2]
    return g.with_edges(add_bidirected=[(b, a)], kind="ADMG")


@pytest.mark.parametrize("fmt", RENDER_FORMATS)
def test_every_format_reads_back_the_graph_in_any_order(fmt):
    rng = random.Random(fmt)
    for i in range(20):
        g = _admg(rng) if i % 3 == 0 else random_dag(rng, 8)
        order = _shuffled(g, rng)
        text = render_graph(g, fmt, order)
        assert parse_graph(text, "json" if fmt == "json_parents" else fmt, g.kind) == g
        assert render_graph(g, fmt, None) == render_graph(g, fmt)  # no order: the default listing
        if fmt in ("arrows", "prose", "clear", "dot", "json"):  # edge lists follow the order
            marks = {"arrows": "{} -> {}", "prose": "{} causes {}.", "clear": "{}->{}", "dot": '"{}" -> "{}"',
                     "json": '["{}", "{}"]'}[fmt]
            at = [text.index(marks.format(a, b)) for a, b in order.directed]
            assert at == sorted(at)
        read = reading_order(g, fmt, order)
        if fmt in ("matrix", "json_parents"):  # row by row, node by node: brute force over the node order
            key = (lambda e: (order.nodes.index(e[0]), order.nodes.index(e[1]))) if fmt == "matrix" else (
                lambda e: (order.nodes.index(e[1]), order.directed.index(e)))
            assert read.directed == tuple(sorted(order.directed, key=key))
        else:
            assert read == order.check(g)
        if fmt in ("matrix", "json_parents", "dot", "graphml", "json"):  # node lists follow it too
            mark = {"matrix": "{}", "json_parents": '"{}": {{', "dot": '"{}";', "graphml": '<node id="{}"/>',
                    "json": '"{}"'}[fmt]
            at = [text.index(mark.format(n)) for n in order.nodes]
            assert at == sorted(at)


def test_an_order_that_is_not_the_graphs_is_refused():
    g = CausalGraph.build(["A", "B", "C"], [("A", "B"), ("B", "C")])
    for bad in (RenderOrder(("A", "B"), (("A", "B"), ("B", "C"))),
                RenderOrder(("A", "B", "C"), (("A", "B"),)),
                RenderOrder(("A", "B", "C"), (("A", "B"), ("B", "C"), ("A", "B"))),
                RenderOrder(("A", "B", "C"), (("A", "B"), ("C", "B")))):
        with pytest.raises(GraphError, match="render order"):
            render_graph(g, "arrows", bad)


def _as_read(p: Problem) -> RenderOrder | None:
    """The order ``p``'s prompt shows its edges in (:func:`fixtures.edges_as_read`), or None for an edge list."""
    read = edges_as_read(p.text.split("\n", 1)[1].split("\n\n", 1)[0], p.meta["encoding"])
    if read is None:
        return None
    return RenderOrder(render_order(p).nodes if render_order(p) else p.graph.nodes, *map(tuple, read))


@pytest.mark.parametrize("shuffle", [0.0, 1.0])
def test_the_graph_line_copies_the_graph_as_the_prompt_lists_it(shuffle):
    """A trace's GRAPH line lists the edges in the order a reader of the prompt meets them: as listed for edge
    lists, row by row for a matrix, node by node for a parents map (whose edge order no shuffle can set)."""
    cfg = GenConfig(seed=11, n_nodes=(4, 9), variants=("any",), shuffle_order=shuffle, naming=("phrases", "letters"),
                    encoding=("matrix", "json_parents", "arrows", "clear", "prose"))
    regrouped = 0
    for task in ("backdoor_set", "blocking_set", "cycle_witness"):
        for p in generate(task, 15, cfg):
            trace = canonical_trace(p, TraceStyle("rule", 0, rationale="scan"))
            read = _as_read(p)
            want = read or render_order(p)
            assert trace.split("\n", 1)[0] == "GRAPH: " + render_graph(p.graph, "arrows", want)
            assert score(trace, p).total == 6
            # a JSON round trip (problems.jsonl, `calver contamination --clean_out`) writes the same row
            assert canonical_trace(Problem.from_dict(p.to_dict()), TraceStyle("rule", 0, rationale="scan")) == trace
            if read is not None:
                regrouped += list(read.directed) != list((render_order(p) or RenderOrder(
                    p.graph.nodes, tuple(sorted(p.graph.directed)))).directed)
    assert regrouped >= 5  # the case the old rows got wrong: edges in an order the prompt does not show


def test_shuffled_prompts_and_traces_that_follow_them():
    base = dict(seed=5, n_nodes=(6, 9), variants=("any",), encoding=("arrows", "clear", "prose", "json_parents"))
    plain = generate("backdoor_set", 12, GenConfig(**base))
    mixed = generate("backdoor_set", 12, GenConfig(**base, shuffle_order=1.0))
    unsorted = 0
    for a, b in zip(plain, mixed):
        assert a.graph == b.graph and a.query == b.query and "render_order" not in a.meta
        order = render_order(b)
        assert order is not None and order.check(b.graph) == order
        unsorted += list(order.directed) != sorted(b.graph.directed)
        trace = canonical_trace(b, TraceStyle("rule", 0, rationale="rule"))
        graph_line = trace.split("\n", 1)[0]
        assert graph_line == "GRAPH: " + render_graph(b.graph, "arrows", _as_read(b) or order)
        assert score(trace, b).total == 6
        listed = re.findall(r"(\w+) -> (\w+)", graph_line)
        into = re.search(r"Edges into \w+: ([^.]*)\.", trace)
        if into and into.group(1) != "none":
            mine = re.findall(r"(\w+) -> (\w+)", into.group(1))
            assert mine == [e for e in listed if e in mine]  # the rationale reads them in GRAPH order
        # the order survives the JSON round trip, and the rows it writes with it
        back = Problem.from_dict(b.to_dict())
        assert render_order(back) == order and canonical_trace(back, TraceStyle("rule", 0, rationale="rule")) == trace
        # a prompt rendered again in another encoding keeps the order
        from calver.data_gen.prompts import user_text

        assert render_graph(b.graph, "prose", order) in user_text(b, "prose")
        fam = get_family(b.task)
        assert fam.rule_object(b) == fam.rule_object(a)
    assert unsorted >= 10
    # the default draws no randomness for it: unchanged problems
    assert [p.to_dict() for p in generate("backdoor_set", 12, GenConfig(**base, shuffle_order=0.0))] == \
        [p.to_dict() for p in plain]


@pytest.mark.parametrize("task", ["backdoor_set", "cycle_witness", "intervention_reachability", "ate_threshold"])
def test_family_canonical_traces_list_the_graph_in_a_given_order(task):
    """TaskFamily.canonical_trace(order=...): the GRAPH slot lists the nodes and edges in that order (each graph
    family: node-set, path, decision, ATE), the trace still scores 6, and without one it is the sorted text."""
    rng = random.Random(7)
    fam = get_family(task)
    for p in generate(task, 4, GenConfig(seed=3, n_nodes=(5, 7))):
        g = fam.source_graph(p) if task == "ate_threshold" else p.graph
        order = _shuffled(g, rng)
        trace = fam.canonical_trace(p, order=order)
        assert trace.split("\n", 1)[0] == "GRAPH: " + render_graph(g, "arrows", order)
        assert trace.split("\n", 1)[1] == fam.canonical_trace(p).split("\n", 1)[1]
        assert fam.canonical_trace(p).split("\n", 1)[0] == "GRAPH: " + g.to_text()
        assert score(trace, p).total == 6


def test_a_json_round_trip_keeps_the_graphs_node_order():
    """``to_dict`` writes the graph as arrow text, which lists nodes as its edges meet them; ``from_dict`` takes
    the order back from ``variables``, so a matrix or parents map rendered after the trip is the prompt's."""
    rng = random.Random(8)
    for i in range(40):
        g = _admg(rng) if i % 4 == 0 else random_dag(rng, 8)
        g = CausalGraph.build(rng.sample(g.nodes, len(g.nodes)), sorted(g.directed), sorted(g.bidirected), g.kind)
        p = Problem(task="backdoor_set", query={"treatment": g.nodes[0], "outcome": g.nodes[1]}, graph=g)
        back = Problem.from_dict(json.loads(json.dumps(p.to_dict())))
        assert back.graph == g and back.graph.nodes == g.nodes and back.graph.kind == g.kind
        for fmt in ("matrix", "json_parents"):
            assert render_graph(back.graph, fmt) == render_graph(g, fmt)
        # variables that are not the graph's nodes declare nothing about its order
        d = p.to_dict()
        d["variables"] = None
        assert set(Problem.from_dict(d).graph.nodes) == set(g.nodes)
    row = {"task": "backdoor_set", "query": {}, "graph": "A -> B, B -> C", "variables": ["C", "A", "B"]}
    moved = Problem.from_dict(row)
    assert moved.graph.nodes == ("C", "A", "B")
    # the ordered graph is the parse cache's: loading a row again builds nothing
    assert Problem.from_dict(dict(row)).graph is moved.graph


def _block(problem: Problem) -> str:
    """The graph as the prompt text shows it: the lines between the header line and the question."""
    return problem.text.split("\n", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("task", ["backdoor_set", "frontdoor_set", "separation_set", "blocking_set",
                                  "cycle_witness", "mediator", "intervention_reachability"])
def test_a_verbatim_graph_slot_copies_a_matrix_or_parents_map_as_the_prompt_shows_it(task):
    """``graph_slot="verbatim"``: where the prompt shows a matrix or JSON parents map, the GRAPH slot is that
    text, character for character (read off the prompt, not rendered again), the trace still scores 6 and
    its other slots are the arrow trace's; for the other encodings it is the arrow trace."""
    cfg = GenConfig(seed=4, n_nodes=(4, 8), naming=("letters", "phrases", "identifiers"), shuffle_order=0.5,
                    encoding=("json_parents", "matrix", "arrows", "clear", "prose"))
    verbatim = 0
    for p in generate(task, 24, cfg):
        arrows = canonical_trace(p, TraceStyle("rule", 0))
        trace = canonical_trace(p, TraceStyle("rule", 0, graph_slot="verbatim"))
        if p.meta["encoding"] in ("json_parents", "matrix"):
            assert trace == f"GRAPH: {_block(p)}\nQUERY: " + arrows.split("\nQUERY: ", 1)[1]
            verbatim += 1
        else:
            assert trace == arrows
        assert score(trace, p).total == 6
        assert canonical_trace(p, TraceStyle("rule", 0, rationale="rule", graph_slot="verbatim")).endswith(
            trace.split("\nSTRATEGY: ", 1)[1])
    assert verbatim >= 4
    with pytest.raises(ValueError, match="graph_slot"):
        TraceStyle(graph_slot="json")


def test_an_ate_trace_writes_a_given_graph_text_as_its_graph_slot():
    """No generator shows an ATE graph as a matrix or parents map, so the ATE family's ``graph_text`` path is
    driven directly: the slot is the text given, and the trace scores 6 from it as from the arrow list."""
    fam = get_family("ate_threshold")
    for p in generate("ate_threshold", 6, GenConfig(seed=3, n_nodes=(4, 7))):
        g = fam.source_graph(p)
        arrows = fam.canonical_trace(p)
        for fmt in ("matrix", "json_parents"):
            text = render_graph(g, fmt)
            trace = fam.canonical_trace(p, graph_text=text)
            assert trace == f"GRAPH: {text}\nQUERY: " + arrows.split("\nQUERY: ", 1)[1]
            assert score(trace, p).total == score(arrows, p).total == 6


def test_gen_graph_slot_verbatim_rows_manifest_and_clean_copy(tmp_path):
    """`calver gen --graph_slot verbatim`: every SFT row's trace copies its prompt's matrix or parents map, the
    manifest records the choice, a contamination --clean_out rewrite keeps the rows; a bad value exits 2."""
    pytest.importorskip("datasets")
    from calver.bench.contamination import write_clean
    from calver.cli import main

    out = tmp_path / "mix"
    assert main(["gen", "--tasks", "backdoor_set", "cycle_witness", "--n", "6", "--seed", "5", "--out", str(out),
                 "--system", "compact", "--answers", "rule", "--encoding", "json_parents", "matrix",
                 "--naming", "phrases", "--graph_slot", "verbatim"]) == 0
    assert json.loads((out / "manifest.json").read_text())["sft_graph_slot"] == "verbatim"
    rows = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    lines = (out / "problems.jsonl").read_text().splitlines()
    problems = {p["id"]: Problem.from_dict(p) for p in map(json.loads, lines)}
    assert len(rows) == 12
    for r in rows:
        block = r["messages"][1]["content"].split("\n", 1)[1].split("\n\n", 1)[0]
        assert r["messages"][2]["content"].startswith(f"GRAPH: {block}\nQUERY: ")
        assert score(r["messages"][2]["content"], problems[r["id"]]).total == 6

    class _NoMatches:
        matches = ()

    write_clean(list(problems.values()), _NoMatches(), out, tmp_path / "clean")
    assert (tmp_path / "clean" / "sft.jsonl").read_text() == (out / "sft.jsonl").read_text()
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--out", str(tmp_path / "x"),
                 "--graph_slot", "json"]) == 2
