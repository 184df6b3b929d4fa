"""Issue 19 item 3: every exact check is polynomial or stops at a work budget (audit 2026-12-01 F3,
F11-a, F11-c). The new exact algorithms are checked against brute force (networkx d-separation on
the latent projection, or the family's own base predicate, itself pinned to networkx in
tests/test_minmax_exact.py, over every subset); budgets are checked for determinism. No timed
asserts: a generous watchdog only turns a hang into a failure."""

from __future__ import annotations

import random
from itertools import combinations

import fuzz_corpus as fc
import networkx as nx
import pytest
from fixtures import latent_projection, random_admg, random_dag

from calver.verifier import CausalGraph, GraphClass, GraphError, Problem, get_family, grade, score
from calver.verifier import budget as F
from calver.verifier.paths import ancestors_mask, descendants_mask, node_mask
from calver.verifier.separators import larger_separator, smaller_separator
from calver.verifier.tasks import base, paths
from calver.verifier.tasks.frontdoor import larger_frontdoor_set, smaller_frontdoor_set


def _fresh(d: dict) -> Problem:
    base._MINMAX_MEMO.clear()
    paths._LONGEST_MEMO.clear()
    return Problem.from_dict(d)


# ---- F3: the audit's front-door minimal repro ------------------------------------------------------
def _f3(k: int = 16, npar: int = 60) -> tuple[dict, set[str]]:
    edges = []
    for i in range(k):
        edges += [f"X -> A{i}", f"A{i} -> Y", f"B{i} -> A{i}", f"B{i} -> Y"]
        edges += [f"P{i}_{j} -> B{i}" for j in range(npar)]
    d = {"task": "frontdoor_set", "graph": ", ".join(edges),
         "query": {"treatment": "X", "outcome": "Y", "variant": "minimal"}}
    return d, {f"A{i}" for i in range(k)} | {f"B{i}" for i in range(k)}


def test_f3_repro_grades_exactly_and_fast():
    """k=16, npar=60 (994 nodes; 21 s before): the unique minimal set scores 6/6, exactly."""
    d, z = _f3()
    with fc.watchdog(30):
        p = _fresh(d)
        trace = p.family.canonical_trace(p, z)
        assert score(trace, p).bits == [1] * 6
        assert grade(_fresh(d), z)
        assert not grade(_fresh(d), z | {"P0_0"})  # a root parent: still valid, no longer minimal
        assert not grade(_fresh(d), z - {"B0"})  # A0 <- B0 -> Y opens
        s = score(p.family.canonical_trace(p, z | {"P0_0"}).replace("RESULT: invalid", "RESULT: valid"), _fresh(d))
        assert s.bits[2] == 0 and "not minimal" in s.reasons["STRATEGY"]


def _star(k: int) -> tuple[dict, set[str]]:
    """Z_i -> Y, C -> L_i -> Z_i: Z is minimal, no member is forced, every member's search meets
    the others only after all L_j (the benchmark's adversarial front-door shape)."""
    edges = ["X -> Q"] + [e for i in range(k) for e in (f"Z{i} -> Y", f"C -> L{i}", f"L{i} -> Z{i}")]
    d = {"task": "frontdoor_set", "graph": ", ".join(edges),
         "query": {"treatment": "X", "outcome": "Y", "variant": "minimal"}}
    return d, {f"Z{i}" for i in range(k)}


def test_budget_exhaustion_fails_closed_and_is_deterministic(monkeypatch, fresh_memos):
    d, z = _star(40)
    assert grade(_fresh(d), z) and not grade(_fresh(d), z | {"L0"})  # exact under the default budget
    monkeypatch.setattr(F, "WORK_LIMIT", 500)  # the same check, past a small budget
    seen = set()
    for _ in range(2):
        p = _fresh(d)
        check = p.family.predicate(p.graph, p.family.normalize_query(p), frozenset(z))
        assert not check.ok and check.reason.startswith("too large to grade exactly")
        s = score(p.family.canonical_trace(p, z).replace("RESULT: invalid", "RESULT: valid"), p)
        seen.add((check.reason, tuple(s.bits), s.reasons["STRATEGY"]))
    assert len(seen) == 1


def test_longest_path_budget_is_deterministic(monkeypatch, fresh_memos):
    w = h = 6
    edges = [f"N{i}_{j} -> N{i + 1}_{j}" for i in range(w - 1) for j in range(h)]
    edges += [f"N{i}_{j} -> N{i}_{j + 1}" for i in range(w) for j in range(h - 1)]
    edges += [f"N{i}_{j} -> N{i + 1}_{j + 1}" for i in range(w - 1) for j in range(h - 1)]  # odd cycles
    d = {"task": "path", "graph": ", ".join(edges), "query": {"source": "N0_0", "target": "N5_5", "variant": "longest"}}
    diagonal = "N0_0 -> N1_1 -> N2_2 -> N3_3 -> N4_4 -> N5_5"
    with fc.watchdog(60):
        assert not grade(_fresh(d), diagonal)  # exact under the default budget
        monkeypatch.setattr(paths, "WORK_LIMIT", 150)
        out = set()
        for _ in range(2):
            p = _fresh(d)
            s = score(p.family.canonical_trace(p, diagonal), p)
            out.add((tuple(s.bits), s.reasons["STRATEGY"]))
    assert len(out) == 1 and "too large to grade" in next(iter(out))[1]


