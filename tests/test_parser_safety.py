"""Parser safety (issue 12, audit B3/B4/C1): bounded memory on list-times-list prose, linear time on
hostile text for every verifier-facing string parser, and exact render -> parse round trips for
exotic node names (or a clear GraphError where a format cannot express a name)."""

from __future__ import annotations

import json
import re
import time
import tracemalloc
from itertools import combinations, product

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.verifier import CausalGraph, GraphClass, GraphError, Problem, ProblemError, parse_graph, render_graph, score
from calver.verifier.formats.prose import parse as _parse_prose
from calver.verifier.parsers import (
    RENDER_FORMATS,
    ParseError,
    graph_cache,
    parse_node_list,
    parse_node_set,
    parse_node_sets,
    parse_path,
)
from calver.verifier.scm import parse_cpt_text
from calver.verifier.tasks.ate import parse_number
from calver.verifier.tasks.base import parse_result_bool

BACKDOOR = {"task": "backdoor_set", "graph": "W -> Z, Z -> X, Z -> Y, X -> M, M -> Y, X -> Y", "graph_class": "DAG",
            "query": {"treatment": "X", "outcome": "Y", "variant": "any"}}
BACKDOOR_TAIL = ("QUERY: task=backdoor_set; treatment=X; outcome=Y; variant=any; graph=DAG\nSTRATEGY: {Z}\n"
                 "DERIVATION: backdoor_check(treatment=X, outcome=Y, adjustment={Z}, blocked=[X <- Z -> Y])\n"
                 "RESULT: valid\nANSWER: {Z}\n")
_CPTS = ["P(A=1) = 0.33", "P(B=1 | A=0) = 0.63", "P(B=1 | A=1) = 0.23", "P(C=1) = 0.55", "P(D=1 | A=0, B=0) = 0.45",
         "P(D=1 | A=0, B=1) = 0.52", "P(D=1 | A=1, B=0) = 0.11", "P(D=1 | A=1, B=1) = 0.88", "P(X=1 | D=0) = 0.87",
         "P(X=1 | D=1) = 0.13", "P(Y=1 | D=0, X=0) = 0.81", "P(Y=1 | D=0, X=1) = 0.69", "P(Y=1 | D=1, X=0) = 0.76",
         "P(Y=1 | D=1, X=1) = 0.61"]
ATE = {"task": "ate_threshold", "query": {"treatment": "X", "outcome": "Y", "threshold": -0.03},
       "graph": "A -> B, A -> D, B -> D, D -> X, D -> Y, X -> Y, C", "graph_class": "DAG", "mode": "supplied",
       "data": {"cpts": _CPTS, "epsilon": 0.01}}
ATE_HEAD = ("GRAPH: A -> B, A -> D, B -> D, D -> X, D -> Y, X -> Y, C\n"
            "QUERY: task=ate_threshold; treatment=X; outcome=Y; threshold=-0.03; graph=DAG\nSTRATEGY: {D}\n"
            "DERIVATION: backdoor_adjust(treatment=X, outcome=Y, adjustment={D}, p1=0.655937, p0=0.788710, "
            "effect=-0.132774)\n")


def _names(prefix: str, k: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(k))


# ---- B3: list-times-list prose ------------------------------------------------------------------
@pytest.mark.parametrize("shape,k", [("fwd", 400), ("fwd", 8000), ("rev", 2000), ("bi", 400), ("bi", 8000),
                                     ("biw", 2000)])
