"""Property tests for calver.verifier.primitives against independent networkx / brute-force oracles."""

from __future__ import annotations

import random
from itertools import chain, combinations

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.verifier import primitives as P
from calver.verifier.graph import CausalGraph, GraphError

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- random graphs -----------------------------------------------------------------------
def _random_graph(seed: int, n: int, *, bidirected: bool = False, cyclic: bool = False) -> CausalGraph:
    rnd = random.Random(seed)
    names = [f"N{i}" for i in range(n)]
    order = names[:]
    rnd.shuffle(order)  # topological order differs from insertion / index order
    p = rnd.uniform(0.1, 0.6)
    directed = []
    for i in range(n):
        for j in range(n):
            if cyclic:
                if (i != j or rnd.random() < 0.1) and rnd.random() < p / 2:
                    directed.append((order[i], order[j]))
            elif i < j and rnd.random() < p:
                directed.append((order[i], order[j]))
    bi = []
    if bidirected:
        q = rnd.uniform(0.05, 0.4)
        bi = [(a, b) for a, b in combinations(names, 2) if rnd.random() < q]
    insertion = names[:]
    rnd.shuffle(insertion)
    kind = "directed" if cyclic else ("ADMG" if bidirected else "DAG")
    return CausalGraph.build(insertion, directed, bi, kind)


def graphs(lo=2, hi=12, **kw):
    return st.builds(lambda s, n: _random_graph(s, n, **kw), st.integers(0, 2**32 - 1), st.integers(lo, hi))


def _split(rnd: random.Random, nodes):
    """Random disjoint (X, Y, Z) with X, Y non-empty."""
    nodes = list(nodes)
    rnd.shuffle(nodes)
    kx = rnd.randint(1, max(1, min(3, len(nodes) - 1)))
    ky = rnd.randint(1, max(1, min(3, len(nodes) - kx)))
    xs, ys = nodes[:kx], nodes[kx:kx + ky]
    rest = nodes[kx + ky:]
    zs = [v for v in rest if rnd.random() < 0.4]
    return set(xs), set(ys), set(zs)


def _nx_dag(g: CausalGraph) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    d.add_edges_from(g.directed)
    return d


def _latent_projection(g: CausalGraph) -> nx.DiGraph:
    d = _nx_dag(g)
    for a, b in g.bidirected:
        lat = f"L_{a}_{b}"
        d.add_edges_from([(lat, a), (lat, b)])
    return d


def _skeleton(g: CausalGraph, no_out=()) -> nx.MultiGraph:
    """Undirected multigraph keeping edge types; directed edges out of ``no_out`` dropped."""
    m = nx.MultiGraph()
    m.add_nodes_from(g.nodes)
    for a, b in g.directed:
        if a not in no_out:
            m.add_edge(a, b, kind="d", tail=a)
    for a, b in g.bidirected:
        m.add_edge(a, b, kind="b")
    return m


def _typed_paths(sk: nx.MultiGraph, s, t):
    """All simple paths s..t as (nodes, types), types read left to right."""
    for epath in nx.all_simple_edge_paths(sk, s, t):
        nodes, types = [s], []
        for u, v, k in epath:
            data = sk.edges[u, v, k]
            types.append("<->" if data["kind"] == "b" else ("->" if data["tail"] == u else "<-"))
            nodes.append(v)
        yield nodes, types


def _brute_blocked(dag: nx.DiGraph, nodes, types, z) -> bool:
    for k in range(1, len(nodes) - 1):
        v = nodes[k]
        collider = types[k - 1] in ("->", "<->") and types[k] in ("<-", "<->")
        if collider:
            if not (({v} | nx.descendants(dag, v)) & z):
                return True
        elif v in z:
            return True
    return False


def _brute_backdoor(g: CausalGraph, x: str, y: str, z: set) -> bool:
    dag = _nx_dag(g)
    if z & ({x, y} | nx.descendants(dag, x)):
        return False
    sk = _skeleton(g)
    for nodes, types in _typed_paths(sk, x, y):
        if types[0] in ("<-", "<->") and not _brute_blocked(dag, nodes, types, z):
            return False
    return True


