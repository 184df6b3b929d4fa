"""Audits on synthetic traces: renaming leaves every score unchanged, an answer swap on a
max-score trace gives exactly 3, witness damage exactly 5; corruption ladder and strict-ATE guards."""

from pathlib import Path

import numpy as np
import pytest
from fixtures import backdoor_problem, build_pool, trace_for

from calver.evaluation.audit_runs import audit_summary, graph_ladder, strict_ate_audit
from calver.evaluation.audits import (
    LADDER,
    corrupt_graph,
    damage_witness,
    rename_nodes,
    rename_text,
    replace_slot,
    swap_answer,
)
from calver.evaluation.units import load_units
from calver.verifier import Problem, get_family, grade, parse_graph, score
from calver.verifier.graph import CausalGraph


def _p(task, query, graph, pid, kind=None):
    return Problem(task=task, query=query, graph=parse_graph(graph, kind=kind), id=pid)


SET_CASES = [
    (_p("backdoor_set", {"treatment": "X", "outcome": "Y", "variant": "any"},
        "P -> U, U -> X, U -> Y, X -> M, M -> Y", "bd"), {"U"}),
    (_p("backdoor_set", {"treatment": "X", "outcome": "Y", "variant": "any"},
        "P -> U, U -> X, U -> Y, X -> M, M -> Y", "bd2"), {"U", "P"}),
    (_p("backdoor_set", {"treatment": "X", "outcome": "Y", "variant": "minimal"},
        "X -> Y, X <-> W, W -> Y, V -> W", "bda", "ADMG"), {"W"}),
    (_p("separation_set", {"x": ["A"], "y": ["C"], "variant": "any"},
        "A -> B, B -> C, D -> A, D -> C", "sep"), {"B", "D"}),
    (_p("mediator", {"treatment": "X", "outcome": "Y", "variant": "any"},
        "X -> M, M -> Y, X -> N, N -> Y, X -> Y", "med"), {"N"}),
    (_p("frontdoor_set", {"treatment": "X", "outcome": "Y", "variant": "any"},
        "U -> X, U -> Y, X -> M, M -> Y", "fd"), {"M"}),
    (_p("blocking_set", {"path": "A <- B -> C", "variant": "any"}, "B -> A, B -> C, A -> D", "blk"), {"B"}),
    (_p("cycle_witness", {"variant": "any"}, "A -> B, B -> C, C -> A, C -> D", "cyc", "directed"), ("A", "B", "C")),
]
BOOL_CASE = (_p("intervention_reachability", {"do": ["M"], "source": "X", "target": "Y"},
                "X -> M, M -> Y, X -> Y", "int"), True)
ALL_CASES = SET_CASES + [BOOL_CASE]
ids = [p.id for p, _ in ALL_CASES]


@pytest.mark.parametrize("problem,obj", ALL_CASES, ids=ids)
def test_canonical_traces_are_max_score(problem, obj):
    assert score(trace_for(problem, obj), problem).total == 6


@pytest.mark.parametrize("problem,obj", ALL_CASES, ids=ids)
def test_renaming_leaves_every_bit_unchanged(problem, obj):
    fam = get_family(problem.task)
    valid = trace_for(problem, obj)
    texts = [valid, replace_slot(valid, "ANSWER", "{}") if fam.answer_type == "set" else valid]
    for seed in range(3):
        for t in texts:
            t2, p2 = rename_nodes(t, problem, rng=seed)
            assert t2 != t
            assert score(t2, p2).bits == score(t, problem).bits
            assert set(p2.graph.nodes).isdisjoint(problem.graph.nodes)


@pytest.mark.parametrize("problem,obj", SET_CASES, ids=[p.id for p, _ in SET_CASES])
def test_answer_swap_on_max_score_gives_exactly_three(problem, obj):
    t = trace_for(problem, obj)
    for seed in range(3):
        s = swap_answer(t, problem, rng=seed)
        assert s is not None
        sc = score(s, problem)
        assert sc.total == 3
        assert sc.bits == [1, 1, 0, 1, 0, 0]
        assert not grade(problem, sc.answer)


