"""ate_threshold decides θ > τ exactly (audit 2026-12-01 F1), ψ for a new Z is cheap (F11-b), the
firewall view of a constructed problem scores like the full problem (F8), and a non-decision ANSWER is
no parsed answer for the tie rule (F9).

Oracle: an exact rational truncated factorisation over the CPT *text*, written here (brute force over
every assignment, ``fractions.Fraction``), independent of calver's SCM code."""

from __future__ import annotations

import itertools
import json
import random
import time
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.data_gen.text_levels import constructed_problems
from calver.infer.firewall import strip_problem
from calver.verifier import Problem, ProblemError, grade, score, select
from calver.verifier import scm as scm_mod
from calver.verifier.budget import TooLargeToGrade
from calver.verifier.contract import assemble_trace
from calver.verifier.registry import get_family
from calver.verifier.scm import BinarySCM, cached_joint, decide_ate, parse_cpt_text
from calver.verifier.scm_exact import exact_ate, exact_cost, exact_decimal, exact_number, format_exact

DATA = Path(__file__).resolve().parent / "data" / "repro-2026-12-01"
FAM = get_family("ate_threshold")
VALUES = ["0", "1", "0.05", "0.1", "0.2", "0.25", "0.3", "0.35", "0.4", "0.45", "0.5", "0.6", "0.7", "0.75",
          "0.85", "0.9", "0.95", "0.125", "0.333"]


# ---- the oracle ---------------------------------------------------------------------------------
def oracle_cpt(lines: list[str]) -> dict[str, dict[frozenset, Fraction]]:
    cpt: dict[str, dict[frozenset, Fraction]] = {}
    for line in lines:
        lhs, val = line.split(" = ")
        inner = lhs[2:-1]
        v, cond = (inner.split(" | ") + [""])[:2]
        key = frozenset((c.split("=")[0], int(c.split("=")[1])) for c in cond.split(", ") if c)
        cpt.setdefault(v.split("=")[0], {})[key] = Fraction(val)
    return cpt


def oracle_ate(lines: list[str], x: str, y: str) -> Fraction:
    cpt = oracle_cpt(lines)
    nodes = sorted(cpt)

    def p_do(xv: int) -> Fraction:
        tot = Fraction(0)
        for bits in itertools.product((0, 1), repeat=len(nodes)):
            a = dict(zip(nodes, bits))
            if a[x] != xv or not a[y]:
                continue
            pr = Fraction(1)
            for v in nodes:
                if v == x:
                    continue
                q = next(val for k, val in cpt[v].items() if all(a[n] == b for n, b in k))
                pr *= q if a[v] else 1 - q
            tot += pr
        return tot

    return p_do(1) - p_do(0)


def random_lines(rng: random.Random, n: int, max_parents: int = 3) -> tuple[list[str], dict[str, list[str]]]:
    nodes = [f"V{i}" for i in range(n)]
    pa = {v: rng.sample(nodes[:i], min(i, rng.randint(0, max_parents))) for i, v in enumerate(nodes)}
    lines = []
    for v in nodes:
        k = len(pa[v])
        for i in range(2 ** k):
            cond = ", ".join(f"{p}={(i >> (k - 1 - j)) & 1}" for j, p in enumerate(pa[v]))
            lines.append(f"P({v}=1{' | ' + cond if cond else ''}) = {rng.choice(VALUES)}")
    return lines, pa


def problem_from(lines: list[str], pa: dict[str, list[str]], x: str, y: str, tau, eps=0.01) -> Problem:
    edges = ", ".join([f"{p} -> {v}" for v in pa for p in pa[v]] + list(pa))
    return Problem.from_dict({"task": "ate_threshold", "graph": edges, "graph_class": "DAG",
                              "query": {"treatment": x, "outcome": y, "threshold": tau},
                              "data": {"cpts": lines, "epsilon": eps}})


def descendants_of(pa: dict[str, list[str]], x: str) -> set[str]:
    out, stack = set(), [x]
    while stack:
        u = stack.pop()
        for w, ps in pa.items():
            if u in ps and w not in out:
                out.add(w)
                stack.append(w)
    return out


