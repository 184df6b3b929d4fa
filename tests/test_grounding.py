"""Reward safety: a trace is judged on the problem's source, never on a structure it invents.

Constructed-mode problems that keep their source graph (every generator's do) judge b1 against that
graph and b3-b6 on it; a sourceless one is flagged ``grounded=False`` and refused by the reward.
``ate_threshold`` decisions are judged against the exact effect from the CPTs. Oracles: the source
graph's own predicate (``grade``), and the exact ATE by brute-force enumeration of the joint.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from calver.data_gen.ate import generate_ate
from calver.data_gen.generators import GenConfig, generate
from calver.data_gen.text_levels import constructed_problems
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import strip_problem
from calver.train.rewards import UngroundedProblemError, VerifierReward
from calver.verifier import CausalGraph, GraphClass, Problem, get_family, grade, score
from calver.verifier.scoring import is_grounded

FAMILIES = ("backdoor_set", "separation_set", "mediator", "intervention_reachability")
REPRO = Path(__file__).parent / "data" / "repro"


@pytest.fixture
def repro():
    def load(name: str) -> tuple[Problem, str]:
        prob = Problem.from_dict(json.loads((REPRO / f"{name}_problem.json").read_text()))
        return prob, (REPRO / f"{name}_trace.txt").read_text()

    return load


def _constructed(task: str, n: int = 40, seed: int = 3, level: int = 1) -> list[Problem]:
    probs = generate(task, n, GenConfig(seed=seed, n_nodes=(5, 8)))
    kept, _ = constructed_problems(probs, level, random.Random(seed))
    assert kept, f"no {task} item survived the round trip"
    return kept


def _invented(p: Problem, rng: random.Random) -> list[CausalGraph]:
    """Graphs a hostile policy could write instead of the described one: edge subsets and the
    edgeless graph over the prompt's variables (the audit's attack)."""
    g = p.graph
    edges = sorted(g.directed)
    out = [CausalGraph.build(list(p.variables), [], (), g.kind if g.kind is not GraphClass.ADMG else GraphClass.DAG)]
    for _ in range(4):
        keep = [e for e in edges if rng.random() < 0.5]
        try:
            out.append(CausalGraph.build(list(p.variables), keep, (), g.kind))
        except Exception:  # noqa: BLE001 - a subset of a DAG stays a DAG; other kinds may refuse
            continue
    return [h for h in out if h != g]


@pytest.mark.parametrize("task", FAMILIES)
def test_invented_graph_never_scores_a_wrong_answer_six(task):
    """The audit's A1 attack on every admitted constructed item: write an invented graph, answer
    what is valid on it. Every such wrong answer loses b1 and is judged on the source graph."""
    rng = random.Random(11)
    fam = get_family(task)
    attacks = wrong = 0
    for p in _constructed(task):
        assert is_grounded(p)
        q = fam.normalize_query(p)
        for h in _invented(p, rng):
            try:
                objs = fam.validity_class(h, q)[:8]
            except Exception:  # noqa: BLE001 - e.g. a variant with no answer on h
                continue
            for obj in objs:
                trace = fam.canonical_trace(replace(p, graph=h, mode="supplied"), obj)
                ts = score(trace, p)
                attacks += 1
                assert ts.bits[0] == 0, ts.reasons
                assert ts.grounded
                if not grade(p, obj):
                    wrong += 1
                    assert ts.total < 6, (p.id, trace)
    assert attacks > 20 and wrong > 0


@pytest.mark.parametrize("task", FAMILIES)
def test_canonical_constructed_traces_still_score_six(task):
    for p in _constructed(task, n=15):
        fam = get_family(task)
        objs = fam.validity_class(p.graph, fam.normalize_query(p))  # whole class: variants filter it
        for obj in objs[:3]:
            ts = score(fam.canonical_trace(p, obj), p)
            assert ts.total == 6, ts.reasons
            assert grade(p, obj)


def test_isolated_variable_may_be_left_out():
    g = CausalGraph.build(["X", "Y", "Z", "W"], [("Z", "X"), ("Z", "Y"), ("X", "Y")], (), GraphClass.DAG)
    p = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y"}, graph=g, mode="constructed",
                text="...", variables=("X", "Y", "Z", "W"))
    trace = get_family("backdoor_set").canonical_trace(p, {"Z"})
    assert score(trace, p).total == 6
    trace_without_w = replace_slot(trace, "GRAPH", "X -> Y, Z -> X, Z -> Y")
    assert score(trace_without_w, p).total == 6
    extra_edge = replace_slot(trace, "GRAPH", "X -> Y, Z -> X, Z -> Y, W -> Y")
    ts = score(extra_edge, p)
    assert ts.bits[0] == 0 and "extra edge" in ts.reasons["GRAPH"]


def test_sourceless_problem_is_flagged_and_scored_on_its_own_graph():
    p = _constructed("backdoor_set", n=10)[0]
    sourceless = strip_problem(p)  # the label firewall drops the source graph in constructed mode
    assert sourceless.graph is None and not is_grounded(sourceless)
    fam = get_family("backdoor_set")
    obj = fam.validity_class(p.graph, fam.normalize_query(p))[0]
    ts = score(fam.canonical_trace(p, obj), sourceless)
    assert ts.total == 6 and ts.grounded is False and ts.to_dict()["grounded"] is False
    assert score(fam.canonical_trace(p, obj), p).grounded is True


def test_reward_refuses_sourceless_constructed_problems_unless_asked():
    p = _constructed("backdoor_set", n=10)[0]
    fam = get_family("backdoor_set")
    obj = fam.validity_class(p.graph, fam.normalize_query(p))[0]
    trace = fam.canonical_trace(p, obj)
    stripped = json.dumps(strip_problem(p).to_dict())
    with pytest.raises(UngroundedProblemError, match="allow_ungrounded"):
        VerifierReward()(["q"], [trace], problem_json=[stripped])
    assert VerifierReward(allow_ungrounded=True)(["q"], [trace], problem_json=[stripped]) == [1.0]
    assert VerifierReward()(["q"], [trace], problem_json=[json.dumps(p.to_dict())]) == [1.0]


def test_constructed_repro_loses_b1_and_is_judged_on_the_source(repro):
    p, trace = repro("bd_constructed")
    ts = score(trace, p)
    assert ts.bits[0] == 0 and ts.bits[2] == 0 and ts.total < 6
    assert not grade(p, ts.answer)


# ---- ate_threshold: decisions against the exact effect ---------------------------------------------


def _brute_ate(p: Problem) -> float:
    """P(Y=1|do(X=1)) - P(Y=1|do(X=0)) by enumerating every assignment of the mutilated model
    (X's CPT replaced by the point mass), in pure Python."""
    fam = get_family("ate_threshold")
    scm = fam.scm(p)
    q = fam.normalize_query(p)
    x, y = q["treatment"], q["outcome"]
    nodes = list(scm.nodes)
    arms = []
    for xv in (1, 0):
        tot = 0.0
        for vals in itertools.product((0, 1), repeat=len(nodes)):
            a = dict(zip(nodes, vals))
            if a[x] != xv:
                continue
            pr = 1.0
            for v in nodes:
                if v == x:
                    continue
                i = 0
                for par in scm.parents[v]:
                    i = (i << 1) | a[par]
                p1 = float(scm.p1[v][i])
                pr *= p1 if a[v] else 1.0 - p1
            tot += pr * a[y]
        arms.append(tot)
    return arms[0] - arms[1]


def _margin_trace(p: Problem, theta: float, decision: bool) -> str:
    fam = get_family("ate_threshold")
    base = fam.canonical_trace(p)
    z = fam.default_adjustment(p)
    q = fam.normalize_query(p)
    deriv = (f"backdoor_adjust(treatment={q['treatment']}, outcome={q['outcome']}, adjustment="
             + "{" + ", ".join(sorted(z)) + "}" + f", effect={theta:.6f})")
    t = replace_slot(base, "DERIVATION", deriv)
    t = replace_slot(t, "RESULT", f"{theta:.6f}")
    return replace_slot(t, "ANSWER", "yes" if decision else "no")


def test_ate_wrong_decision_inside_the_margin_loses_b6():
    """The audit's A2 attack: an estimate within ε of ψ on the wrong side of τ, with the matching
    (wrong) decision. Problems drawn inside the margin on purpose; every attack must lose b6."""
    fam = get_family("ate_threshold")
    attacked = 0
    for idx in range(400):
        p = generate_ate(idx, seed=5, allow_within_epsilon=True, margin=(0.0, 0.012))
        q = fam.normalize_query(p)
        psi, tau, eps = fam.exact_effect(p), q["threshold"], q["epsilon"]
        truth = psi > tau
        # an estimate within ε of ψ that lies on the other side of τ, if one exists
        theta = tau - 1e-4 if truth else tau + 1e-4
        if abs(theta - psi) > eps:
            continue
        attacked += 1
        ts = score(_margin_trace(p, theta, not truth), p)
        assert ts.bits[5] == 0 and ts.total < 6, ts.reasons
        assert grade(p, not truth) is False
        honest = score(_margin_trace(p, theta, truth), p)  # right decision, estimate inside the margin
        assert honest.bits[5] == 1, honest.reasons
    assert attacked > 50


def test_exact_effect_matches_brute_force():
    fam = get_family("ate_threshold")
    for idx in range(60):
        p = generate_ate(idx, seed=9, n_nodes=random.Random(idx).randint(3, 7))
        assert abs(fam.exact_effect(p) - _brute_ate(p)) < 1e-12


def test_generator_keeps_thresholds_clear_of_the_margin():
    fam = get_family("ate_threshold")
    for idx in range(500):
        p = generate_ate(idx, seed=1)
        q = fam.normalize_query(p)
        assert abs(fam.exact_effect(p) - q["threshold"]) > q["epsilon"]
    with pytest.raises(ValueError, match="margin"):
        generate_ate(0, seed=0, margin=(0.0, 0.01))


def test_ate_repro_margin_trace_is_not_six(repro):
    p, trace = repro("ate_margin")
    ts = score(trace, p)
    assert ts.bits[5] == 0 and ts.total == 5
    assert not grade(p, ts.answer)


# ---- the per-problem slot memo is bounded in bytes ------------------------------------------------


def test_slot_memo_is_bounded(memo_budget):
    """A long run samples ever new GRAPH texts for one problem: the memo must not keep them all."""
    from calver.verifier import memo as memos
    from calver.verifier import prepare

    budget = 256 * 1024
    memo_budget(budget)
    g = CausalGraph.build([f"V{i}" for i in range(12)], [(f"V{i}", f"V{i + 1}") for i in range(11)], (), GraphClass.DAG)
    p = Problem(task="backdoor_set", query={"treatment": "V0", "outcome": "V11"}, graph=g)
    base = get_family("backdoor_set").canonical_trace(p, set())
    edges = [f"V{i} -> V{i + 1}" for i in range(11)]
    rng = random.Random(0)
    peak = 0
    for _ in range(3000):
        rng.shuffle(edges)  # the same graph written in a new order: a new memo key each time
        assert score(replace_slot(base, "GRAPH", ", ".join(edges)), p).total == 6
        memo = prepare(p).memo  # emptied whenever the budget drops every memo
        peak = max(peak, len(memo))
        graph_chars = sum(len(k[1]) for k in memo if isinstance(k, tuple) and k[0] == "GRAPH")
        assert 32 * graph_chars <= budget and len(memo) <= budget // 512 + 1
        assert memos.usage()[0] <= budget
    assert len(memo) < 3000  # it was emptied at least once
    assert peak > 10  # and refilled in between


def test_grading_a_graphless_problem_is_a_problem_error_never_a_crash():
    """Every family: grading a problem without the graph it needs raises the documented ProblemError (or
    returns a bool), whatever the answer; an AttributeError escaped for intervention problems."""
    from calver.verifier import ProblemError, families

    for name in families():
        p = Problem(task=name, query=dict(get_family(name).example_query), id="g")
        for answer in (True, "{X}", ["X", "Y"], {"A": "knight"}, None, 0.5, "yes"):
            try:
                assert isinstance(grade(p, answer), bool)
            except ProblemError:
                pass