def _brute_frontdoor(g: CausalGraph, x: str, y: str, z: set) -> bool:
    if not z or z & {x, y}:
        return False
    dag = _nx_dag(g)
    if any(not (set(p) & z) for p in nx.all_simple_paths(dag, x, y)):
        return False
    sk = _skeleton(g)
    for m in z:  # (ii) back-door paths X .. m open given the empty set
        for nodes, types in _typed_paths(sk, x, m):
            if types[0] in ("<-", "<->") and not _brute_blocked(dag, nodes, types, set()):
                return False
    # (iii) Z ⊥ Y | X in the graph without Z's outgoing edges (Pearl's do-calculus rule 2 form)
    skz = _skeleton(g, no_out=z)
    dagz = dag.copy()
    dagz.remove_edges_from([e for e in g.directed if e[0] in z])
    for m in z:
        for nodes, types in _typed_paths(skz, m, y):
            if not _brute_blocked(dagz, nodes, types, {x}):
                return False
    return True


def _subsets(items):
    items = sorted(items)
    return [frozenset(c) for k in range(len(items) + 1) for c in combinations(items, k)]


# ---- d-/m-separation -----------------------------------------------------------------------
@settings(max_examples=1000, **SETTINGS)
@given(graphs(2, 12), st.integers(0, 2**32 - 1))
def test_d_separation_matches_networkx(g, seed):
    rnd = random.Random(seed)
    dag = _nx_dag(g)
    for _ in range(4):
        xs, ys, zs = _split(rnd, g.nodes)
        assert P.is_separated(g, xs, ys, zs) == nx.is_d_separator(dag, xs, ys, zs)
    x, y = rnd.sample(g.nodes, 2)
    assert P.is_d_separated(g, x, y, []) == nx.is_d_separator(dag, {x}, {y}, set())


@settings(max_examples=800, **SETTINGS)
@given(graphs(2, 10, bidirected=True), st.integers(0, 2**32 - 1))
def test_m_separation_matches_latent_projection(g, seed):
    rnd = random.Random(seed)
    proj = _latent_projection(g)
    for _ in range(4):
        xs, ys, zs = _split(rnd, g.nodes)
        sep = P.is_m_separated(g, xs, ys, zs)
        assert sep == nx.is_d_separator(proj, xs, ys, zs)
        w = P.find_open_path(g, xs, ys, zs)
        assert (w is None) == sep
        if w is not None:  # witness is a real, simple, unblocked path between the sets
            nodes, types = w
            assert nodes[0] in xs and nodes[-1] in ys and P.is_path(g, nodes, types)
            assert not _brute_blocked(_nx_dag(g), nodes, types, zs)
            assert not P.blocks_path(g, nodes, zs, types)


@settings(max_examples=150, **SETTINGS)
@given(graphs(13, 40), st.integers(0, 2**32 - 1))
def test_d_separation_larger_graphs(g, seed):
    rnd = random.Random(seed)
    dag = _nx_dag(g)
    for _ in range(4):
        xs, ys, zs = _split(rnd, g.nodes)
        assert P.is_separated(g, xs, ys, zs) == nx.is_d_separator(dag, xs, ys, zs)


@settings(max_examples=500, **SETTINGS)
@given(graphs(2, 8, bidirected=True), st.integers(0, 2**32 - 1))
def test_remove_outgoing_matches_mutilated_graph(g, seed):
    rnd = random.Random(seed)
    xs, ys, zs = _split(rnd, g.nodes)
    cut = {v for v in g.nodes if rnd.random() < 0.3}
    mut = g.with_edges(remove_directed=[e for e in g.directed if e[0] in cut])
    assert P.is_separated(g, xs, ys, zs, remove_outgoing_of=cut) == nx.is_d_separator(
        _latent_projection(mut), xs, ys, zs)


