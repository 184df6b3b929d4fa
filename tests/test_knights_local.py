"""Candidate-local knights_knaves scoring (no ``data.statements``): b1/b3/b5 against a brute-force
oracle over the trace's own constraints, the anti-gaming rule, and grading refusing such problems."""

from __future__ import annotations

import dataclasses
from itertools import product
from random import Random

import oracles as O
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calver.data_gen.knights import generate_kk
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import strip_problem
from calver.verifier import Problem, ProblemError, grade, score
from calver.verifier.logic import Atom, Bin, Const, Not, evaluate, format_assignment, parse_constraints, to_text
from calver.verifier.registry import get_family

KK = get_family("knights_knaves")
PEOPLE = ["A", "B", "C"]


def local_problem(people=PEOPLE, speakers=None, roles=None, mode="constructed") -> Problem:
    data = {"people": list(people)}
    if speakers is not None:
        data["speakers"] = speakers
    if roles:
        data["roles"] = roles
    return Problem(task="knights_knaves", query={"people": list(people), "question": "roles"}, mode=mode,
                   data=data, variables=tuple(people), id="local")


def candidate_local(p: Problem) -> Problem:
    return strip_problem(dataclasses.replace(p, meta={**p.meta, "verification": "candidate_local"}))


def trace(cons: str, strategy: str, result: str, people=PEOPLE, answer: str | None = None) -> str:
    ps = ", ".join(sorted(people))
    return (f"CONSTRAINTS: {cons}\nQUERY: task=knights_knaves; people={{{ps}}}; question=roles\n"
            f"STRATEGY: {strategy}\nDERIVATION: truth_table(people={{{ps}}}, assignments={2 ** len(people)})\n"
            f"RESULT: {result}\nANSWER: {answer if answer is not None else strategy}")


# ---- the brute-force oracle -----------------------------------------------------------------------
def assignments(people):
    for vals in product((False, True), repeat=len(people)):
        yield dict(zip(people, vals))


def oracle(cons: list, strategy: dict, verdict: bool, models: int, people, talkers) -> tuple[bool, bool, bool]:
    """(b1, b3, b5) by enumeration: attribution by brute force over every way to give formulas to heads."""
    named = set().union(*[_names(f) for f in cons]) if cons else set()
    hs = [[s for s in O.kk_heads(f) if s in talkers] for f in cons]
    b1 = bool(cons) and named <= set(people) and all(hs)
    if b1:  # coverage: some choice of one head per formula reaches every speaker
        b1 = any(set(choice) >= set(talkers) for choice in product(*hs))
    sols = [a for a in assignments(people) if all(evaluate(f, a) for f in cons)] if named <= set(people) else []
    b1 = b1 and len(sols) == 1
    b3 = b1 and strategy in sols
    b5 = b1 and verdict == (strategy in sols) and models == len(sols)
    return b1, b3, b5


def _names(f) -> set[str]:
    if isinstance(f, Atom):
        return {f.name}
    if isinstance(f, Const):
        return set()
    if isinstance(f, Not):
        return _names(f.arg)
    return _names(f.left) | _names(f.right)


def formulas(people):
    leaf = st.one_of(st.builds(Atom, st.sampled_from(people), st.booleans()), st.builds(Const, st.booleans()))
    body = st.recursive(leaf, lambda k: st.one_of(st.builds(Not, k), st.builds(
        Bin, st.sampled_from(["and", "or", "->", "<->"]), k, k)), max_leaves=5)
    headed = st.builds(lambda s, kn, b, flip: Bin("<->", b, Atom(s, kn)) if flip else Bin("<->", Atom(s, kn), b),
                       st.sampled_from(people + ["Z"]), st.booleans(), body, st.booleans())
    return st.one_of(headed, headed, headed, body)


@settings(max_examples=300, deadline=None)
@given(cons=st.lists(formulas(PEOPLE), min_size=1, max_size=5),
       strat=st.tuples(st.booleans(), st.booleans(), st.booleans()),
       verdict=st.booleans(), models=st.integers(0, 8), silent=st.sampled_from([None, "A", "C"]))
def test_local_bits_agree_with_the_brute_force_oracle(cons, strat, verdict, models, silent):
    talkers = [p for p in PEOPLE if p != silent]
    p = local_problem(speakers=None if silent is None else talkers)
    strategy = dict(zip(PEOPLE, strat))
    text = "; ".join(to_text(f) for f in cons)
    s = score(trace(text, format_assignment(strategy, PEOPLE),
                    f"{'consistent' if verdict else 'inconsistent'}; models={models}"), p)
    parsed = parse_constraints(text)  # the text round-trips to the same formulas' truth tables
    want = oracle(parsed, strategy, verdict, models, PEOPLE, talkers)
    assert (s.bits[0], s.bits[2], s.bits[4]) == tuple(int(x) for x in want), (text, s.reasons)
    assert s.bits[1] == 1 and s.bits[3] == 1 and s.grounded is False


# ---- generated puzzles -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_canonical_traces_score_six_in_both_modes_and_grading_is_unchanged(n):
    for i in range(6):
        p = generate_kk(n, i, 3)
        local = candidate_local(p)
        assert "statements" not in local.data and local.data["speakers"] == list(p.data["people"])
        tr = KK.canonical_trace(p)
        s_g, s_l = score(tr, strip_problem(p)), score(tr, local)
        assert s_g.total == 6 and s_g.grounded and s_l.total == 6 and not s_l.grounded
        assert grade(p, s_l.answer) and grade(dataclasses.replace(p, meta={"verification": "candidate_local"}),
                                              s_l.answer)