def trace(x: str, y: str, tau: str, result: str, answer: str, p1: str = "", p0: str = "", z: str = "{}") -> str:
    arms = f", p1={p1}, p0={p0}" if p1 else ""
    return assemble_trace({
        "GRAPH": f"{x} -> {y}",
        "QUERY": f"task=ate_threshold; treatment={x}; outcome={y}; threshold={tau}; graph=DAG",
        "STRATEGY": z,
        "DERIVATION": f"backdoor_adjust(treatment={x}, outcome={y}, adjustment={z}{arms}, effect={result})",
        "RESULT": result,
        "ANSWER": answer,
    })


def xy_problem(p1x1: str, p1x0: str, tau, px: str = "0.5", eps=0.01) -> Problem:
    return Problem.from_dict({"task": "ate_threshold", "graph": "X -> Y", "graph_class": "DAG",
                              "query": {"treatment": "X", "outcome": "Y", "threshold": tau},
                              "data": {"epsilon": eps, "cpts": [f"P(X=1) = {px}", f"P(Y=1 | X=0) = {p1x0}",
                                                                f"P(Y=1 | X=1) = {p1x1}"]}})


# ---- F1: the two repros ----------------------------------------------------------------------------
def test_zero_effect_repro_no_is_right_and_yes_loses_b6():
    p = Problem.from_dict(json.loads((DATA / "ate_zero_effect_problem.json").read_text()))
    yes = (DATA / "ate_zero_effect_trace.txt").read_text()
    no = yes.replace("ANSWER: yes", "ANSWER: no")
    assert oracle_ate(p.data["cpts"], "V0", "V2") == 0 and FAM.exact_effect(p) == 0
    s_no, s_yes = score(no, p), score(yes, p)
    assert s_no.bits == [1] * 6 and grade(p, s_no.answer) is True
    assert s_yes.bits == [1, 1, 1, 1, 1, 0] and grade(p, s_yes.answer) is False
    assert "exactly 0, not above the threshold 0" in s_yes.reasons["ANSWER"]


def test_decimal_tie_repro():
    p = xy_problem("0.4", "0.1", 0.3)
    assert FAM.exact_effect(p) == Fraction(3, 10)
    for answer, bits in (("yes", [1, 1, 1, 1, 1, 0]), ("no", [1] * 6)):
        s = score(trace("X", "Y", "0.3", "0.3", answer, "0.4", "0.1"), p)
        assert s.bits == bits, s.reasons
        assert grade(p, s.answer) is (answer == "no")
    reason = score(trace("X", "Y", "0.3", "0.3", "yes", "0.4", "0.1"), p).reasons["ANSWER"]
    assert "exactly 3/10 = 0.3, not above the threshold 0.3" in reason


def test_all_two_decimal_ties_of_x_to_y():
    vals = [f"{i / 20:.2f}" for i in range(1, 20)]
    ties = 0
    for a, b in itertools.product(vals, vals):
        exact = Fraction(a) - Fraction(b)
        tau = f"{float(exact):.2f}"
        if exact <= 0 or Fraction(tau) != exact:
            continue
        ties += 1
        p = xy_problem(a, b, float(tau))
        assert oracle_ate(p.data["cpts"], "X", "Y") == exact == FAM.exact_effect(p)
        assert grade(p, False) and not grade(p, True)
        assert score(trace("X", "Y", tau, tau, "no", a, b), p).total == 6
        s = score(trace("X", "Y", tau, tau, "yes", a, b), p)
        assert s.bits == [1, 1, 1, 1, 1, 0], (a, b, s.bits)
    assert ties == 171


def test_zero_effect_scms_against_the_oracle():
    rng = random.Random(5)
    checked = 0
    while checked < 300:
        lines, pa = random_lines(rng, rng.randint(3, 7), 2)
        xs = [v for v in pa if any(v in ps for ps in pa.values())]
        if not xs:
            continue
        x = rng.choice(xs)
        ys = [v for v in pa if v != x and v not in descendants_of(pa, x)]
        if not ys:
            continue
        y = rng.choice(ys)
        p = problem_from(lines, pa, x, y, 0.0)
        assert oracle_ate(lines, x, y) == 0 == FAM.exact_effect(p)
        assert grade(p, False) and not grade(p, True), (lines, x, y)
        checked += 1