# ---- paths ---------------------------------------------------------------------------------
@settings(max_examples=300, **SETTINGS)
@given(graphs(2, 7, bidirected=True), st.integers(0, 2**32 - 1))
def test_blocks_path_matches_bruteforce(g, seed):
    rnd = random.Random(seed)
    dag = _nx_dag(g)
    s, t = rnd.sample(g.nodes, 2)
    paths = list(_typed_paths(_skeleton(g), s, t))
    for nodes, types in rnd.sample(paths, min(len(paths), 20)):
        z = {v for v in g.nodes if v not in (s, t) and rnd.random() < 0.4}
        assert P.is_path(g, nodes, types)
        assert P.path_edges(g, nodes, types) == types
        assert P.blocks_path(g, nodes, z, types) == _brute_blocked(dag, nodes, types, z)
        try:
            resolved = P.path_edges(g, nodes)
        except GraphError:  # only when some hop has two edge types
            assert any(len(sk) > 1 for sk in (_skeleton(g).get_edge_data(a, b) for a, b in zip(nodes, nodes[1:])))
        else:
            assert resolved == types


def test_path_helpers_errors():
    g = CausalGraph.build(directed=[("A", "B"), ("B", "C")], bidirected=[("A", "B")])
    with pytest.raises(GraphError, match="ambiguous"):
        P.path_edges(g, ["A", "B", "C"])
    assert P.path_edges(g, ["A", "B", "C"], ["<->", "->"]) == ["<->", "->"]
    with pytest.raises(GraphError, match="not in the graph"):
        P.path_edges(g, ["A", "B"], ["<-"])
    with pytest.raises(GraphError, match="no edge"):
        P.path_edges(g, ["A", "C"])
    with pytest.raises(GraphError, match="unknown node"):
        P.is_path(g, ["A", "Q"])
    with pytest.raises(GraphError, match="endpoint"):
        P.blocks_path(g, ["A", "B", "C"], ["A"], ["->", "->"])
    assert P.is_path(g, ["A", "B", "C"]) and not P.is_path(g, ["A", "C"]) and not P.is_path(g, ["A", "B", "A"])
    assert not P.is_path(g, ["A", "B"], ["<-"])
    # A <-> B <- ... collider at B only through the bidirected edge
    g2 = CausalGraph.build(directed=[("C", "B")], bidirected=[("A", "B")])
    assert P.blocks_path(g2, ["A", "B", "C"], [])
    assert not P.blocks_path(g2, ["A", "B", "C"], ["B"])


# ---- back-door -------------------------------------------------------------------------------
@settings(max_examples=600, **SETTINGS)
@given(graphs(2, 7, bidirected=True), st.integers(0, 2**32 - 1))
def test_backdoor_matches_path_enumeration(g, seed):
    rnd = random.Random(seed)
    x, y = rnd.sample(g.nodes, 2)
    for _ in range(3):
        z = {v for v in g.nodes if rnd.random() < 0.35}
        if rnd.random() < 0.8:
            z -= {x, y}
        ok = _brute_backdoor(g, x, y, z)
        assert P.is_backdoor_set(g, x, y, z) == ok
        assert (P.backdoor_violation(g, x, y, z) is None) == ok
        if not ok and not z & ({x, y} | P.descendants(g, x)):  # witness: an open back-door path
            nodes, types = P.find_open_path(g, x, y, z, remove_outgoing_of=x)
            assert types[0] in ("<-", "<->") and P.is_path(g, nodes, types)
            assert not _brute_blocked(_nx_dag(g), nodes, types, z)


@settings(max_examples=200, **SETTINGS)
@given(graphs(2, 7), st.integers(0, 2**32 - 1))
def test_backdoor_dag_and_validity_class(g, seed):
    rnd = random.Random(seed)
    x, y = rnd.sample(g.nodes, 2)
    cands = [v for v in g.nodes if v not in (x, y)]
    pred = lambda gg, z: P.is_backdoor_set(gg, x, y, z)  # noqa: E731
    brute = [s for s in sorted(_subsets(cands), key=lambda s: (len(s), sorted(s))) if _brute_backdoor(g, x, y, set(s))]
    assert P.enumerate_valid_sets(g, cands, pred) == brute
    assert P.enumerate_valid_sets(g, cands, pred, limit=2) == brute[:2]
    assert P.enumerate_valid_sets(g, cands, pred, max_size=1) == [s for s in brute if len(s) <= 1]
    mins = [s for s in brute if not any(t < s for t in brute)]
    maxs = [s for s in brute if not any(s < t for t in brute)]
    assert P.minimal_sets(brute) == mins
    assert P.maximal_sets(brute) == maxs
    for s in _subsets(cands)[:40]:
        assert P.is_minimal_valid(g, s, pred) == (s in mins)
        assert P.is_maximal_valid(g, s, pred, cands) == (s in maxs)