# ---- F11-a: linear minimal / maximal separators against networkx -------------------------------------
def _subsets(items):
    items = sorted(items)
    return [frozenset(c) for r in range(len(items) + 1) for c in combinations(items, r)]


@pytest.mark.parametrize("backdoor", [False, True])
def test_separators_match_networkx_with_sets_and_any_candidate_pool(backdoor):
    """X, Y of 1-2 nodes, and R either the family's pool or a random part of it (which may leave an
    ancestor of R outside A ∪ R: the budgeted fallback)."""
    rng = random.Random(f"sep/{backdoor}")
    counts = {"min": [0, 0], "max": [0, 0]}
    for _ in range(400):
        n = rng.randint(4, 9)
        g = random_admg(rng, n, p=rng.uniform(0.2, 0.5), pb=rng.uniform(0.05, 0.3)) if rng.random() < 0.5 \
            else random_dag(rng, n, p=rng.uniform(0.2, 0.55))
        nodes = list(g.nodes)
        rng.shuffle(nodes)
        if backdoor:
            xs, ys = set(nodes[:1]), set(nodes[1:2])
        else:
            xs, ys = set(nodes[:rng.randint(1, 2)]), set(nodes[2:3 + rng.randint(0, 1)])
        xm, ym = node_mask(g, xs), node_mask(g, ys)
        no_out = xm if backdoor else 0
        rm = ((1 << n) - 1) & ~(xm | ym) & ~(descendants_mask(g, xm) if backdoor else 0)
        if rng.random() < 0.4:
            rm &= sum(1 << i for i in range(n) if rng.random() < 0.7)
        lat = latent_projection(g, xs if backdoor else frozenset())
        pool = g.names(rm)
        valid = {z for z in _subsets(pool) if nx.is_d_separator(lat, xs, ys, set(z))}
        for z in valid:
            zm = node_mask(g, z)
            small, large = smaller_separator(g, xm, ym, zm, no_out), larger_separator(g, xm, ym, zm, rm, no_out)
            minimal = not any(s < z for s in valid)
            maximal = not any(z < s for s in valid)
            assert (small is None) == minimal, (g.to_text(), xs, ys, sorted(z))
            assert (large is None) == maximal, (g.to_text(), xs, ys, sorted(z), sorted(pool))
            assert small is None or g.names(small) in valid and g.names(small) < z
            assert large is None or g.names(large) in valid and z < g.names(large)
            counts["min"][minimal] += 1
            counts["max"][maximal] += 1
    assert min(min(v) for v in counts.values()) >= 50, counts


def test_larger_separator_on_the_audit_shape_is_exact():
    k = 300
    edges = [("W", "X"), ("W", "Y")] + [e for i in range(k) for e in (("X", f"D{i}"), ("Y", f"D{i}"))]
    g = CausalGraph.build([], edges, (), GraphClass.DAG)
    xm, ym = node_mask(g, "X"), node_mask(g, "Y")
    rm = ((1 << len(g.nodes)) - 1) & ~(xm | ym)
    assert larger_separator(g, xm, ym, node_mask(g, "W"), rm) is None  # every D_i opens X -> D_i <- Y
    g2 = CausalGraph.build([], edges + [("W", "E")], (), GraphClass.DAG)  # E: a child of W only
    xm, ym = node_mask(g2, "X"), node_mask(g2, "Y")
    rm = ((1 << len(g2.nodes)) - 1) & ~(xm | ym)
    assert g2.names(larger_separator(g2, xm, ym, node_mask(g2, "W"), rm)) == {"W", "E"}
    assert ancestors_mask(g2, node_mask(g2, "E")) == node_mask(g2, "W")


# ---- F3: front-door minimal / maximal on larger graphs, against brute force ---------------------------
def _fd_instance(rng: random.Random):
    """A random DAG/ADMG of 9-13 nodes, or gadget pairs (only dropped together) plus noise."""
    if rng.random() < 0.35:
        k = rng.randint(2, 4)
        directed = [("V0", "V5")]
        directed += [e for i in range(k) for e in ((f"A{i}", "V1"), (f"A{i}", f"B{i}"), (f"B{i}", "V1"))]
        bi = [("V1", "V5"), ("V4", "V5")] + [(f"A{i}", f"B{i}") for i in range(k)]
        nodes = sorted({n for e in directed + bi for n in e})
        directed += [(a, b) for a, b in combinations(nodes, 2) if rng.random() < 0.04 and b not in ("V0",)]
        try:
            g = CausalGraph.build(nodes, directed, bi, GraphClass.ADMG)
        except GraphError:  # a noise edge closed a cycle
            return None
        return g, "V0", "V1"
    n = rng.randint(9, 13)
    g = random_admg(rng, n, p=rng.uniform(0.15, 0.35), pb=rng.uniform(0.05, 0.2)) if rng.random() < 0.5 \
        else random_dag(rng, n, p=rng.uniform(0.15, 0.4))
    x, y = rng.sample(list(g.nodes), 2)
    return g, x, y