# ---- F1: exact decisions on random SCMs -------------------------------------------------------------
def _check_decision(lines, pa, x, y, tau_text: str) -> None:
    theta = oracle_ate(lines, x, y)
    tau = Fraction(tau_text)
    p = problem_from(lines, pa, x, y, tau_text)  # a string threshold keeps every digit
    assert FAM.exact_effect(p) == theta
    assert grade(p, True) is (theta > tau) and grade(p, False) is (theta <= tau)
    scm = FAM.scm(p)
    try:
        forced = decide_ate(scm, x, y, tau, max_cost=-1)  # the float-estimate path where it decides
    except TooLargeToGrade:  # within the float margin of τ: it fails closed rather than guess
        assert abs(theta - tau) < Fraction(1, 10**8)
    else:
        assert forced.exceeds is (theta > tau) and forced.theta is None


def _tau_for(theta: Fraction, pick: int, rng: random.Random) -> str:
    if pick == 0:
        return format_exact(theta) if "/" not in format_exact(theta) else str(float(theta))
    if pick == 1:
        return format_exact(theta + Fraction(rng.choice((-1, 1)), 10**12))
    return f"{rng.uniform(-0.5, 0.5):.2f}"


def test_exact_decision_matches_the_oracle_on_random_scms():
    rng = random.Random(11)
    ties = 0
    for _ in range(250):
        lines, pa = random_lines(rng, rng.randint(2, 6))
        x, y = rng.sample(sorted(pa), 2)
        theta = oracle_ate(lines, x, y)
        pick = rng.randrange(3)
        tau = _tau_for(theta, pick, rng)
        ties += Fraction(tau) == theta
        _check_decision(lines, pa, x, y, tau)
    assert ties > 50


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 6), pick=st.integers(0, 2))
def test_exact_decision_property(seed, n, pick):
    rng = random.Random(seed)
    lines, pa = random_lines(rng, n)
    x, y = rng.sample(sorted(pa), 2)
    _check_decision(lines, pa, x, y, _tau_for(oracle_ate(lines, x, y), pick, rng))


def test_mapping_floats_read_as_their_decimals():
    """A JSON float is the decimal it prints as: 0.4 − 0.1 is exactly 0.3 in the mapping form too."""
    p = Problem.from_dict({"task": "ate_threshold", "graph": "X -> Y", "graph_class": "DAG",
                           "query": {"treatment": "X", "outcome": "Y", "threshold": 0.3},
                           "data": {"cpts": {"X": {"parents": [], "p1": [0.5]},
                                             "Y": {"parents": ["X"], "p1": [0.1, 0.4]}}}})
    assert FAM.exact_effect(p) == Fraction(3, 10) and grade(p, False) and not grade(p, True)


def test_long_cpt_text_keeps_its_digits():
    """Past 15 significant digits the text's decimal, not its float, is the CPT value."""
    p = xy_problem("0.39999999999999999999", "0.1", 0.3)
    assert FAM.scm(p).p1[next(iter(FAM.scm(p).p1))].dtype.kind == "f"
    assert FAM.exact_effect(p) == Fraction("0.29999999999999999999")
    assert grade(p, False) and not grade(p, True)  # the floats say 0.30000000000000004 > 0.3
    with pytest.raises(ValueError, match="outside"):
        parse_cpt_text("P(X=1) = 1.00000000000000000001")
    with pytest.raises(ValueError, match="out of range"):
        parse_cpt_text("P(X=1) = 1e-999999")


def test_number_rule():
    assert exact_number(0.1) == Fraction(1, 10) and exact_number("0.35") == Fraction(7, 20)
    assert exact_number(" 1e-3 ") == Fraction(1, 1000) and exact_number(3) == 3
    assert exact_decimal("-.5") == Fraction(-1, 2) and exact_decimal("5.") == 5
    for bad in ("", "abc", "nan", "inf", "1" * 80, "1e999"):
        with pytest.raises(ValueError):
            exact_number(bad)
    with pytest.raises(ValueError):
        exact_number(True)
    assert format_exact(Fraction(3, 10)) == "0.3" and format_exact(Fraction(-7, 400)) == "-0.0175"