# ---- front-door ------------------------------------------------------------------------------
@settings(max_examples=500, **SETTINGS)
@given(graphs(3, 6, bidirected=True), st.integers(0, 2**32 - 1))
def test_frontdoor_matches_bruteforce(g, seed):
    rnd = random.Random(seed)
    x, y = rnd.sample(g.nodes, 2)
    cands = [v for v in g.nodes if v not in (x, y)]
    for _ in range(3):
        z = {v for v in cands if rnd.random() < 0.5}
        ok = _brute_frontdoor(g, x, y, z)
        assert P.is_frontdoor_set(g, x, y, z) == ok
        assert (P.frontdoor_violation(g, x, y, z) is None) == ok


def test_frontdoor_textbook():
    bi = CausalGraph.build(directed=[("X", "M"), ("M", "Y")], bidirected=[("X", "Y")])
    lat = CausalGraph.build(directed=[("X", "M"), ("M", "Y"), ("U", "X"), ("U", "Y")])
    for g in (bi, lat):
        assert P.is_frontdoor_set(g, "X", "Y", ["M"]) and P.frontdoor_violation(g, "X", "Y", "M") is None
        assert not P.is_backdoor_set(g, "X", "Y", []) and not P.is_frontdoor_set(g, "X", "Y", [])
    # direct edge X -> Y bypasses M
    g = bi.with_edges(add_directed=[("X", "Y")])
    assert "X -> Y" in P.frontdoor_violation(g, "X", "Y", ["M"])
    # confounded treatment-mediator: X <-> M opens a back-door path into M
    g = bi.with_edges(add_bidirected=[("X", "M")])
    assert "X <-> M" in P.frontdoor_violation(g, "X", "Y", ["M"])
    # confounded mediator-outcome: M <-> Y not blocked by X
    g = bi.with_edges(add_bidirected=[("M", "Y")])
    assert "M <-> Y" in P.frontdoor_violation(g, "X", "Y", ["M"])
    assert P.frontdoor_violation(bi, "X", "Y", []).startswith("Z is empty")
    # two mediators confounded with each other: valid by rule 2 on the whole set Z
    g2 = CausalGraph.build(directed=[("X", "A"), ("X", "B"), ("U", "A"), ("U", "B"), ("B", "Y")],
                           bidirected=[("X", "Y")])
    assert P.is_frontdoor_set(g2, "X", "Y", ["A", "B"]) and P.is_frontdoor_set(g2, "X", "Y", ["B"])


# ---- textbook back-door cases ----------------------------------------------------------------
def test_m_bias():
    g = CausalGraph.build(directed=[("A", "X"), ("A", "M"), ("B", "M"), ("B", "Y"), ("X", "Y")])
    assert P.is_backdoor_set(g, "X", "Y", [])
    assert not P.is_backdoor_set(g, "X", "Y", ["M"])
    assert "X <- A -> M <- B -> Y" in P.backdoor_violation(g, "X", "Y", ["M"])
    assert P.is_backdoor_set(g, "X", "Y", ["M", "A"]) and P.is_backdoor_set(g, "X", "Y", {"M", "B"})
    pred = lambda z: P.is_backdoor_set(g, "X", "Y", z)  # noqa: E731
    assert P.is_minimal_valid(g, [], pred)
    assert not P.is_minimal_valid(g, ["M", "A"], pred)  # ∅ ⊂ {M, A} is valid, {M} is not
    assert P.is_maximal_valid(g, ["A", "B", "M"], pred, ["A", "B", "M"])


