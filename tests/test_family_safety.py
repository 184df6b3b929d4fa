"""Reward safety of the cycle_witness, mediator and path/backdoor_path families (audit A3, A5, B5),
each against an independent oracle: networkx cycles/reachability and brute-force path enumeration."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import networkx as nx
import pytest
from fixtures import random_admg, random_cyclic, random_dag, sample_problem

from calver.evaluation.audits import replace_slot, swap_answer
from calver.verifier import CausalGraph, GraphClass, Problem, ProblemError, get_family, grade, score
from calver.verifier.primitives import mediator_walk, mediators
from calver.verifier.tasks import paths as P

REPRO = Path(__file__).parent / "data" / "repro"


def _graph(edges, nodes=(), kind=GraphClass.DIRECTED):
    return CausalGraph.build(list(nodes), edges, (), kind)


def _written(nodes, arrow):
    """``A -> B -> C -> A`` style text of a closed node sequence with one arrow kind."""
    seq = list(nodes) + [nodes[0]]
    return f" {arrow} ".join(seq)


# ---- A3: cycle_witness keeps arrow direction --------------------------------------------------
ABC = _graph([("A", "B"), ("B", "C"), ("C", "A"), ("C", "D")])
CYCLE = Problem(task="cycle_witness", graph=ABC, query={"variant": "any"})


@pytest.mark.parametrize("answer", ["A <- B <- C <- A", "A <-> B <-> C <-> A", "A -> B <- C -> A",
                                    "A -- B -- C -- A", "A <- B <- C", "C <- A <- B <- C"])
def test_cycle_answers_naming_no_directed_cycle_grade_wrong(answer):
    assert not grade(CYCLE, answer)


@pytest.mark.parametrize("answer", ["A -> B -> C -> A", "B -> C -> A -> B", "A <- C <- B <- A", "C <- B <- A <- C",
                                    "A, B, C", "A -> B -> C"])
def test_cycle_answers_naming_the_real_cycle_grade_correct(answer):
    assert grade(CYCLE, answer)


def test_cycle_repro_no_longer_scores_six():
    problem = Problem.from_dict(json.loads((REPRO / "cycle_problem.json").read_text()))
    result = score((REPRO / "cycle_trace.txt").read_text(), problem)
    assert result.total < 6 and result.bits[2] == 0 and result.bits[3] == 0, result.reasons
    assert not grade(problem, result.answer)


def test_cycle_derivation_must_bind_the_strategy_cycle():
    g = _graph([("A", "B"), ("B", "A"), ("B", "C"), ("C", "B")])
    p = Problem(task="cycle_witness", graph=g, query={"variant": "any"})
    trace = get_family("cycle_witness").canonical_trace(p, ("A", "B"))
    assert score(trace, p).bits == [1] * 6
    other = replace_slot(trace, "DERIVATION", "find_cycle(cycle=B -> C -> B)")
    assert score(other, p).bits == [1, 1, 1, 0, 1, 1]
    backwards = replace_slot(trace, "DERIVATION", "find_cycle(cycle=B <- A <- B)")  # the same cycle
    assert score(backwards, p).bits == [1] * 6


def test_cycle_grade_matches_networkx_on_random_writings():
    """Oracle: a writing is correct iff its arrows all point one way and, read in that direction,
    every consecutive edge (closing edge included) is an edge of the graph."""
    rng = random.Random(3)
    checked = 0
    for _ in range(300):
        g = random_cyclic(rng, rng.randint(3, 7), p=rng.choice([0.15, 0.3]))
        dg = g.to_networkx()
        p = Problem(task="cycle_witness", graph=g, query={"variant": "any"})
        cycles = [c for c, _ in zip(nx.simple_cycles(dg), range(20))]
        writings = [(c, "->") for c in cycles] + [(c, "<-") for c in cycles]
        for _ in range(10):
            k = rng.randint(2, len(g.nodes))
            writings.append((rng.sample(list(g.nodes), k), rng.choice(["->", "<-", "<->", "mixed"])))
        for nodes, arrow in writings:
            if arrow == "mixed":
                if len(nodes) < 2:
                    continue
                text = " ".join(f"{n} {'->' if i % 2 else '<-'}" for i, n in enumerate(nodes)) + f" {nodes[0]}"
                want = False
            else:
                text = _written(nodes, arrow)
                order = list(nodes) if arrow == "->" else list(reversed(nodes))
                want = arrow != "<->" and all(dg.has_edge(a, b) for a, b in zip(order, order[1:] + order[:1]))
            assert grade(p, text) == want, (g.edges_text(), text)
            checked += 1
    assert checked > 3000


@pytest.mark.parametrize("task", ["cycle_witness", "path", "backdoor_path"])
def test_answer_swap_on_path_valued_families_scores_exactly_3(task):
    fam = get_family(task)
    rng = random.Random(21)
    checked = 0
    for i in range(30):
        problem, valid = sample_problem(task, rng)
        trace = fam.canonical_trace(problem, rng.choice(valid))
        assert score(trace, problem).bits == [1] * 6
        swapped = swap_answer(trace, problem, rng=i)
        if swapped is None:
            continue
        result = score(swapped, problem)
        assert result.bits == [1, 1, 0, 1, 0, 0], (swapped, result.reasons)
        checked += 1
    assert checked >= 10


# ---- A5: mediators are walk mediators ---------------------------------------------------------
def _random_directed(rng, n):
    nodes = [f"V{i}" for i in range(n)]
    p = rng.choice([0.15, 0.25, 0.4])
    edges = [(a, b) for a in nodes for b in nodes if a != b and rng.random() < p]
    edges += [(a, a) for a in nodes if rng.random() < 0.1]  # self-loops
    return _graph(edges, nodes)


def _oracle_mediators(g, x, y):
    dg = g.to_networkx()
    no_y = dg.subgraph([n for n in dg if n != y])
    no_x = dg.subgraph([n for n in dg if n != x])
    return {m for m in g.nodes if m not in (x, y) and nx.has_path(no_y, x, m) and nx.has_path(no_x, m, y)}


def _is_witness_walk(g, walk, x, y, m):
    return (walk[0] == x and walk[-1] == y and m in walk and x not in walk[1:] and y not in walk[:-1]
            and all(g.has_edge(a, b) for a, b in zip(walk, walk[1:])))


def test_audit_example_mediators():
    g = _graph([("V3", "V0"), ("V0", "V2"), ("V2", "V0"), ("V0", "V4"), ("V4", "V1")])
    assert mediators(g, "V3", "V1") == {"V0", "V2", "V4"}
    any_ = Problem(task="mediator", graph=g, query={"treatment": "V3", "outcome": "V1", "variant": "any"})
    all_ = Problem(task="mediator", graph=g, query={"treatment": "V3", "outcome": "V1", "variant": "all"})
    assert grade(any_, "{V2}") and grade(all_, "{V0, V2, V4}") and not grade(all_, "{V0, V4}")
    assert _is_witness_walk(g, mediator_walk(g, "V3", "V1", "V2"), "V3", "V1", "V2")


def test_mediators_match_networkx_reachability_on_cyclic_graphs():
    rng = random.Random(5)
    cyclic = 0
    for _ in range(3400):
        g = _random_directed(rng, rng.randint(2, 8))
        cyclic += not g.acyclic
        x, y = rng.sample(list(g.nodes), 2)
        want = _oracle_mediators(g, x, y)
        assert mediators(g, x, y) == want, (g.edges_text(), x, y)
        one_hop = {m for m in g.nodes if m not in (x, y) and g.has_edge(x, m) and g.has_edge(m, y)}
        assert mediators(g, x, y, one_hop=True) == one_hop
        for m in g.nodes:
            walk = mediator_walk(g, x, y, m)
            assert (walk is not None) == (m in want)
            if walk is not None:
                assert _is_witness_walk(g, walk, x, y, m), (g.edges_text(), walk)
                if g.acyclic:
                    assert len(set(walk)) == len(walk)
    assert cyclic >= 2000  # the rest are DAGs, where the walk and path readings agree


def test_on_dags_mediators_are_the_nodes_on_directed_paths():
    rng = random.Random(6)
    for _ in range(300):
        g = random_dag(rng, rng.randint(2, 8), 0.4)
        x, y = rng.sample(list(g.nodes), 2)
        on_paths = {n for p in nx.all_simple_paths(g.to_networkx(), x, y) for n in p[1:-1]}
        assert mediators(g, x, y) == on_paths


def test_direct_variant_excludes_treatment_with_a_self_loop():
    g = _graph([("X", "X"), ("X", "Y"), ("X", "M"), ("M", "Y")])
    p = Problem(task="mediator", graph=g, query={"treatment": "X", "outcome": "Y", "variant": "direct"})
    assert grade(p, "{M}") and not grade(p, "{X}") and not grade(p, "{Y}")


@pytest.mark.parametrize("variant", ["any", "direct", "all"])
def test_mediator_canonical_traces_score_six_on_cyclic_graphs(variant):
    fam = get_family("mediator")
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        g = _random_directed(rng, rng.randint(3, 8))
        x, y = rng.sample(list(g.nodes), 2)
        p = Problem(task="mediator", graph=g, query={"treatment": x, "outcome": y, "variant": variant})
        for obj in fam.validity_class(g, fam.normalize_query(p))[:3]:
            sc = score(fam.canonical_trace(p, obj), p)
            assert sc.bits == [1] * 6 and grade(p, sc.answer), (g.edges_text(), obj, sc.reasons)
            checked += 1
    assert checked >= 50


def test_mediator_witness_must_be_a_directed_walk_between_the_ends():
    g = _graph([("X", "M"), ("M", "Y"), ("Y", "N"), ("N", "Y"), ("X", "Y"), ("Z", "X"), ("Z", "Y")])
    p = Problem(task="mediator", graph=g, query={"treatment": "X", "outcome": "Y", "variant": "any"})
    trace = get_family("mediator").canonical_trace(p, {"M"})
    assert score(trace, p).bits == [1] * 6
    base = "mediator_check(treatment=X, outcome=Y, mediators={M}, paths=[%s])"
    assert score(replace_slot(trace, "DERIVATION", base % "Y <- M <- X"), p).bits == [1] * 6
    for bad in ("X <- Z -> Y", "X -> Y -> N -> Y", "X -> M -> Y <- Z"):
        assert score(replace_slot(trace, "DERIVATION", base % bad), p).bits[3] == 0, bad


# ---- B5: path / backdoor_path against brute-force enumeration --------------------------------
def _oracle_paths(g, a, b, backdoor):
    """Every simple typed path a..b: networkx simple paths on the skeleton times the edge types."""
    sk = nx.Graph()
    sk.add_nodes_from(g.nodes)
    sk.add_edges_from(g.directed)
    sk.add_edges_from(g.bidirected)
    out = []
    for nodes in nx.all_simple_paths(sk, a, b):
        present = [(("->", g.has_edge(u, v)), ("<-", g.has_edge(v, u)), ("<->", g.has_edge(u, v, "<->")))
                   for u, v in zip(nodes, nodes[1:])]
        options = [[t for t, ok in edge if ok] for edge in present]
        out += [(tuple(nodes), ts) for ts in itertools.product(*options) if not (backdoor and ts[0] == "->")]
    return out


def test_paths_match_brute_force_enumeration():
    rng = random.Random(8)
    for i in range(400):
        n = rng.randint(2, 8)
        if i % 2:
            g = random_admg(rng, n, rng.choice([0.2, 0.5, 0.8]), rng.choice([0.0, 0.3]))
        else:
            g = random_dag(rng, n, rng.choice([0.2, 0.5, 0.9]))
        a, b = rng.sample(list(g.nodes), 2)
        for task, ends, backdoor in (("path", ("source", "target"), False),
                                     ("backdoor_path", ("treatment", "outcome"), True)):
            fam = get_family(task)
            every = _oracle_paths(g, a, b, backdoor)
            lens = [len(t) for _, t in every]
            for variant in ("any", "shortest", "longest"):
                p = Problem(task=task, graph=g, query={ends[0]: a, ends[1]: b, "variant": variant})
                q = fam.normalize_query(p)
                size = {"shortest": min(lens, default=0), "longest": max(lens, default=0)}.get(variant)
                want = [x for x in every if size is None or len(x[1]) == size]
                got = fam.validity_class(g, q)
                assert grade(p, "none") == (not every)
                if not every:
                    assert got == [((), None)]
                    continue
                assert sorted(got) == sorted(want), (g.edges_text(), a, b, task, variant)
                k = rng.randint(1, 4)
                assert fam.validity_class(g, q, limit=k) == got[:k]
                for nodes, types in rng.sample(every, min(4, len(every))):
                    assert grade(p, fam.format_object((nodes, types))) == ((nodes, types) in want)


def _complete_dag(n):
    names = [f"V{i}" for i in range(n)]
    edges = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n)]
    return CausalGraph.build(names, edges, (), GraphClass.DAG)


@pytest.mark.parametrize("n", [11, 12, 14])
def test_dense_longest_and_shortest_are_gradeable(n):
    g = _complete_dag(n)
    fam = get_family("path")
    last = f"V{n - 1}"
    longest = Problem(task="path", graph=g, query={"source": "V0", "target": last, "variant": "longest"})
    shortest = Problem(task="path", graph=g, query={"source": "V0", "target": last, "variant": "shortest"})
    hamilton = " -> ".join(f"V{i}" for i in range(n))
    assert grade(longest, hamilton) and not grade(longest, f"V0 -> V1 -> {last}")
    assert grade(shortest, f"V0 -> {last}") and not grade(shortest, f"V0 -> V1 -> {last}")
    for p, answer in ((longest, hamilton), (shortest, f"V0 -> {last}")):
        assert score(fam.canonical_trace(p, answer), p).bits == [1] * 6
    assert len(fam.validity_class(g, fam.normalize_query(shortest), limit=5)) == 1
    assert len(fam.validity_class(g, fam.normalize_query(longest), limit=5)) == 5


def test_beyond_the_work_limit_longest_fails_closed(monkeypatch, fresh_memos):
    monkeypatch.setattr(P, "WORK_LIMIT", 3)
    g = random_dag(random.Random(9), 9, 0.5)
    fam = get_family("path")
    a, b = g.nodes[0], g.nodes[-1]
    every = _oracle_paths(g, a, b, False)
    best = max(every, key=lambda x: len(x[1]))
    p = Problem(task="path", graph=g, query={"source": a, "target": b, "variant": "longest"})
    with pytest.raises(ProblemError, match="too large to grade"):
        grade(p, fam.format_object(best))
    trace = fam.canonical_trace(p, best)
    result = score(trace, p)
    assert result.bits[2] == 0 and "too large to grade" in result.reasons["STRATEGY"]
    invalid_claim = replace_slot(trace, "RESULT", "invalid")
    assert score(invalid_claim, p).bits[4] == 0  # an unknown predicate earns no RESULT bit either way
    shortest = Problem(task="path", graph=g, query={"source": a, "target": b, "variant": "shortest"})
    short = min(every, key=lambda x: len(x[1]))
    assert grade(shortest, fam.format_object(short))  # BFS needs no work limit