def test_result_margin_test_is_exact():
    """θ = 0.3 = τ, ε = 0.01, RESULT 0.31: |0.31 − 0.3| = ε exactly, which is not outside the margin
    (floats: 0.010000000000000009 > 0.01), so 'no' does not contradict RESULT."""
    p = xy_problem("0.4", "0.1", 0.3)
    s = score(trace("X", "Y", "0.3", "0.31", "no", "0.41", "0.1"), p)
    assert s.bits == [1] * 6, s.reasons
    s = score(trace("X", "Y", "0.3", "0.3101", "no", "0.41", "0.1"), p)  # outside: 'no' contradicts it
    assert s.bits[5] == 0 and "disagrees with RESULT 0.3101" in s.reasons["ANSWER"]


def test_result_with_too_many_digits_fails_b6_closed():
    p = xy_problem("0.4", "0.1", 0.2)
    s = score(trace("X", "Y", "0.2", "0.3" + "0" * 80 + "1", "yes"), p)
    assert s.bits[5] == 0 and "significant digits" in s.reasons["ANSWER"]


# ---- F1/F11: cost on the documented limit (20 variables) ---------------------------------------------
def _band_scm(n: int, k: int, digits: int | None, seed: int = 0) -> tuple[BinarySCM, list[str]]:
    rng = random.Random(seed)
    nodes = [f"V{i}" for i in range(n)]
    pa = {v: nodes[max(0, i - k):i] for i, v in enumerate(nodes)}
    draw = (lambda: round(rng.uniform(0.05, 0.95), digits)) if digits else (lambda: rng.uniform(0.001, 0.999))
    return BinarySCM.build(pa, {v: [draw() for _ in range(2 ** len(pa[v]))] for v in nodes}), nodes


def test_exact_ate_matches_float_on_dense_scms():
    from calver.verifier.scm import true_ate

    for k, digits in ((4, 2), (8, 4), (6, None)):
        scm, nodes = _band_scm(14, k, digits)
        assert abs(float(exact_ate(scm, nodes[0], nodes[-1])) - true_ate(scm, nodes[0], nodes[-1])) < 1e-12


def test_large_dense_scm_decides_within_budget():
    """A 20-variable SCM whose exact sum is too costly: the float estimate decides, exactly, and fast;
    at a tie with τ (within the float margin) the decision fails closed instead of running the exact sum."""
    scm, nodes = _band_scm(20, 14, None)
    x, y = nodes[0], nodes[-1]
    assert exact_cost(scm, x, y) > 8_000_000
    start = time.process_time()
    d = decide_ate(scm, x, y, Fraction(0))
    assert time.process_time() - start < 2.0
    assert d.theta is None and "within" in d.describe()
    small, sn = _band_scm(8, 3, None)
    theta = exact_ate(small, sn[0], sn[-1])
    assert decide_ate(small, sn[0], sn[-1], theta).exceeds is False  # within the cost limit: exact
    with pytest.raises(TooLargeToGrade, match="within 1e-09 of the threshold"):
        decide_ate(small, sn[0], sn[-1], theta, max_cost=-1)


def test_a_near_tie_past_the_cost_limit_fails_closed_in_score_and_grade(monkeypatch):
    from calver.verifier import scm

    p = xy_problem("0.4", "0.1", 0.3)  # θ = τ exactly
    monkeypatch.setattr(scm.decide_ate, "__defaults__", (-1,))  # every exact sum "too costly"
    for answer in ("yes", "no"):
        s = score(trace("X", "Y", "0.3", "0.3", answer, "0.4", "0.1"), p)
        assert s.bits[5] == 0 and "within 1e-09 of the threshold" in s.reasons["ANSWER"]
        with pytest.raises(ProblemError, match="too large to grade exactly"):
            grade(p, answer)