def test_descendant_trap():
    g = CausalGraph.build(directed=[("X", "M"), ("M", "Y"), ("C", "X"), ("C", "Y")])
    assert P.backdoor_violation(g, "X", "Y", ["M"]) == "Z contains M, a descendant of treatment X (X -> M)"
    assert P.backdoor_violation(g, "X", "Y", ["M", "C"]).startswith("Z contains M")
    assert P.backdoor_violation(g, "X", "Y", []) == "backdoor path X <- C -> Y is open given the empty set"
    assert P.is_backdoor_set(g, "X", "Y", ["C"])
    assert P.backdoor_violation(g, "X", "Y", ["Y"]) == "Z contains the outcome Y"
    assert P.backdoor_violation(g, "X", "Y", ["X"]) == "Z contains the treatment X"
    assert P.open_path(g, "X", "Y", [], remove_outgoing_of="X") == ["X", "C", "Y"]
    assert P.mediators(g, "X", "Y") == {"M"} and P.is_mediator(g, "X", "Y", "M", one_hop=True)


def test_simpson_machine_two_singletons():
    # X <- A -> B -> Y and X <- A ... : blocking the single confounding chain at A or at B
    g = CausalGraph.build(directed=[("A", "X"), ("A", "B"), ("B", "Y"), ("X", "Y"), ("X", "W"), ("W", "Y")])
    singles = [s for s in P.enumerate_valid_sets(g, ["A", "B", "W"], lambda z: P.is_backdoor_set(g, "X", "Y", z))
               if len(s) == 1]
    assert singles == [frozenset({"A"}), frozenset({"B"})]
    valid = P.enumerate_valid_sets(g, ["A", "B", "W"], lambda gg, z: P.is_backdoor_set(gg, "X", "Y", z))
    assert P.minimal_sets(valid) == singles


# ---- cycles, reachability, mediators, ancestors ------------------------------------------------
@settings(max_examples=400, **SETTINGS)
@given(graphs(1, 9, cyclic=True), st.integers(0, 2**32 - 1))
def test_cycle_witness(g, seed):
    d = _nx_dag(g)
    cyc = P.find_directed_cycle(g)
    assert (cyc is None) == nx.is_directed_acyclic_graph(d) == g.acyclic
    if cyc is not None:
        assert P.is_directed_cycle(g, cyc) and len(set(cyc)) == len(cyc)
        assert P.is_directed_cycle(g, cyc[1:] + cyc[:1])
        nx.find_cycle(d)  # networkx agrees a cycle exists
    rnd = random.Random(seed)
    simple = {tuple(c) for c in nx.simple_cycles(d)}
    rotations = {c[i:] + c[:i] for c in simple for i in range(len(c))}
    for c in list(simple)[:5]:
        assert P.is_directed_cycle(g, list(c))
    for _ in range(10):
        seq = tuple(rnd.sample(g.nodes, rnd.randint(1, len(g.nodes))))
        assert P.is_directed_cycle(g, seq) == (seq in rotations)


@settings(max_examples=400, **SETTINGS)
@given(graphs(2, 10, cyclic=True), st.integers(0, 2**32 - 1))
def test_reachability_after_do(g, seed):
    rnd = random.Random(seed)
    s, t = rnd.sample(g.nodes, 2)
    do = {v for v in g.nodes if rnd.random() < 0.3}
    mut = _nx_dag(g)
    mut.remove_edges_from([e for e in g.directed if e[1] in do])
    expect = nx.has_path(mut, s, t)
    assert P.reachable_after_do(g, do, s, t) == expect == P.directed_path_exists(g, s, t, removed_incoming=do)
    p = P.find_directed_path(g, s, t, removed_incoming=do)
    assert (p is not None) == expect
    if p:
        assert p[0] == s and p[-1] == t and nx.is_simple_path(mut, p)
        assert len(p) - 1 == nx.shortest_path_length(mut, s, t)
    with pytest.raises(GraphError):
        P.reachable_after_do(g, do, s, s)