def test_prose_relation_over_max_edges_fails_closed_in_small_memory(shape, k):
    subs, objs = _names("a", k), _names("b", k)
    text = {"fwd": f"{subs} causes {objs} and bz.", "rev": f"{subs} are caused by {objs} and bz.",
            "bi": f"{subs} share a hidden common cause.", "biw": f"{subs} are confounded with {objs} and bz."}[shape]
    tracemalloc.start()
    try:
        with pytest.raises(ParseError, match="too many edges"):
            parse_graph(text, "prose")
        with pytest.raises(GraphError):  # auto-detect: prose fails, the bare-list fallback is too large or refused
            parse_graph(text if k > 1000 else text.replace(" and bz", ", bz, x y z w"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50e6, f"peak {peak / 1e6:.0f} MB"


def test_prose_relations_under_the_cap_are_still_the_full_product():
    # oracle: brute-force product / pairs over the two lists
    g = parse_graph("a1, a2 and a3 cause b1 and b2. c1, c2, c3 and c4 share a hidden common cause.", "prose")
    want_d = set(product(["a1", "a2", "a3"], ["b1", "b2"]))
    want_b = {tuple(sorted(p)) for p in combinations(["c1", "c2", "c3", "c4"], 2)}
    assert g.directed == want_d and g.bidirected == want_b
    k = 6  # 36 edges from ~70 characters: within the per-character budget, accepted in full
    _, d, _, _ = _parse_prose(f"{_names('a', k)} causes {_names('b', k)}.")
    assert len(d) == k * k and set(d) == set(product([f"a{i}" for i in range(k)], [f"b{i}" for i in range(k)]))
    # 200 x 200 = 40k edges from ~2 KB (under MAX_EDGES, but far more edges than characters): refused
    # before any edge is built, so a few KB of prose cannot cost 40k edge insertions per score
    with pytest.raises(ParseError, match="four characters"):
        _parse_prose(f"{_names('a', 200)} causes {_names('b', 200)}.")


def test_score_survives_prose_blowup_graph_slot():
    trace = f"GRAPH: {_names('a', 8001)} causes {_names('b', 8001)} and bz.\n" + BACKDOOR_TAIL  # audit repro
    s = score(trace, Problem.from_dict(BACKDOOR))  # used to raise MemoryError after 3 GB
    assert not s.bits[0]
    assert score(f"GRAPH: {BACKDOOR['graph']}\n" + BACKDOOR_TAIL, Problem.from_dict(BACKDOOR)).bits[0]


# ---- B4: ATE RESULT numbers -----------------------------------------------------------------
@pytest.mark.parametrize("text,want", [
    ("0." + "5" * 19_000, float("0." + "5" * 19_000)), ("1" * 300, float("1" * 300)),
    ("ATE = " + "0" * 19_000 + "1.25", 1.25), ("-.5", -0.5), ("+3e-2", 0.03), ("**0.12**", 0.12), ("7.", 7.0),
    ("ATE ≈ -0.132774.", -0.132774)])
def test_parse_number_reads_long_and_labelled_numbers(text, want):
    assert parse_number(text) == want


@pytest.mark.parametrize("text", ["1" * 19_000 + "x", "1" * 19_000, "1e" + "9" * 19_000, "x = 1" + " " * 19_000 + "1",
                                  "1.2.3", "", "ATE = ", "0x10", "1_000", "nan", "inf", "1e400"])
def test_parse_number_rejects_with_value_error_only(text):
    with pytest.raises(ValueError):
        parse_number(text)


@pytest.mark.parametrize("result", ["1" * 19_000 + "x", "1" * 19_000, "0." + "1" * 19_000, "9" * 5000 + ".5"])
def test_ate_score_on_huge_result_does_not_raise(result):
    s = score(ATE_HEAD + f"RESULT: {result}\nANSWER: no\n", Problem.from_dict(ATE))
    assert not s.bits[4]  # none of these is within ε of the true ATE (-0.1328)


# ---- linear time on hostile text ------------------------------------------------------------
def _graph(fmt):
    def run(s):
        graph_cache.memo.clear()  # parse_graph memoizes successes
        return parse_graph(s, fmt)
    return run


PARSERS = {**{f"graph[{f}]": _graph(f) for f in (None, "arrows", "json", "matrix", "graphml", "dot", "clear", "prose")},
           "node_set": parse_node_set, "node_sets": parse_node_sets, "node_list": parse_node_list, "path": parse_path,
           "number": parse_number, "result_bool": parse_result_bool, "cpt_text": parse_cpt_text}
# (prefix, repeated fragment): runs that an ambiguous regex can split many ways, after the prefixes
# that select each format's code path; every string then ends in a suffix that fails.
FRAGMENTS = [("", "1"), ("", " "), ("", "\u2003"), ("", "\u00a0 "), ("", "->"), ("", "<-"), ("", "<->"),
             ("", "a -> "), ("", "a <-> b, "), ("", ", "), ("", "a, "), ("", "a and "), ("", "["), ("", "{"),
             ("", "("), ("", '"'), ("", "'"), ("", "“"), ("", "*"), ("", "#"), ("", "/"), ("", "/*"),
             ("", "\t"), ("", "a b "), ("", "1."), ("", "0 "), ("", "\\"), ("", '"a", '), ("given ", " "),
             ("given a ", "x "), ("digraph ", " "), ("digraph G {", "a -> "), ("digraph G {", '"a\\'),
             ("strict ", " "), ("ATE = ", "1"), ("ATE = 1e", "1"), ("{", '"a": ['), ("[", "("), ("set(", " "),
             ("<graphml>", "<"), ("not", " "), ("A causes ", "B, "), ("a hidden ", "hidden "), ("P(A=1 |", " "),
             ("x causes ", "n1, causes, "), ("", "a1 share a hidden common cause, and ")]
SUFFIX = "\x01!"


def _cost(fn, s: str) -> float:
    t0 = time.process_time()
    try:
        fn(s)
    except (ValueError, RecursionError):  # ParseError/GraphError are ValueErrors; any other type fails
        pass
    return time.process_time() - t0


def _build(prefix: str, frag: str, n: int) -> str:
    return prefix + frag * ((n - len(prefix)) // len(frag)) + SUFFIX


def test_string_parsers_scale_linearly_on_hostile_text():
    """5k -> 20k chars: a linear parser costs ~4x, a quadratic one 16x (the old ATE number took 56 s at 19k)."""
    slow = []
    for prefix, frag in FRAGMENTS:
        small, big = _build(prefix, frag, 5_000), _build(prefix, frag, 20_000)
        for name, fn in PARSERS.items():
            t_big = _cost(fn, big)
            if t_big > 0.1:  # linear parsers take ~10-50 ms here; re-measure both sizes against noise
                t_big = min(t_big, _cost(fn, big))
                t_small = max(min(_cost(fn, small), _cost(fn, small)), 0.005)
                if t_big > 0.1 and (t_big > 1.0 or t_big / t_small > 8):
                    slow.append(f"{name} on {prefix!r}+{frag!r}*n: {t_small:.3f}s at 5k, {t_big:.3f}s at 20k")
    assert not slow, "\n".join(slow)


# ---- render -> parse round trips -----------------------------------------------------------
_EXOTIC = st.sampled_from(['"', "'", "\\", " ", "  ", "\t", "\n", "\r", "é", "ß", "İ", "中", "😀", "“", "”", "-", "->",
                           "<->", ",", ";", ".", ":", "{", "}", "[", "]", "(", ")", "#", "//", "/*", "*/", "&", "<",
                           "0", "1", "3.0", "and", "AND", "and ", "subgraph", "graph", "node", "edge", "digraph",
                           "strict", "causes", "Causally", "jointly", "the", "edges", "no edges", "directed edges",
                           "nodes", "Kind", "given", "with nodes", "\x00", "\x0b", "\u2028", "\ufeff", "A", "x"])
ANY_NAMES = st.lists(_EXOTIC, min_size=1, max_size=4).map("".join) | st.text(min_size=1, max_size=8)


def _legal(n: str) -> bool:
    """The documented node-name rule, read independently: one line (as str.splitlines reads it) and
    not every quote character."""
    return len(n.splitlines()) == 1 and n.splitlines()[0] == n and not all(q in n for q in "\"'”")


NAMES = ANY_NAMES.filter(_legal)


@st.composite
def exotic_graphs(draw):
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]  # i < j: acyclic
    d = draw(st.lists(st.sampled_from(pairs), unique=True)) if pairs else []
    b = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2)) if pairs else []
    return CausalGraph.build(names, d, b, GraphClass.ADMG if b else GraphClass.DAG)