def test_answer_swap_on_bool_task_is_invalid_and_lowers_score():
    problem, obj = BOOL_CASE
    s = swap_answer(trace_for(problem, obj), problem)
    sc = score(s, problem)
    assert not grade(problem, sc.answer)
    assert sc.total < 6  # the bool family recomputes RESULT from the graph: 4 here (see report)


@pytest.mark.parametrize("problem,obj", ALL_CASES, ids=ids)
def test_witness_damage_gives_exactly_five(problem, obj):
    t = trace_for(problem, obj)
    d = damage_witness(t, problem)
    assert d is not None and d != t
    sc = score(d, problem)
    assert sc.total == 5 and sc.bits[3] == 0


def test_damage_none_without_witness():
    p = backdoor_problem(graph="X -> Y, Z -> Y")  # no backdoor path: derivation lists none
    assert damage_witness(trace_for(p, set()), p) is None


def test_rename_text_keeps_keys_and_operations():
    out = rename_text("op(X=X, Y=Y) X -> Y", {"X": "A1", "Y": "B2"})
    assert out == "op(X=A1, Y=B2) A1 -> B2"


@pytest.mark.parametrize("kind", LADDER)
def test_corrupt_graph_ladder_shapes(kind):
    g = parse_graph("A -> B, B -> C, C -> D, A -> D, E -> A, E -> C, F -> E, F -> B, B -> D, A -> C")
    h = corrupt_graph(g, kind, 0.1, np.random.default_rng(0))
    assert set(h.nodes) == set(g.nodes)
    assert h.acyclic
    n = len(g.directed)
    if kind == "clean":
        assert h == g
    elif kind == "delete":
        assert len(h.directed) == n - 1 and h.directed < g.directed
    elif kind == "add":
        assert len(h.directed) == n + 1 and g.directed < h.directed
    elif kind == "reverse":
        assert len(h.directed) == n and len(h.directed - g.directed) == 1
    elif kind == "random":
        assert len(h.directed) == n
    elif kind == "reverse_all":
        assert h.directed == {(b, a) for a, b in g.directed}
    with pytest.raises(ValueError):
        corrupt_graph(g, "shuffle")
    # the same graph with its nodes listed in another order gets the same corruption, in its own node order
    listed = CausalGraph.build(["F", "D", "A", "C", "E", "B"], sorted(g.directed))
    again = corrupt_graph(listed, kind, 0.1, np.random.default_rng(0))
    assert again == h and again.nodes == listed.nodes


def test_pool_audits_and_ladder(tmp_path):
    p = backdoor_problem()
    build_pool(str(tmp_path), [(p, 0, [{"M"}, {"U"}, {"M"}, {"U", "P"}, {"M"}, {"U"}, {"U", "P"}, set()])])
    units = load_units(str(tmp_path))
    a = audit_summary(units)
    assert a["rename"]["n"] == 8 and a["rename"]["unchanged"] == 8
    assert a["swap"]["distribution"] == {3: 4} and a["swap"]["lost_max"] == 4
    assert a["damage"]["distribution"] == {5: 4}
    lad = graph_ladder(units, draws=100)
    assert [r["rung"] for r in lad["rungs"]] == list(LADDER)
    assert lad["rungs"][0]["lift"]["mean_diff"] == 1.0 and lad["rungs"][0]["retained"] == 1.0
    for r in lad["rungs"]:
        assert r["plurality"] == 0.0 and r["lift"]["draws"] == 100


ATE_CPTS = ["P(W=1) = 0.5", "P(Z=1) = 0.4", "P(X=1 | W=0, Z=0) = 0.2", "P(X=1 | W=0, Z=1) = 0.6",
            "P(X=1 | W=1, Z=0) = 0.4", "P(X=1 | W=1, Z=1) = 0.8", "P(Y=1 | Z=0, X=0) = 0.2",
            "P(Y=1 | Z=0, X=1) = 0.35", "P(Y=1 | Z=1, X=0) = 0.5", "P(Y=1 | Z=1, X=1) = 0.7"]