@pytest.mark.parametrize("criterion", ["set", "per_member"])
def test_frontdoor_exact_checks_match_brute_force_on_larger_graphs(criterion):
    rng = random.Random(f"fd-big/{criterion}")
    fam = get_family("frontdoor_set")
    counts = {"min": [0, 0], "max": [0, 0]}
    for _ in range(700):
        inst = _fd_instance(rng)
        if inst is None:
            continue
        g, x, y = inst
        q = {"treatment": x, "outcome": y, "criterion": criterion, "variant": "any"}
        cands = frozenset(g.nodes) - {x, y}
        ok = lambda s: fam.is_base_valid(g, q, s)  # noqa: E731
        tried = [frozenset(rng.sample(sorted(cands), rng.randint(1, min(8, len(cands))))) for _ in range(25)]
        tried.append(cands)
        xm, ym = node_mask(g, x), node_mask(g, y)
        for z in {s for s in tried if ok(s)}:
            zm = node_mask(g, z)
            small = smaller_frontdoor_set(g, xm, ym, zm, criterion)
            minimal = not any(ok(s) for s in _subsets(z) if s != z)
            assert (small is None) == minimal, (g.to_text(), x, y, sorted(z))
            assert small is None or (g.names(small) < z and ok(g.names(small)))
            large = larger_frontdoor_set(g, xm, ym, zm, node_mask(g, cands), criterion)
            maximal = not any(ok(z | s) for s in _subsets(cands - z) if s)
            assert (large is None) == maximal, (g.to_text(), x, y, sorted(z))
            assert large is None or (z < g.names(large) and ok(g.names(large)))
            counts["min"][minimal] += 1
            counts["max"][maximal] += 1
    assert min(min(v) for v in counts.values()) >= 20, counts


# ---- F11-c: longest paths with the bipartite bound, against brute force ------------------------------
def _longest_oracle(g: CausalGraph, a: str, b: str, backdoor: bool) -> int | None:
    sk = nx.Graph()
    sk.add_nodes_from(g.nodes)
    sk.add_edges_from(g.directed)
    sk.add_edges_from(g.bidirected)
    best = None
    for nodes in nx.all_simple_paths(sk, a, b):
        if backdoor and not (g.has_edge(nodes[1], a) or g.has_edge(a, nodes[1], "<->")):
            continue
        best = max(best or 0, len(nodes) - 1)
    return best


def test_longest_path_matches_brute_force_on_bipartite_and_other_graphs():
    rng = random.Random("longest")
    kinds = {True: 0, False: 0}
    for _ in range(300):
        w, h = rng.randint(2, 4), rng.randint(2, 4)
        cells = [(i, j) for i in range(w) for j in range(h)]
        edges = [((i, j), (i + 1, j)) for i, j in cells if i + 1 < w]
        edges += [((i, j), (i, j + 1)) for i, j in cells if j + 1 < h]
        edges = [e for e in edges if rng.random() < 0.85]
        if rng.random() < 0.4:  # a diagonal or two: odd cycles, no parity bound
            edges += [((i, j), (i + 1, j + 1)) for i, j in cells if i + 1 < w and j + 1 < h and rng.random() < 0.3]
        name = lambda c: f"N{c[0]}_{c[1]}"  # noqa: E731
        g = CausalGraph.build([name(c) for c in cells], [(name(a), name(b)) for a, b in edges], (), GraphClass.DAG)
        kinds[paths._colouring(paths._skeleton(g)) is not None] += 1
        a, b = rng.sample(list(g.nodes), 2)
        for backdoor in (False, True):
            paths._LONGEST_MEMO.clear()
            assert paths.longest_path_length(g, a, b, backdoor) == _longest_oracle(g, a, b, backdoor), \
                (g.to_text(), a, b, backdoor)
    assert min(kinds.values()) >= 50, kinds


def test_the_audit_grid_is_now_graded_exactly():
    """6x6 grid, corner to corner: both corners share a colour, so no path visits all 36 nodes; the
    bipartite bound proves 34 edges longest (the old search failed closed after 100,000 steps)."""
    edges = [(f"N{i}_{j}", f"N{i + 1}_{j}") for i in range(5) for j in range(6)]
    edges += [(f"N{i}_{j}", f"N{i}_{j + 1}") for i in range(6) for j in range(5)]
    g = CausalGraph.build([], edges, (), GraphClass.DAG)
    paths._LONGEST_MEMO.clear()
    with fc.watchdog(30):
        assert paths.longest_path_length(g, "N0_0", "N5_5") == 34


def test_generated_path_problems_still_grade():
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import canonical_answer, generate

    for task in ("path", "backdoor_path"):
        for seed in range(3):
            for p in generate(task, 40, GenConfig(seed=seed)):
                assert grade(p, canonical_answer(p)), p.id
