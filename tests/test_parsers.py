"""Tests for calver.verifier.parsers: every encoding, round trips, CLEAR samples, hostile input."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.parsers import (
    RENDER_FORMATS,
    ParseError,
    graph_cache,
    parse_graph,
    parse_node_list,
    parse_node_set,
    parse_node_sets,
    parse_path,
    render_graph,
)

CLEAR_SAMPLE = Path(__file__).parent / "data" / "clear-sample.jsonl"  # vendored (tests/data/README.md)
DAG, ADMG, DIRECTED = GraphClass.DAG, GraphClass.ADMG, GraphClass.DIRECTED


def G(directed=(), bidirected=(), nodes=(), kind=None) -> CausalGraph:
    return CausalGraph.build(nodes, directed, bidirected, kind)


# ---- each format parses the expected typed graph ---------------------------------------------
EXPECTED_ADMG = G([("A", "B"), ("B", "C")], [("C", "D")], ["A", "B", "C", "D", "E"])

SAME_GRAPH = {
    "arrows": "A -> B -> C, D <-> C; E",
    "arrows_unicode": "A → B\nC ← B\nC ↔ D\nE",
    "arrows_and": "{A --> B and B -> C and C <-> D and E}",
    "arrows_labels": "nodes: A, B, C, D, E\nedges: A -> B, B -> C\nbidirected edges: C <-> D",
    "json_list": '["A->B", "B->C", "C<->D", "E"]',
    "json_obj": '{"nodes": ["A","B","C","D","E"], "edges": [["A","B"],["B","C"]],'
                ' "bidirected": [["C","D"]], "kind": "ADMG"}',
    "json_dicts": '{"nodes": ["E"], "edges": [{"source":"A","target":"B"},'
                  ' {"source":"B","target":"C","type":"directed"},'
                  ' {"source":"C","target":"D","type":"bidirected"}]}',
    "json_parents": '{"A": {"parents": []}, "B": {"parents": ["A"]}, "C": {"parents": ["B"], "spouses": ["D"]},'
                    ' "D": {"parents": [], "bidirected": ["C"]}, "E": []}',
    "json_matrix": '{"nodes": ["A","B","C","D","E"],'
                   ' "matrix": [[0,1,0,0,0],[0,0,1,0,0],[0,0,0,2,0],[0,0,2,0,0],[0,0,0,0,0]]}',
    "python_literal": "{'nodes': ['E'], 'edges': [('A', 'B'), ('B', 'C')], 'bidirected': {('C', 'D')}}",
    "matrix": "  A B C D E\nA 0 1 0 0 0\nB 0 0 1 0 0\nC 0 0 0 2 0\nD 0 0 2 0 0\nE 0 0 0 0 0",
    "matrix_csv": ",A,B,C,D,E\nA,0,1,0,0,0\nB,0,0,1,0,0\nC,0,0,0,2,0\nD,0,0,2,0,0\nE,0,0,0,0,0",
    "matrix_noname_rows": "A\tB\tC\tD\tE\n0\t1\t0\t0\t0\n0\t0\t1\t0\t0\n0\t0\t0\t2\t0\n0\t0\t2\t0\t0\n0\t0\t0\t0\t0",
    "graphml": """<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">
        <key id="d0" for="edge" attr.name="type" attr.type="string"/>
        <graph edgedefault="directed"><node id="A"/><node id="E"/>
        <edge source="A" target="B"/><edge source="B" target="C"/>
        <edge source="C" target="D"><data key="d0">bidirected</data></edge></graph></graphml>""",
    "graphml_undirected_typed": """<graphml><key id="t" for="edge" attr.name="edge_type"/>
        <graph edgedefault="undirected"><node id="E"/>
        <edge source="A" target="B" directed="true"/><edge source="B" target="C" directed="true"/>
        <edge source="C" target="D"><data key="t">confounded</data></edge></graph></graphml>""",
    "dot": 'digraph G { A -> B -> C; C -> D [dir=both]; E; }',
    "dot_rich": '/* header */ strict digraph "g" {\n  rankdir=LR; node [shape=box];\n  // comment\n'
                '  subgraph cluster0 { A; B }\n  A -> B\n  "B" -> "C" [color=red];\n'
                '  # hash comment\n  D -> C [style=dashed, dir=both]\n  E [label="e"]\n}',
    "dot_arrowtail": "digraph { A -> B; B -> C; C -> D [arrowtail=normal]; E }",
    "dot_back_and_lr": "digraph { B -> A [dir=back]; B -> C; C <-> D; E }",
    "clear": "Given an ADMG (acyclic directed mixed graph) with nodes A, B, C, D, E, directed edges A->B, B->C "
             "and bi-directed edges C<->D.",
    "prose": "The variables are A, B, C, D and E. A causes B. B has a direct effect on C. "
             "C and D share a hidden common cause.",
    "prose_varied": "In this study A affects B, which influences C. C is confounded with D. "
                    "E is measured but unrelated.",
}


@pytest.mark.parametrize("name", sorted(SAME_GRAPH))
def test_formats_parse_expected_graph(name):
    nodes = ["A", "B", "C", "D", "E"] if name == "prose_varied" else None
    g = parse_graph(SAME_GRAPH[name], nodes=nodes)
    assert g == EXPECTED_ADMG, (name, g)
    assert g.kind is ADMG


@pytest.mark.parametrize(
    "text,fmt,directed,bidirected",
    [
        ("X1 -> blood_pressure, blood_pressure <- Smoking", "arrows",
         {("X1", "blood_pressure"), ("Smoking", "blood_pressure")}, set()),
        ('"Blood pressure" -> Stroke; heart rate -> Stroke', "arrows",
         {("Blood pressure", "Stroke"), ("heart rate", "Stroke")}, set()),
        ("[A -> B, B -> C]", None, {("A", "B"), ("B", "C")}, set()),
        ('[["A","B"],["B","C"]]', None, {("A", "B"), ("B", "C")}, set()),
        ('{"B": ["A"], "C": "B"}', None, {("A", "B"), ("B", "C")}, set()),
        ("Smoking causes cancer and heart_disease.", None,
         {("Smoking", "cancer"), ("Smoking", "heart_disease")}, set()),
        ("B is caused by A. There is an edge from B to C. X and Y are confounded.", None,
         {("A", "B"), ("B", "C")}, {("X", "Y")}),
        ("A is a direct cause of B and C causes D. A leads to D.", None, {("A", "B"), ("C", "D"), ("A", "D")}, set()),
        ("A does not cause B. A causes C. It is raining.", None, {("A", "C")}, set()),
        ("There is a hidden confounder between X and Y. Z influences X.", "prose", {("Z", "X")}, {("X", "Y")}),
        ('digraph { A -> {B C}; {B C} -> D }', None, {("A", "B"), ("A", "C"), ("B", "D"), ("C", "D")}, set()),
        ("digraph { A -> B [dir=both, arrowtail=normal] }", "dot", set(), {("A", "B")}),
        ("0 1\n0 0", "matrix", {("P", "Q")}, set()),
    ],
)
def test_specific_parses(text, fmt, directed, bidirected):
    nodes = ["P", "Q"] if text.startswith("0 1") else None
    g = parse_graph(text, fmt=fmt, nodes=nodes)
    assert set(g.directed) == directed
    assert set(g.bidirected) == {tuple(sorted(e)) for e in bidirected}


def test_kind_declared_inferred_and_overridden():
    assert parse_graph("A -> B").kind is DAG
    assert parse_graph("A -> B -> A").kind is DIRECTED
    assert parse_graph("A -> B", kind="ADMG").kind is ADMG
    assert parse_graph("ADMG: A -> B").kind is ADMG
    assert parse_graph('{"kind": "directed", "edges": [["A","B"]]}').kind is DIRECTED
    clear = "Given a directed graph with nodes A, B and directed edges A->B, B->A."
    assert parse_graph(clear).kind is DIRECTED
    assert parse_graph("Given an ADMG (acyclic directed mixed graph) with nodes A, B, "
                       "directed edges A->B.").kind is ADMG


def test_declared_nodes_add_isolated_and_restrict():
    g = parse_graph("A -> B", nodes=["C", "A", "B"])
    assert g.nodes == ("C", "A", "B") and g.directed == {("A", "B")}
    with pytest.raises(GraphError, match="'Z'"):
        parse_graph("A -> Z", nodes=["A", "B"])
    prose = "Blood pressure causes stroke risk. The weather causes mood."
    g = parse_graph(prose, fmt="prose", nodes=["Blood pressure", "stroke risk"])
    assert g.directed == {("Blood pressure", "stroke risk")}


def test_clear_variants():
    head = "Given a DAG (directed acyclic graph) with nodes "
    assert parse_graph(head + "A, B and C.").directed == frozenset()
    assert len(parse_graph(head + "A, B and no edges.").nodes) == 2
    g = parse_graph(head + "A, B and C and directed edges A->B, B->C")
    assert g.nodes == ("A", "B", "C") and len(g.directed) == 2
    g = parse_graph("Given an ADMG (acyclic directed mixed graph) with nodes A, B, C "
                    "and bi-directed edges A<->B, B<->C.")
    assert g.kind is ADMG and len(g.bidirected) == 2 and not g.directed
    g = parse_graph("Given an ADMG (acyclic directed mixed graph) with nodes A, B, "
                    "directed edges A->B and no bi-directed edges.")
    assert g.kind is ADMG and g.directed == {("A", "B")}
    g = parse_graph(head + "A, B and directed edges A->B. Find one path from A to B.")
    assert g.directed == {("A", "B")}
    with pytest.raises(GraphError, match="'C'"):
        parse_graph(head + "A, B and directed edges A->C.")
    with pytest.raises(GraphError, match="A<->B"):
        parse_graph(head + "A, B and directed edges A<->B.")
    with pytest.raises(GraphError, match="bidirected"):
        parse_graph(head + "A, B, directed edges A->B and bi-directed edges A<->B.")


def _clear_rows():
    return [json.loads(line) for line in CLEAR_SAMPLE.read_text().splitlines() if line.strip()]


def test_all_clear_samples_match_independent_regex_count():
    rows = _clear_rows()
    assert len(rows) == 24
    for row in rows:
        desc = row["description"]
        g = parse_graph(desc)
        node_text = re.search(r"with nodes (.*?)(?:,| and) directed edges", desc).group(1)
        assert list(g.nodes) == [n.strip() for n in node_text.split(",")]
        assert len(g.directed) == len(re.findall(r"\w+->\w+", desc))
        assert len(g.bidirected) == len(re.findall(r"\w+<->\w+", desc))
        expected_kind = {"DAG": DAG, "ADMG": ADMG}.get(row["graph_type"], DIRECTED)
        assert g.kind is expected_kind, (row["graph_type"], desc)
        assert parse_graph(render_graph(g, "clear")) == g
        if row["task_type"] == "cycle":
            path = parse_node_list(row["answer"])
            assert all((a, b) in g.directed for a, b in zip(path, path[1:]))
        if row["task_type"] in ("backdoor_path", "path"):
            answers = row["answer"] if isinstance(row["answer"], list) else [row["answer"]]
            for answer in answers:
                path, types = parse_path(answer)
                for (a, b), t in zip(zip(path, path[1:]), types):
                    assert g.has_edge(a, b, t), (answer, desc)
        if row["task_type"] in ("backdoor_adjustment_set", "d-separation", "frontdoor_adjustment_set", "blocked_path"):
            assert all(s <= set(g.nodes) for s in parse_node_sets(row["answer"]))


# ---- round trips -----------------------------------------------------------------------------
NAMES = ["A", "B", "C", "X1", "Smoking", "blood_pressure", "Z", "I", "Blood pressure", "and", "y2", "Ω"]


@st.composite
def graphs(draw, kind=None):
    kind = kind or draw(st.sampled_from([DAG, ADMG, DIRECTED]))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=8, unique=True))
    n = len(names)
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    picked = draw(st.lists(st.sampled_from(pairs), max_size=12, unique=True)) if pairs else []
    directed = [(names[i], names[j]) for i, j in picked if kind is DIRECTED or i < j]
    bidirected = []
    if kind is ADMG and n > 1:
        bidirected = [(names[i], names[j]) for i, j in draw(st.lists(st.sampled_from(pairs), max_size=5))]
    return CausalGraph.build(names, directed, bidirected, kind)


KIND_FREE = {"arrows", "json_parents", "matrix", "dot", "prose"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_round_trip_every_format(g):
    for fmt in RENDER_FORMATS:
        text = render_graph(g, fmt)
        back = parse_graph(text, kind=g.kind if fmt in KIND_FREE else None)
        assert back == g, (fmt, text, back)
        assert back.kind is g.kind, (fmt, text)
        assert set(back.nodes) == set(g.nodes)
        assert parse_graph(text, fmt="clear" if fmt == "clear" else fmt if fmt != "json_parents" else "json",
                           kind=g.kind) == g


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_networkx_cross_checks(g):
    parsed = nx.parse_graphml(render_graph(g, "graphml"))
    nx_directed = {(a, b) for a, b, t in parsed.edges(data="type") if t == "directed"}
    nx_bi = {tuple(sorted((a, b))) for a, b, t in parsed.edges(data="type") if t == "bidirected"}
    assert nx_directed == set(g.directed) and nx_bi == set(g.bidirected)
    assert set(parsed.nodes) == set(g.nodes)
    # matrix: the directed bit pattern of our text equals networkx's reading of the same array
    rows = render_graph(g, "matrix").split("\n")[1:]
    arr = np.array([[int(v) for v in r.rsplit(" ", len(g.nodes))[1:]] for r in rows])
    from_np = nx.from_numpy_array(arr & 1, create_using=nx.DiGraph)
    assert {(g.nodes[i], g.nodes[j]) for i, j in from_np.edges} == set(g.directed)
    # and a networkx adjacency array written as a header+rows matrix parses back to g's directed part
    dg = g.to_networkx()
    a = nx.to_numpy_array(dg, nodelist=list(g.nodes), dtype=int)
    text = "\n".join(["\t".join(_q(n) for n in g.nodes)] + ["\t".join(map(str, r)) for r in a])
    assert parse_graph(text, fmt="matrix").directed == g.directed


def _q(n):
    return f'"{n}"' if " " in n else n


# ---- class violations and malformed input ----------------------------------------------------
def test_declared_dag_cycle_reported():
    with pytest.raises(GraphError, match="declared DAG has a directed cycle: .*->"):
        parse_graph("Given a DAG (directed acyclic graph) with nodes A, B, C and directed edges A->B, B->C, C->A.")
    with pytest.raises(GraphError, match="cycle"):
        parse_graph("A -> B -> A", kind="DAG")
    with pytest.raises(GraphError, match="DAG cannot hold bidirected"):
        parse_graph("A <-> B", kind=DAG)
    with pytest.raises(GraphError, match="ADMG has a directed cycle"):
        parse_graph('{"kind": "ADMG", "edges": ["A->B", "B->A"]}')


@pytest.mark.parametrize(
    "text,fmt,token",
    [
        ("A ->> B", None, "'->>' at line 1 col 3"),
        ("A -> -> B", None, "'->' at line 1 col 6"),
        ("A -> B,\nC ->", None, "'->' at line 2 col 3"),
        ("A - B", "arrows", "'-'"),
        ("A -> B $ C", None, "'$'"),
        ("A -> B\n\"C -> D", None, "'\"'"),
        ('{"edges": [["A", "B"]', None, "JSON"),
        ('{"edges": [["A", 5.5]]}', None, "5.5"),
        ('{"edges": [["A", "B", "sideways"]]}', None, "sideways"),
        ('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><graphml/>', None, "DOCTYPE"),
        ("<graphml><graph><node id='A'/></grap></graphml>", None, "GraphML"),
        ("<graphml><graph edgedefault='undirected'><edge source='A' target='B'/></graph></graphml>", None,
         "undirected"),
        ("digraph { A -> ; }", None, "';'"),
        ("digraph { A -> B } extra", None, "'extra'"),
        ("graph { A -- B }", None, "undirected DOT edge A -- B"),
        ("digraph { A -> B /* open", None, "'/'"),
        ("A B\nA 0 5\nB 0 0", None, "'5'"),
        ("A B\nA 0 2\nB 0 0", None, "not mirrored"),
        ("A B\nA 0 1\nB 0", None, "'B' at line 3"),
        ("A B\nA 0 1", None, "line 2 has 3 cells"),
        ("Given a DAG with nodes A, B and directed edges A->>B.", None, "'->>'"),
        ("", None, "empty"),
        ("   \n  ", "arrows", "empty"),
        ("[]", None, "no nodes"),
        ("A -> B", "yaml", "unknown graph format"),
        ("this is just some filler", "prose", "no causal relation"),
    ],
)
def test_malformed_names_token(text, fmt, token):
    with pytest.raises(GraphError) as info:
        parse_graph(text, fmt=fmt)
    assert token in str(info.value)


def test_lookalikes_and_bytes():
    g = parse_graph("А -> B")  # Cyrillic А is its own node
    assert "А" in g and "A" not in g
    assert parse_graph(b"A -> B").directed == {("A", "B")}
    with pytest.raises(ParseError):
        parse_graph(b"\xff\xfe -> B")
    with pytest.raises(GraphError):
        parse_graph(None)  # type: ignore[arg-type]


def test_cache_shares_results():
    graph_cache.memo.clear()
    a = parse_graph("Q -> R, R -> S")
    b = parse_graph("Q -> R, R -> S")
    assert a is b and len(graph_cache.memo) == 1


# ---- fuzzing ---------------------------------------------------------------------------------
ALPHABET = st.sampled_from(list("AB XYZ_1,;.:\n-<>=→↔{}[]()\"'/*#") + ["->", "<->", "digraph {",
                                                                       "Given a DAG with nodes ", "causes", " and ",
                                                                       "<graphml>", "0 1", "А"])


def _only_graph_error(text, fmt=None) -> float:
    """Parse, letting every exception but GraphError escape; the CPU seconds it took."""
    start = time.thread_time()
    try:
        parse_graph(text, fmt=fmt)
    except GraphError:
        pass
    return time.thread_time() - start


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(ALPHABET, max_size=60).map("".join)),
       st.sampled_from([None, "arrows", "json", "matrix", "graphml", "dot", "prose", "clear"]))
def test_fuzz_text_only_graph_error(text, fmt):
    graph_cache.memo.clear()
    _only_graph_error(text, fmt)  # the 50 ms per-call bound is checked by benchmarks/latency_bench.py


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_bytes(data):
    _only_graph_error(data)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=100))
def test_fuzz_node_set_and_path(text):
    for fn in (parse_node_set, parse_node_sets, parse_path):
        try:
            fn(text)
        except GraphError:
            pass


JSONISH = st.recursive(
    (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
     | st.sampled_from(["A", "B", "A->B", "", "ADMG", "<->"])),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["nodes", "edges", "bidirected", "kind", "matrix", "parents", "spouses", "source", "target",
                         "type", "A", "B"]), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(JSONISH)
def test_fuzz_json_structures(value):
    text = json.dumps(value)
    try:
        g = parse_graph(text, fmt="json")
    except GraphError:
        return
    assert isinstance(g, CausalGraph) and len(g.nodes) >= 1


MB = 1_000_000


@pytest.mark.parametrize(
    "text",
    [
        "A -> " * (MB // 5) + "B",
        "x" * MB,
        " " * MB + "A",
        "{" * MB,
        "[" * (MB // 2) + "]" * (MB // 2),
        "/*" * (MB // 2),
        "digraph { " + "a -> " * (MB // 5) + "b }",
        "Given a DAG (directed acyclic graph) with nodes " + ", " * (MB // 2),
        "A causes B and " * (MB // 15),
        "0 1 " * (MB // 4),
        "<graphml>" + "<node id='a'/>" * (MB // 14),
        '"' + "a" * MB,
        "\x00\xff" * (MB // 2),
        "а" * MB + "->",
    ],
    ids=lambda t: repr(t[:12]),
)
def test_one_megabyte_inputs(text):
    assert _only_graph_error(text) < 5.0  # a hang guard (calls take milliseconds), not a speed test


# ---- node sets and paths ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,expected",
    [
        ("{A, B}", {"A", "B"}), ("[A, B]", {"A", "B"}), ("{'P', 'X', 'Q'}", {"P", "X", "Q"}),
        ("set()", set()), ("∅", set()), ("{}", set()), ("none", set()), ("None", set()),
        ("A, B", {"A", "B"}), ("A and B", {"A", "B"}), ('{"X1", "blood pressure"}', {"X1", "blood pressure"}),
        ("frozenset({'A'})", {"A"}), ("set(['A', 'B'])", {"A", "B"}), ("{A}.", {"A"}), ("Z", {"Z"}),
    ],
)
def test_parse_node_set(text, expected):
    assert parse_node_set(text) == frozenset(expected)


@pytest.mark.parametrize("text", ["{A, {B}}", "{A -> B}", "[{'J', 'N', 'A'}]", "{A, B$}", "'unterminated", "", "  "])
def test_parse_node_set_rejects(text):
    with pytest.raises(ParseError):
        parse_node_set(text)


def test_parse_node_sets():
    assert parse_node_sets("[set(), {'A'}, {'P', 'A'}]") == [frozenset(), frozenset({"A"}), frozenset({"A", "P"})]
    assert parse_node_sets("[{'J', 'N', 'A'}]") == [frozenset({"J", "N", "A"})]
    assert parse_node_sets("{A, B}") == [frozenset({"A", "B"})]
    with pytest.raises(ParseError):
        parse_node_sets("[{A}, oops]")


@pytest.mark.parametrize(
    "text,nodes,types",
    [
        ("X -> M -> Y", ["X", "M", "Y"], ["->", "->"]),
        ("X <- C -> Y", ["X", "C", "Y"], ["<-", "->"]),
        ("X <-> Z -> Y", ["X", "Z", "Y"], ["<->", "->"]),
        ("V<->R<->U->H<->Z", ["V", "R", "U", "H", "Z"], ["<->", "<->", "->", "<->"]),
        ("'M->V->M'", ["M", "V", "M"], ["->", "->"]),
        ("[X, M, Y]", ["X", "M", "Y"], None),
        ("X, M, Y", ["X", "M", "Y"], None),
        ("X → M ← Y", ["X", "M", "Y"], ["->", "<-"]),
    ],
)
def test_parse_path(text, nodes, types):
    assert parse_path(text) == (nodes, types)
    assert parse_node_list(text) == nodes


@pytest.mark.parametrize("text", ["X -> ", "-> Y", "X -> M, Y", "X ->> Y", "", "[X, (M)]"])
def test_parse_path_rejects(text):
    with pytest.raises(ParseError):
        parse_path(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_canonical_arrow_fast_path_agrees_with_general_lexer(seed):
    import random as _random

    from calver.verifier.formats import arrows as P

    rng = _random.Random(seed)
    n = rng.randint(1, 9)
    names = [rng.choice(["A", "B", "X1", "node_", "Zz", "q", "M2", "W", "V_3"]) + str(i) for i in range(n)]
    items = []
    for _ in range(rng.randint(0, 12)):
        a, c = rng.choice(names), rng.choice(names)
        items.append(f"{a}{rng.choice([' ', '', '  '])}{rng.choice(['->', '<-', '<->'])}{rng.choice([' ', ''])}{c}")
    items += rng.sample(names, rng.randint(0, n))
    text = rng.choice([", ", ",", "; ", "\n"]).join(items) or names[0]
    fast = P.parse_fast(text)
    assert fast is not None
    slow = P.parse(text)
    assert set(fast[0]) == set(slow[0]) and sorted(fast[1]) == sorted(slow[1])
    assert sorted(tuple(sorted(e)) for e in fast[2]) == sorted(tuple(sorted(e)) for e in slow[2])
