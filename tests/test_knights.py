"""knights_knaves: formula grammar, truth-table engine, generator, bits and mutations."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import product
from pathlib import Path
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calver.data_gen.knights import generate_kk
from calver.evaluation.audits import replace_slot
from calver.verifier import Problem, grade, score
from calver.verifier.contract import split_slots
from calver.verifier.logic import (
    MAX_DEPTH,
    Atom,
    Bin,
    Const,
    Not,
    TruthTable,
    evaluate,
    parse_assignment,
    parse_constraints,
    parse_formula,
    says,
    to_text,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples"
PEOPLE = ["A", "B", "C", "D"]


def formulas(people=PEOPLE):
    leaf = st.one_of(st.builds(Atom, st.sampled_from(people), st.booleans()), st.builds(Const, st.booleans()))
    return st.recursive(
        leaf,
        lambda kids: st.one_of(st.builds(Not, kids),
                               st.builds(Bin, st.sampled_from(["and", "or", "->", "<->"]), kids, kids)),
        max_leaves=12,
    )


def brute_solutions(problem: Problem) -> list[dict]:
    people = problem.data["people"]
    cons = [says(s, parse_formula(f)) for s, f in problem.data["statements"].items()]
    out = []
    for vals in product((False, True), repeat=len(people)):
        a = dict(zip(people, vals))
        if all(evaluate(c, a) for c in cons):
            out.append(a)
    return out




def flip(assignment: str, person: str) -> str:
    parts = []
    for item in assignment.split(", "):
        name, role = item.split("=")
        if name == person:
            role = "knave" if role == "knight" else "knight"
        parts.append(f"{name}={role}")
    return ", ".join(parts)


# ---- grammar -----------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(formulas())
def test_render_parse_roundtrip_and_truth_table_matches_evaluation(f):
    assert parse_formula(to_text(f)) == f
    tt = TruthTable(PEOPLE)
    t = tt.table(f)
    for a in range(tt.size):
        assert bool((t >> a) & 1) == evaluate(f, tt.decode(a))


def test_grammar_precedence_and_aliases():
    f = parse_formula("not knight(A) and knave(B) or knight(C) -> knight(D) <-> knight(A)")
    assert f == Bin("<->", Bin("->", Bin("or", Bin("and", Not(Atom("A", True)), Atom("B", False)), Atom("C", True)),
                               Atom("D", True)), Atom("A", True))
    expected = Bin("->", Atom("A", True), Bin("->", Atom("B", True), Atom("C", True)))
    assert parse_formula("knight(A) -> knight(B) -> knight(C)") == expected
    assert (parse_formula("KNIGHT(A) & ~knave(B) | ¬knight(C)")
            == parse_formula("knight(A) and not knave(B) or not knight(C)"))
    assert parse_formula("knight(A) iff knight(B)") == parse_formula("knight(A) <-> knight(B)")
    assert parse_formula("knight(A) implies knight(B)") == parse_formula("knight(A) => knight(B)")
    assert len(parse_constraints("knight(A) <-> knave(B);\nknight(B) <-> (knight(A) and knight(B))")) == 2
    assert len(parse_constraints("1. knight(A) <-> knave(B)\n2. knight(B) <-> knight(A)")) == 2


@pytest.mark.parametrize("text, token", [
    ("knight(A) and", "end of formula"),
    ("knight(A) knave(B)", "'knave'"),
    ("knight A", "'A'"),
    ("knight(A) <-> (knave(B)", "end of formula"),
    ("knight(A) ^ knave(B)", "'^'"),
    ("saint(A)", "'saint'"),
    ("knight(and)", "'and'"),
    ("", "empty"),
])
def test_malformed_formulas_name_the_offending_token(text, token):
    with pytest.raises(ValueError, match=token.replace("(", r"\(").replace("^", r"\^")):
        parse_formula(text)


def test_depth_limit():
    deep = "(" * (MAX_DEPTH + 5) + "knight(A)" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(ValueError, match="deeper"):
        parse_formula(deep)
    with pytest.raises(ValueError, match="deeper"):
        parse_formula("not " * 200 + "knight(A)")
    assert parse_formula("(" * 20 + "knight(A)" + ")" * 20) == Atom("A", True)


def test_truth_table_solutions_for_ten_people_satisfy_every_constraint():
    people = [f"P{i}" for i in range(10)]
    rng = Random(0)
    cons = [says(p, Bin(rng.choice(["and", "or", "->", "<->"]), Atom(rng.choice(people), True),
                        Atom(rng.choice(people), False)))
            for p in people]
    sols = TruthTable(people).solutions(cons)  # speed: benchmarks/families_bench.py
    assert all(all(evaluate(c, s) for c in cons) for s in sols)


def test_assignment_parsing():
    want = {"A": True, "B": False}
    for text in ["A=knight, B=knave", "A: knight; B: knave", "A is a knight and B is a knave", "A=truth-teller, B=liar",
                 "A = angel\nB = devil", "{A=Knight, B=Knave}", "A=saint, B=sinner", "A=true, B=false"]:
        assert parse_assignment(text) == want, text
    for bad in ["A=wizard", "A", "A=knight, A=knave", ""]:
        with pytest.raises(ValueError):
            parse_assignment(bad)


# ---- generator ---------------------------------------------------------------------------------------
def test_generated_puzzles_are_unique_and_canonical_traces_score_six():
    roles, phrasings = set(), set()
    for n in range(2, 9):
        for idx in range(25):
            p = generate_kk(n, idx, seed=5)
            sols = brute_solutions(p)
            assert len(sols) == 1, p.id
            fam = p.family
            assert fam.solution(p) == sols[0]
            trace = fam.canonical_trace(p)
            sc = score(trace, p)
            assert sc.bits == [1] * 6, (p.id, sc.reasons)
            assert grade(p, sc.answer) and grade(p, split_slots(trace).values["ANSWER"])
            assert len(p.data["people"]) == n and set(p.data["statements"]) == set(p.data["people"])
            roles.add(tuple(p.data["roles"]))
            phrasings.update(line.split(":", 1)[1][:12] for line in p.text.splitlines() if '"' in line)
            assert generate_kk(n, idx, seed=5).to_dict() == p.to_dict()  # seeded per item
    assert len(roles) >= 4 and len(phrasings) > 40
    compound = sum(" and " in f or " or " in f or "->" in f
                   for idx in range(20) for f in generate_kk(5, idx, 1).data["statements"].values())
    assert compound > 60  # most of the 100 statements are compound


def test_problem_json_roundtrip():
    p = generate_kk(4, 3, seed=9)
    q = Problem.from_dict(json.loads(json.dumps(p.to_dict())))
    assert score(p.family.canonical_trace(p), q).total == 6


# ---- mutations ---------------------------------------------------------------------------------------
def test_mutations_lose_exactly_their_bits():
    drops_changed = wrongs = 0
    for idx in range(40):
        p = generate_kk(2 + idx % 7, idx, seed=21)
        fam = p.family
        sol = fam.solution(p)
        people = p.data["people"]
        trace = fam.canonical_trace(p)
        slots = split_slots(trace).values
        person = people[idx % len(people)]
        ans = slots["ANSWER"]
        # flipped role
        assert score(replace_slot(trace, "ANSWER", flip(ans, person)), p).bits == [1, 1, 1, 1, 1, 0]
        both = replace_slot(replace_slot(trace, "ANSWER", flip(ans, person)), "STRATEGY", flip(ans, person))
        assert score(both, p).bits == [1, 1, 0, 1, 0, 1]
        assert score(replace_slot(trace, "STRATEGY", flip(ans, person)), p).bits == [1, 1, 0, 1, 0, 0]
        cons_text = slots["GRAPH"].split("; ")
        tt = TruthTable(people)
        # dropped constraint: that speaker's statement is missing, so b1 fails; b3-b5 are judged on the
        # puzzle's own statements (never the trace's), so they still pass even when the model count changes
        k = idx % len(cons_text)
        dropped = cons_text[:k] + cons_text[k + 1:]
        if dropped:
            m = len(tt.solutions([parse_formula(c) for c in dropped]))
            drops_changed += m != 1
            sc = score(replace_slot(trace, "GRAPH", "; ".join(dropped)), p)
            assert sc.bits == [0, 1, 1, 1, 1, 1] and "lack" in sc.reasons["GRAPH"], sc.reasons
        # wrong formula: swap one atom's role
        wrong = list(cons_text)
        head, tail = wrong[k].split("<->", 1)
        i1, i2 = tail.find("knight("), tail.find("knave(")
        if i2 == -1 or (i1 != -1 and i1 < i2):
            tail = tail[:i1] + "knave(" + tail[i1 + 7:]
        else:
            tail = tail[:i2] + "knight(" + tail[i2 + 6:]
        wrong[k] = head + "<->" + tail
        mutated = [parse_formula(x) for x in wrong]
        sat = all(evaluate(f, sol) for f in mutated)
        # the mutated speaker's formula is equivalent to the original iff they agree on every assignment
        same = all(evaluate(parse_formula(wrong[k]), a) == evaluate(parse_formula(cons_text[k]), a)
                   for a in (dict(zip(people, v)) for v in product((False, True), repeat=len(people))))
        wrongs += not sat
        sc = score(replace_slot(trace, "GRAPH", "; ".join(wrong)), p)
        assert sc.bits == [int(same), 1, 1, 1, 1, 1], (wrong, sc.reasons)
        # an unknown person or a malformed formula fails b1 only: b3-b5 use the puzzle's statements
        assert score(replace_slot(trace, "GRAPH", slots["GRAPH"] + "; knight(Zed)"), p).bits == [0, 1, 1, 1, 1, 1]
        assert score(replace_slot(trace, "GRAPH", slots["GRAPH"] + "; knight(A) <->"), p).bits == [0, 1, 1, 1, 1, 1]
        # query and derivation binding
        bad_query = "task=knights_knaves; people={Zed}; question=roles"
        assert score(replace_slot(trace, "QUERY", bad_query), p).bits == [1, 0, 1, 1, 1, 1]
        assert score(replace_slot(trace, "DERIVATION", "enumerate(people={A})"), p).bits == [1, 1, 1, 0, 1, 1]
        assert score(replace_slot(trace, "RESULT", "consistent; models=2"), p).bits == [1, 1, 1, 1, 0, 1]
    assert drops_changed > 10 and wrongs > 10


def test_supplied_mode_checks_equivalence():
    d = json.loads((EXAMPLE / "kk_problem.json").read_text())
    d["mode"] = "supplied"
    p = Problem.from_dict(d)
    trace = (EXAMPLE / "kk_trace.txt").read_text()
    assert score(trace, p).total == 6
    equivalent = ("knight(Alice) <-> not (knight(Bob) and knight(Carol)); "
                  "knight(Bob) <-> (knave(Alice) or knave(Bob)); "
                  "knight(Carol) <-> (knave(Alice) <-> knight(Bob))")
    assert score(replace_slot(trace, "GRAPH", equivalent), p).total == 6
    wrong = "knight(Alice) <-> (knave(Bob) and knave(Carol)); knight(Bob) <-> (knight(Alice) -> knave(Bob))"
    sc = score(replace_slot(trace, "GRAPH", wrong), p)
    assert sc.bits == [0, 1, 1, 1, 1, 1] and "not equivalent" in sc.reasons["GRAPH"]


def test_grade_uses_puzzle_not_trace():
    p = Problem.from_dict(json.loads((EXAMPLE / "kk_problem.json").read_text()))
    assert grade(p, "Alice=knave, Bob=knight, Carol=knight")
    assert grade(p, "Alice is a liar; Bob is a truth-teller; Carol is a truth-teller")
    assert not grade(p, "Alice=knight, Bob=knight, Carol=knight")
    assert not grade(p, "Alice=knave, Bob=knight")
    assert not grade(p, "gibberish")


def test_multi_solution_problem_is_rejected_for_grading():
    from calver.verifier.problem import ProblemError

    p = Problem(task="knights_knaves", query={"people": ["A", "B"], "question": "roles"}, mode="constructed",
                data={"people": ["A", "B"], "statements": {"A": "knight(B)"}})
    with pytest.raises(ProblemError, match="2 solutions"):
        grade(p, "A=knight, B=knight")


def test_cli_verify_example():
    out = subprocess.run(
        [sys.executable, "-m", "calver.cli", "verify", str(EXAMPLE / "kk_problem.json"), str(EXAMPLE / "kk_trace.txt"),
         "--grade"],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["total"] == 6 and res["correct"] is True