def _expressible(fmt: str, names) -> bool:
    """Names each format documents it can carry (independent of the renderer's own checks)."""
    def quotable(n):  # arrow text / matrix cells: one of the two quote characters, no newline
        return "\n" not in n and not ('"' in n and "'" in n)
    if fmt in ("json", "dot"):
        return True
    if fmt == "graphml":
        return not any(re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", n) for n in names)
    if fmt == "json_parents":
        return not any(n.lower() in ("nodes", "kind", "edges", "directed", "bidirected", "class", "matrix", "links",
                                     "arcs", "adjacency", "graph_type", "directed_edges", "bidirected_edges",
                                     "bi-directed", "bi_directed") for n in names)
    if fmt == "arrows":  # three quote pairs: every legal name
        return True
    if fmt == "matrix":
        return all(map(quotable, names))
    if fmt == "prose":
        return all("\n" not in n and len(n) <= 200 and not ('"' in n and "”" in n) for n in names)
    assert fmt == "clear"
    return all(quotable(n) and "." not in n and not re.search(r"[^\S ]|  ", n) and "edge" not in n.lower()
               for n in names)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exotic_graphs(), st.sampled_from(RENDER_FORMATS))
def test_render_parse_round_trip_or_clear_error(g, fmt):
    try:
        text = render_graph(g, fmt)
    except GraphError as e:
        assert not _expressible(fmt, g.nodes), f"{fmt} refused expressible names {g.nodes!r}: {e}"
        assert "cannot" in str(e) or "only an ADMG" in str(e)
        return
    back = parse_graph(text, "json" if fmt == "json_parents" else fmt)
    assert back == g, f"{fmt}:\n{text}"
    assert set(back.nodes) == set(g.nodes)
    if fmt in ("arrows", "json", "graphml", "dot", "json_parents"):  # auto-detect reads them too
        assert parse_graph(text) == g


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exotic_graphs())
def test_problem_json_round_trips_every_legal_name(g):
    """Problem.to_dict -> JSON -> from_dict (the GRPO export -> problem_json -> reward path) reloads the same
    graph, and a query naming any node stays bound to it."""
    x = g.nodes[0]
    p = Problem(task="mediator", query={"treatment": x, "outcome": g.nodes[-1]}, graph=g)
    back = Problem.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.graph == g and back.graph.kind == g.kind
    assert x in back.graph