@settings(max_examples=400, **SETTINGS)
@given(graphs(2, 10), st.integers(0, 2**32 - 1))
def test_mediators_and_ancestors(g, seed):
    rnd = random.Random(seed)
    d = _nx_dag(g)
    x, y = rnd.sample(g.nodes, 2)
    expect = {m for m in g.nodes if m not in (x, y) and nx.has_path(d, x, m) and nx.has_path(d, m, y)}
    assert P.mediators(g, x, y) == expect
    assert all(P.is_mediator(g, x, y, m) == (m in expect) for m in g.nodes)
    hop = {m for m in g.nodes if d.has_edge(x, m) and d.has_edge(m, y)}
    assert P.mediators(g, x, y, one_hop=True) == hop
    s = set(rnd.sample(g.nodes, rnd.randint(1, len(g.nodes))))
    assert P.ancestors(g, s) == set().union(*(nx.ancestors(d, v) for v in s)) - s | (
        {v for v in s if s & nx.descendants(d, v)})
    assert P.descendants(g, s) == set().union(*(nx.descendants(d, v) for v in s)) - s | (
        {v for v in s if s & nx.ancestors(d, v)})
    assert g.names(P.ancestors_mask(g, g.mask(s), include_self=True)) == P.ancestors(g, s) | s


@settings(max_examples=200, **SETTINGS)
@given(graphs(1, 9, cyclic=True), st.integers(0, 2**32 - 1))
def test_ancestors_cyclic(g, seed):
    rnd = random.Random(seed)
    d = _nx_dag(g)
    s = set(rnd.sample(g.nodes, rnd.randint(1, len(g.nodes))))
    # proper ancestors: a node with a path of length >= 1 into some member
    expect = set(chain.from_iterable({p} | nx.ancestors(d, p) for v in s for p in d.predecessors(v)))
    assert P.ancestors(g, s) == expect
    expect_de = set(chain.from_iterable({c} | nx.descendants(d, c) for v in s for c in d.successors(v)))
    assert P.descendants(g, s) == expect_de


def test_collider_with_conditioned_descendant():
    g = CausalGraph.build(directed=[("X", "C"), ("Y", "C"), ("C", "D")])
    assert P.is_separated(g, "X", "Y", []) and not P.is_separated(g, "X", "Y", ["D"])
    assert P.find_open_path(g, "X", "Y", ["D"]) == (["X", "C", "Y"], ["->", "<-"])
    assert P.blocks_path(g, ["X", "C", "Y"], []) and not P.blocks_path(g, ["X", "C", "Y"], ["D"])
    h = CausalGraph.build(directed=[("C", "D")], bidirected=[("X", "C"), ("C", "Y")])
    assert P.is_m_separated(h, "X", "Y", []) and not P.is_m_separated(h, "X", "Y", "D")
    assert P.open_path(h, "X", "Y", {"D"}) == ["X", "C", "Y"]
    assert P.is_m_separated(h, "X", "D", "C")  # C is a non-collider on X <-> C -> D
    assert not P.is_m_separated(h, "X", "D", [])


# ---- argument errors ---------------------------------------------------------------------------
def test_argument_errors():
    g = CausalGraph.build(directed=[("A", "B"), ("B", "C")])
    with pytest.raises(GraphError, match="unknown node 'Q'"):
        P.is_separated(g, "A", "Q", [])
    with pytest.raises(GraphError, match="disjoint"):
        P.is_separated(g, ["A", "B"], ["B"], [])
    with pytest.raises(GraphError, match="conditioning set"):
        P.is_separated(g, "A", "C", ["A"])
    assert P.is_separated(g, "A", "C", "B") and not P.is_separated(g, "A", "C", ())
    assert P.is_separated(g, [], "C", ())
    cyc = CausalGraph.build(directed=[("A", "B"), ("B", "A")], kind="directed")
    with pytest.raises(GraphError, match="acyclic"):
        P.is_separated(cyc, "A", "B", [])
    with pytest.raises(GraphError, match="acyclic"):
        P.is_backdoor_set(cyc, "A", "B", [])
    with pytest.raises(GraphError):
        P.is_backdoor_set(g, "A", "A", [])
    with pytest.raises(GraphError):
        P.find_directed_path(g, "A", "A")
    with pytest.raises(GraphError):
        P.is_minimal_valid(g, [], lambda z: True, max_exhaustive=-1)
    assert P.find_directed_cycle(CausalGraph.build(directed=[("A", "A")], kind="directed")) == ["A"]
    assert P.is_directed_cycle(cyc, ["B", "A"]) and not P.is_directed_cycle(cyc, ["A"])
    with pytest.raises(GraphError, match="directed cycle"):
        CausalGraph.build(directed=[("A", "B"), ("B", "A")], kind="DAG")