def test_a_wrong_assignment_on_faithful_constraints_fails_b3_in_both_modes():
    p = generate_kk(4, 1, 0)
    sol = KK.solution(p)
    wrong = {**sol, p.data["people"][0]: not sol[p.data["people"][0]]}
    tr = KK.canonical_trace(p, wrong)
    for q in (strip_problem(p), candidate_local(p)):
        s = score(tr, q)
        assert s.bits[2] == 0 and s.total < 6


def test_a_fabricated_determinate_formalization_scores_six_but_grades_wrong():
    """The documented limit of candidate-local scoring: the score certifies consistency with the
    trace's own formalization, not correctness (grading, on the full problem, catches it)."""
    p = generate_kk(3, 0, 0)
    people = p.data["people"]
    allk = {q: True for q in people}
    if allk == KK.solution(p):
        allk = {q: False for q in people}
        cons = "; ".join(f"knave({q}) <-> (knight({q}) or knave({q}))" for q in people)
    else:
        cons = "; ".join(f"knight({q}) <-> (knight({q}) or knave({q}))" for q in people)
    strat = format_assignment(allk, people)
    s = score(trace(cons, strat, "consistent; models=1", people), candidate_local(p))
    assert s.total == 6 and not s.grounded and not grade(p, s.answer)
    assert score(trace(cons, strat, "consistent; models=1", people), strip_problem(p)).bits[0] == 0


# ---- gaming --------------------------------------------------------------------------------------------
ATTACKS = {
    "empty": ("", "consistent; models=8"),
    "tautologies": ("knight(A) <-> knight(A); knight(B) <-> knight(B); knight(C) <-> knight(C)",
                    "consistent; models=8"),
    "speaker left out": ("knight(A) <-> knave(B); knight(B) <-> knight(C)", "consistent; models=1"),
    "one formula, two speakers": ("knight(A) <-> knave(B); knight(C) <-> knight(C)", "consistent; models=2"),
    "unattributable": ("knight(A) and knave(B) and knight(C)", "consistent; models=1"),
    "contradiction": ("knight(A) <-> knave(A); knight(B) <-> knight(B); knight(C) <-> knight(C)",
                      "inconsistent; models=0"),
    "outsider": ("knight(A) <-> knight(Z); knight(B) <-> knave(A); knight(C) <-> knight(A)",
                 "consistent; models=1"),
    "constants only head nobody": ("true <-> knight(A) and knight(B) and knight(C)", "consistent; models=1"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_degenerate_formalizations_earn_no_b1_b3_b5(name):
    cons, result = ATTACKS[name]
    p = local_problem()
    for strat in ("A=knight, B=knight, C=knight", "A=knave, B=knight, C=knave"):
        s = score(trace(cons, strat, result), p)
        assert s.bits[0] == s.bits[2] == s.bits[4] == 0 and s.total <= 3, (name, s.bits, s.reasons)


def test_a_silent_person_may_not_be_given_a_statement_and_need_not_have_one():
    p = local_problem(speakers=["A", "B"])
    ok = "knight(A) <-> knave(B); knight(B) <-> (knight(A) and knight(C))"
    assert score(trace(ok, "A=knight, B=knave, C=knave", "consistent; models=1"), p).total == 6
    bad = ok + "; knight(C) <-> knight(C)"
    s = score(trace(bad, "A=knight, B=knave, C=knave", "consistent; models=1"), p)
    assert s.bits[0] == 0 and "says nothing" in s.reasons["GRAPH"]


def test_role_words_and_ambiguous_heads_are_matched():
    p = local_problem(roles=["hero", "villain"])
    cons = "knight(A) <-> knave(B); knave(B) <-> knight(C); knight(C) <-> (knight(A) and knight(B))"  # B and C head one
    sols = [a for a in assignments(PEOPLE) if all(evaluate(f, a) for f in parse_constraints(cons))]
    assert len(sols) == 1
    strat = ", ".join(f"{q}={'hero' if sols[0][q] else 'villain'}" for q in PEOPLE)
    assert score(trace(cons, strat, "consistent; models=1"), p).total == 6


# ---- errors -------------------------------------------------------------------------------------------
def test_grading_and_canonical_traces_refuse_a_statementless_problem():
    local = candidate_local(generate_kk(3, 2, 0))
    with pytest.raises(ProblemError, match="statements"):
        KK.solution(local)
    with pytest.raises(ProblemError, match="statements"):
        grade(local, {q: True for q in local.data["people"]})
    with pytest.raises(ProblemError, match="statements"):
        KK.canonical_trace(local)


@pytest.mark.parametrize("kw,match", [({"mode": "supplied"}, "constructed"), ({"speakers": ["A", "Q"]}, "speakers"),
                                      ({"speakers": ["A", "A"]}, "twice"), ({"speakers": "A"}, "speakers")])
def test_malformed_statementless_problems_are_problem_errors(kw, match):
    with pytest.raises(ProblemError, match=match):
        score(trace("knight(A) <-> knave(B)", "A=knight, B=knave, C=knave", "consistent; models=1"),
              local_problem(**kw))


def test_score_never_raises_on_junk_constraints():
    rng = Random(7)
    p = candidate_local(generate_kk(4, 0, 1))
    tr = KK.canonical_trace(generate_kk(4, 0, 1))
    alphabet = "knight(knave)<->not and or ->;,\n ABCDEFGZ()!~&|" + "".join(p.data["people"])
    for _ in range(400):
        junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        s = score(replace_slot(tr, "GRAPH", junk), p)
        assert len(s.bits) == 6 and (s.bits[0] == 0 or s.total >= 1)
        if s.bits[0] == 0:
            assert s.bits[2] == 0 and s.bits[4] == 0