_BREAKS = st.sampled_from(["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r\n",
                           "\"'”"])


@given(ANY_NAMES, _BREAKS, ANY_NAMES)
def test_illegal_names_are_refused_at_load(left, bad, right):
    name = left + bad + right
    assert not _legal(name)
    with pytest.raises(GraphError, match="line break|quote"):
        CausalGraph.build([name, "B"], [(name, "B")])
    with pytest.raises(ProblemError, match="graph"):
        Problem.from_dict({"task": "backdoor_set", "graph": {"edges": [[name, "B"]]},
                           "query": {"treatment": "B", "outcome": "C"}})


def test_dot_backslash_names_round_trip_and_match_networkx():
    g = CausalGraph.build(["a\\", "b", 'c\\"', "subgraph"], [("a\\", "b"), ('c\\"', "subgraph")], [("b", 'c\\"')])
    text = render_graph(g, "dot")
    assert parse_graph(text, "dot") == g
    # independent reading of the edge list: the quoted ids, unescaped by hand
    ids = [re.sub(r'\\(["\\])', r"\1", m) for m in re.findall(r'"((?:[^"\\]|\\.)*)"', text)]
    dg = nx.DiGraph()
    for line in text.splitlines():
        ends = [re.sub(r'\\(["\\])', r"\1", m) for m in re.findall(r'"((?:[^"\\]|\\.)*)"', line)]
        if len(ends) == 2:
            dg.add_edge(*ends)
    assert set(ids) == set(g.nodes)
    assert set(dg.edges) == g.directed | set(g.bidirected)


def test_graphviz_escapes_read_as_documented():
    g = parse_graph('digraph { "a\\\\" -> "b\\"q"; "x\\ny" -> "sub\\\ngraph"; "subgraph" -> "node" }', "dot")
    assert g.directed == {("a\\", 'b"q'), ("x\\ny", "subgraph"), ("subgraph", "node")}


def test_json_renders_are_plain_json():
    g = CausalGraph.build(["é\\", '"q"', "Kind"], [("é\\", '"q"')], [("é\\", "Kind")])
    data = json.loads(render_graph(g, "json"))
    assert set(data["nodes"]) == set(g.nodes) and {tuple(e) for e in data["edges"]} == g.directed
    with pytest.raises(GraphError, match="json_parents"):
        render_graph(g, "json_parents")


@pytest.mark.parametrize("names, text", [
    (["A", "B", "C"], "A, B, C"),  # plain names stay bare: prompts and SFT traces do not change
    # a prose word is quoted, or "nodes x" would read as a declaration; then every name is, since a list that
    # mixes quoted and bare names reads as prose ('"', Kind, '"with nodes"é' came back as one node)
    (["nodes", "x"], '"nodes", "x"'),
    (["X", "causes", "Y"], '"X", "causes", "Y"'),
    (['"', "Kind", '"with nodes"é'], """'"', "Kind", '"with nodes"é'"""),
    (['"nodes\\0'], "'\"nodes\\0'"),  # only quoted names: a node list, never prose
])
def test_edgeless_graphs_read_back_under_auto_detection(names, text):
    g = CausalGraph.build(names, [], [])
    assert render_graph(g, "arrows") == g.to_text() == text
    assert parse_graph(text) == g and set(parse_graph(text).nodes) == set(names)