def _ate_problem(threshold):
    # psi(P; X, Y, {Z}) = 0.6 * 0.15 + 0.4 * 0.2 = 0.17 = the true ATE
    return Problem(task="ate_threshold", query={"treatment": "X", "outcome": "Y", "threshold": threshold},
                   graph=parse_graph("W -> X, Z -> X, Z -> Y, X -> Y"), data={"epsilon": 0.01, "cpts": ATE_CPTS},
                   id=f"ate{threshold}")


def test_strict_ate_audit_margin_guard(tmp_path):
    far, near = _ate_problem(0.1), _ate_problem(0.175)
    fam = get_family("ate_threshold")
    good = fam.canonical_trace(far, {"Z"})
    # inside the band: report 0.178 (|0.178 - psi| <= eps) and answer yes although the truth is no
    bad = fam.canonical_trace(near, {"Z"})
    bad = replace_slot(bad, "RESULT", "0.178")
    derivation = bad.split("DERIVATION: ")[1].split("\n")[0]
    bad = replace_slot(bad, "DERIVATION", derivation.replace("effect=0.170000", "effect=0.178"))
    bad = replace_slot(bad, "ANSWER", "yes")
    # b6 judges the decision on the exact effect, so the wrong "yes" inside the band is not max-score
    assert score(good, far).total == 6 and score(bad, near).bits == [1, 1, 1, 1, 1, 0]
    build_pool(str(tmp_path), [(far, 0, [good, good]), (near, 0, [bad, fam.canonical_trace(near, {"Z"})])],
               raw_texts=True)
    res = strict_ate_audit(load_units(str(tmp_path)))
    assert res["n_units"] == 2 and res["n_max_score"] == 3
    assert (res["n_correct"], res["n_wrong"]) == (3, 0) and res["unexplained"] == 0
    # the right "no" inside the band is max-score but not certified (decision margin): 2 certified
    assert res["certified"] == 2 and res["certified_wrong"] == 0  # Theorem 1: no certified trace is wrong


def test_strict_ate_audit_without_ate_units(tmp_path):
    p = backdoor_problem()
    build_pool(str(tmp_path), [(p, 0, [{"U"}])])
    res = strict_ate_audit(load_units(str(tmp_path)))
    assert res["n_units"] == 0 and res["n_wrong"] == 0


def test_ate_pool_audits_rename_and_ladder_skip(tmp_path):
    far = _ate_problem(0.1)
    fam = get_family("ate_threshold")
    t = fam.canonical_trace(far, {"Z"})
    t2, p2 = rename_nodes(t, far, rng=1)
    assert score(t2, p2).bits == [1] * 6  # CPT text is renamed with the graph
    build_pool(str(tmp_path), [(far, 0, [t, fam.canonical_trace(far, {"Z", "W"})])], raw_texts=True)
    units = load_units(str(tmp_path))
    a = audit_summary(units)
    assert a["rename"]["unchanged"] == 2 and a["n_errors"] == 0
    assert a["swap"]["applied_max_score"] == 2 and all(k < 6 for k in a["swap"]["distribution"])
    lad = graph_ladder(units, draws=50)
    assert lad["n_skipped_problems"] == 1 and lad["rungs"] == []  # corrupted graphs no longer match the CPTs


@pytest.mark.parametrize("task", ["path", "backdoor_path", "cycle_witness"])
def test_answer_swap_on_path_valued_tasks_scores_exactly_3(task):
    import random as _random

    from fixtures import sample_problem

    from calver.verifier import get_family, score

    rng = _random.Random(5)
    for _ in range(10):
        problem, valid = sample_problem(task, rng)
        trace = get_family(task).canonical_trace(problem, valid[0])
        swapped = swap_answer(trace, problem, 0)
        assert swapped is not None and score(swapped, problem).total == 3


def test_answer_swap_on_knights_and_knaves_flips_a_role():
    import json as _json

    from calver.verifier import Problem, score

    root = Path(__file__).resolve().parents[1] / "docs" / "examples"
    problem = Problem.from_dict(_json.loads((root / "kk_problem.json").read_text()))
    swapped = swap_answer((root / "kk_trace.txt").read_text(), problem, 0)
    assert swapped is not None and score(swapped, problem).bits == [1, 1, 1, 1, 1, 0]
