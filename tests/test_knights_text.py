"""Candidate-local knights_knaves (no formal ``data.statements``): the verifier reads the statements from the
puzzle text (:mod:`calver.verifier.tasks.knights_text`). The reader is checked against the generators'
formal statements with the independent brute-force solver of ``tests/oracles.py``; the 2026-12-03 audit's
H1 battery (``tests/kk_battery.py``) must find no wrong answer at 6/6; an unreadable text fails closed."""

from __future__ import annotations

import dataclasses
import itertools
from random import Random

import kk_battery
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import ev, parse
from testing_utils import require_modules

from calver.data_gen.knights import generate_kk, random_statement, render_statement
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import SelectorView, verification_mode
from calver.infer.selectors.symbolic import CalverSelector
from calver.verifier import Problem, ProblemError, grade, score, select
from calver.verifier.logic import ROLE_PAIRS, to_text
from calver.verifier.registry import get_family
from calver.verifier.tasks.knights import text_reads_back
from calver.verifier.tasks.knights_text import PuzzleTextError, read_statements

KK = get_family("knights_knaves")
view = kk_battery.candidate_local_view


def equivalent(people, speaker, formal: list[str], read) -> bool:
    """Brute force: ``knight(S) <-> AND(formal)`` and ``knight(S) <-> AND(read)`` agree on every assignment."""
    fs, rs = [parse(x) for x in formal], [parse(to_text(r)) for r in read]
    for bits in itertools.product((True, False), repeat=len(people)):
        v = dict(zip(people, bits))
        if all(ev(f, v) for f in fs) != all(ev(r, v) for r in rs):
            return False
    return True


def assert_reads_back(p: Problem) -> None:
    people = tuple(p.data["people"])
    read = read_statements(p.text, people, *p.data["roles"])
    assert set(read) == set(p.data["statements"])
    for s, said in p.data["statements"].items():
        assert equivalent(people, s, [said] if isinstance(said, str) else said, read[s]), (p.id, s, said)
    assert text_reads_back(p) == ""


# ---- the reader against the formal statements -------------------------------------------------------------
@pytest.mark.parametrize("n", range(2, 11))
def test_the_reader_recovers_every_generated_puzzle(n):
    for i in range(40 if n <= 8 else 8):
        assert_reads_back(generate_kk(n, i, 11))


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32), pair=st.sampled_from(ROLE_PAIRS), n=st.integers(2, 6))
def test_every_phrasing_of_the_generator_reads_back(seed, pair, n):
    rng = Random(seed)
    people = ["Ann", "Bob", "Cy", "Dee", "Eve", "Flo"][:n]
    speaker = rng.choice(people)
    f = random_statement(rng, people, speaker)
    sentence = render_statement(f, speaker, pair[0], pair[1], rng)
    read = read_statements(f'You meet {n} inhabitants: {", ".join(people)}.\n{speaker} says: "{sentence}."',
                           tuple(people), *pair)
    assert list(read) == [speaker] and equivalent(people, speaker, [to_text(f)], read[speaker]), sentence


@require_modules("reasoning_gym")
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_the_reader_recovers_reasoning_gym_puzzles(n):
    from calver.data_gen.reasoning_gym_kk import reasoning_gym_kk

    problems, _ = reasoning_gym_kk(n, 30, 0)
    assert len(problems) >= 25
    for p in problems:
        assert_reads_back(p)


# ---- scoring on the firewall view ----------------------------------------------------------------------
def test_the_audit_battery_finds_no_wrong_answer_at_six():
    problems = [generate_kk(n, i, 0) for n in (3, 4, 5, 6) for i in range(6)]
    report = kk_battery.run(problems)
    assert sum(c["wrong_six"] for c in report.values()) == 0, report
    assert report["control"]["six"] == report["control"]["traces"] == len(problems)
    assert report["A"]["wrong"] > 0 and report["D"]["wrong"] > 0  # the battery does attack


@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_canonical_traces_score_six_on_the_view_and_grading_is_unchanged(n):
    for i in range(6):
        p = generate_kk(n, i, 3)
        local = view(p)
        assert "statements" not in local.data and verification_mode(local) == "candidate_local"
        s = score(KK.canonical_trace(p), local)
        assert s.total == 6 and s.grounded and grade(p, s.answer)


def test_the_calver_selector_prefers_the_faithful_trace_over_wrong_templates_listed_first():
    for i in range(10):
        p = generate_kk(4, i, 5)
        traces = {t: tr for t, tr, _ in kk_battery.attack_traces(p)}
        pool = (traces["B"], traces["A"], traces["control"])
        assert select(list(pool), view(p)) == 2
        assert CalverSelector().select(SelectorView(p.id, 0, view(p), pool, (0, 1, 2))).index == 2