def test_new_adjustment_sets_reuse_the_joint():
    rng = random.Random(0)
    nodes = [f"V{i}" for i in range(20)]
    pa = {v: rng.sample(nodes[:i], min(i, rng.randint(0, 3))) for i, v in enumerate(nodes)}
    if "V10" not in pa["V19"]:
        pa["V19"].append("V10")
    cpts = {v: {"parents": pa[v], "p1": [round(rng.uniform(0.1, 0.9), 3) for _ in range(2 ** len(pa[v]))]}
            for v in nodes}
    p = Problem.from_dict({"task": "ate_threshold", "graph": ", ".join([f"{a} -> {v}" for v in nodes for a in pa[v]]
                                                                       + nodes),
                           "graph_class": "DAG", "query": {"treatment": "V10", "outcome": "V19", "threshold": 0.05},
                           "data": {"cpts": cpts}})
    base = FAM.canonical_trace(p)
    assert score(base, p).total == 6
    assert cached_joint(FAM.scm(p)) is cached_joint(FAM.scm(p))
    strat = next(line for line in base.split("\n") if line.startswith("STRATEGY: "))
    worst = 0.0
    for _ in range(6):
        z = "{" + ", ".join(sorted(rng.sample([v for v in nodes if v not in ("V10", "V19")], 3))) + "}"
        start = time.process_time()
        score(base.replace(strat, "STRATEGY: " + z), p)
        worst = max(worst, time.process_time() - start)
    assert worst < 0.5, worst  # a marginal of the cached 2^20 joint (rebuilding it took 70-210 ms)


def test_joint_cache_is_bounded_in_bytes(memo_budget):
    from calver.verifier import memo

    budget = 3 * (8 * 2**12 + 1024)
    memo_budget(budget)
    for seed in range(6):
        scm, _nodes = _band_scm(12, 2, 2, seed)
        joint = cached_joint(scm)
        assert cached_joint(scm) is joint  # kept while within the budget
        assert memo.usage()[0] <= budget
    assert len(scm_mod._JOINTS) <= 3


# ---- F8: the firewall view of a constructed-mode problem ---------------------------------------------
def test_constructed_ate_view_scores_like_the_full_problem():
    problems, _stats = constructed_problems(generate("ate_threshold", 4, GenConfig(seed=0)), 1, random.Random(0))
    assert problems
    for p in problems:
        view = strip_problem(p)
        assert p.mode == view.mode == "constructed" and view.graph is None
        good = FAM.canonical_trace(p)
        flipped = good.replace("ANSWER: yes", "ANSWER: tmp").replace("ANSWER: no", "ANSWER: yes")
        flipped = flipped.replace("ANSWER: tmp", "ANSWER: no")
        wrong_z = good.replace(next(line for line in good.split("\n") if line.startswith("STRATEGY: ")),
                               "STRATEGY: {}")
        for t in (good, flipped, wrong_z):
            full, seen = score(t, p), score(t, view)
            assert full.bits == seen.bits and seen.grounded
        assert score(good, view).total == 6 and score(flipped, view).bits[5] == 0
        assert select([flipped, good], view) == 1


# ---- F9: a non-decision ANSWER is no parsed answer ----------------------------------------------------
@pytest.mark.parametrize("task", ["ate_threshold", "intervention_reachability"])
def test_undecided_answer_does_not_win_the_tie(task):
    n = 0
    for p in generate(task, 25, GenConfig(seed=4)):
        good = canonical_trace(p)
        ans = next(line for line in good.split("\n") if line.startswith("ANSWER: "))
        undecided = good.replace(ans, "ANSWER: unsure")
        defective = good.replace("; graph=DAG", "").replace("; graph=ADMG", "").replace("; graph=directed", "")
        su, sd = score(undecided, p), score(defective, p)
        assert su.answer is None and su.bits[5] == 0
        if su.total == sd.total == 5:
            n += 1
            assert select([undecided, defective], p) == 1
            assert grade(p, sd.answer)
    assert n == 25


def test_answer_slot_parsers():
    ate = get_family("ate_threshold")
    for text in ("unsure", "{Z}", "none", "{}"):
        with pytest.raises(ValueError):
            ate.parse_answer(text)
    assert ate.parse_answer("Yes.") is True and ate.parse_answer("false") is False
    assert ate.parse_object("{Z}") == frozenset({"Z"})  # STRATEGY still reads adjustment sets
    iv = get_family("intervention_reachability")
    for text in ("unsure", "X -> Y", "none"):
        with pytest.raises(ValueError):
            iv.parse_answer(text)
    assert iv.parse_answer("reachable") is True and iv.parse_answer("no") is False