# ---- fails closed ----------------------------------------------------------------------------------------
UNREADABLE = {
    "no text": None,
    "an unknown speech verb": 'Ann whispers: "Bob is a knight."\nBob says: "Ann is a knave."',
    "a statement outside the grammar": 'Ann says: "Bob is a knight, unless Cy is a knave."',
    "a role the puzzle does not use": 'Ann says: "Bob is a wizard."',
    "a name in a free sentence": 'Ann says: "Bob is a knight."\nBob is known to be honest.',
    "a stray quote": 'Ann says: "Bob is a knight."\nSomeone said "Cy is a knave."',
    "a wrong list of people": 'You meet 3 inhabitants: Ann, Bob, Zed.\nAnn says: "Bob is a knight."',
    "unbalanced parentheses": 'Ann said that (Bob is a knight and Cy is a knave.',
    "nobody speaks": "Three people stand on an island. Who is who?",
}


@pytest.mark.parametrize("why", sorted(UNREADABLE))
def test_an_unreadable_text_fails_b1_b3_b5_with_the_readers_reason(why):
    p = Problem(task="knights_knaves", query={"people": ["Ann", "Bob", "Cy"], "question": "roles"},
                text=UNREADABLE[why], mode="constructed", variables=("Ann", "Bob", "Cy"),
                data={"people": ["Ann", "Bob", "Cy"], "roles": ["knight", "knave"]}, id="u")
    with pytest.raises(PuzzleTextError):
        read_statements(p.text, ("Ann", "Bob", "Cy"))
    tr = kk_battery.kk_trace(["Ann", "Bob", "Cy"], ["knight(Ann) <-> knight(Bob)"],
                             {"Ann": True, "Bob": True, "Cy": True})
    s = score(tr, p)
    assert s.bits[0] == s.bits[2] == s.bits[4] == 0 and not s.grounded
    assert "cannot be read" in s.reasons["GRAPH"]


ATTACKS = {
    "empty": "",
    "tautologies": "knight({0}) <-> knight({0}); knight({1}) <-> knight({1}); knight({2}) <-> knight({2})",
    "a speaker left out": "knight({0}) <-> knave({1})",
    "unattributable": "knight({0}) and knave({1}) and knight({2})",
    "an outsider": "knight({0}) <-> knight(Zed)",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_degenerate_formalizations_earn_no_b1(name):
    p = generate_kk(3, 4, 0)
    people = p.data["people"]
    for a in ({q: True for q in people}, KK.solution(p)):
        s = score(kk_battery.kk_trace(people, [ATTACKS[name].format(*people)] if ATTACKS[name] else [], a), view(p))
        assert s.bits[0] == 0 and s.total <= 5 and not (s.total == 6), (name, s.bits, s.reasons)


def test_speakers_declared_apart_from_the_text_are_refused():
    p = view(generate_kk(3, 1, 0))
    q = dataclasses.replace(p, data={**p.data, "speakers": p.data["speakers"][:1]})
    s = score(KK.canonical_trace(generate_kk(3, 1, 0)), q)
    assert s.bits[0] == 0 and "speakers" in s.reasons["GRAPH"]


def test_grading_and_canonical_traces_refuse_a_statementless_problem():
    local = view(generate_kk(3, 2, 0))
    for call in (lambda: KK.solution(local), lambda: grade(local, {q: True for q in local.data["people"]}),
                 lambda: KK.canonical_trace(local)):
        with pytest.raises(ProblemError, match="statements"):
            call()


@pytest.mark.parametrize("kw,match", [({"mode": "supplied"}, "constructed"), ({"speakers": ["Ann", "Q"]}, "speakers"),
                                      ({"speakers": ["Ann", "Ann"]}, "twice"), ({"speakers": "Ann"}, "speakers")])
def test_malformed_statementless_problems_are_problem_errors(kw, match):
    data = {"people": ["Ann", "Bob"]}
    if "speakers" in kw:
        data["speakers"] = kw["speakers"]
    p = Problem(task="knights_knaves", query={"people": ["Ann", "Bob"], "question": "roles"},
                mode=kw.get("mode", "constructed"), data=data, variables=("Ann", "Bob"), id="m",
                text='Ann says: "Bob is a knight."')
    with pytest.raises(ProblemError, match=match):
        score(kk_battery.kk_trace(["Ann", "Bob"], [], {"Ann": True, "Bob": True}), p)


def test_score_never_raises_on_junk_constraints():
    rng = Random(7)
    p = generate_kk(4, 0, 1)
    local, tr = view(p), KK.canonical_trace(p)
    alphabet = "knight(knave)<->not and or ->;,\n ABCDEFGZ()!~&|" + "".join(p.data["people"])
    for _ in range(400):
        junk = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        s = score(replace_slot(tr, "GRAPH", junk), local)
        assert len(s.bits) == 6
        if s.total == 6:
            assert grade(p, s.answer)
