"""knights_knaves reward safety: b1 is per-person equivalence to the puzzle's statements (both modes),
b3-b5 are judged on the puzzle (never the trace's CONSTRAINTS), declared role words parse, oversize
or duplicate puzzles are refused at load, the assignment regexes are linear, and per-item seeds of the
K&K and ATE generators do not overlap across seeds (audit A1, B4, C1, seed aside).

Oracles: ``evaluate`` (direct recursive evaluation) over every assignment, and a brute-force search
over every attribution of the trace's formulas to speakers."""

from __future__ import annotations

import json
import time
from itertools import product
from random import Random

import oracles as O
import pytest

from calver.data_gen.ate import generate_ate
from calver.data_gen.knights import generate_kk
from calver.evaluation.audits import replace_slot
from calver.verifier import Problem, ProblemError, grade, score
from calver.verifier.contract import split_slots
from calver.verifier.logic import (
    Atom,
    Bin,
    Not,
    TruthTable,
    evaluate,
    parse_assignment,
    parse_constraints,
    parse_formula,
    says,
    split_constraints,
    to_text,
)
from calver.verifier.tasks.knights import MAX_PEOPLE, KnightsKnaves

# ---- the audit's repro (repro/kk_constructed_*): constraints that state the wrong answer --------------
REPRO = {
    "task": "knights_knaves", "mode": "constructed", "variables": ["Paul", "Ivy"],
    "query": {"people": ["Paul", "Ivy"], "question": "roles"},
    "data": {"people": ["Paul", "Ivy"], "roles": ["truth-teller", "liar"],
             "statements": {"Ivy": "knave(Paul)", "Paul": "knight(Ivy) <-> not knight(Ivy)"}},
}
REPRO_TRACE = """CONSTRAINTS: knight(Paul); knight(Ivy)
QUERY: task=knights_knaves; people={Ivy, Paul}; question=roles
STRATEGY: Paul=knight, Ivy=knight
DERIVATION: truth_table(people={Ivy, Paul}, assignments=4)
RESULT: consistent; models=1
ANSWER: Paul=knight, Ivy=knight
"""


def assignments(people):
    for vals in product((False, True), repeat=len(people)):
        yield dict(zip(people, vals))


def equivalent(fs, gs, people) -> bool:
    return all(all(evaluate(f, a) for f in fs) == all(evaluate(g, a) for g in gs) for a in assignments(people))


def oracle_b1(trace, problem) -> bool:
    """Some attribution of every trace formula to one of its heads makes, for every person, the
    formulas given to them equivalent (by evaluation) to their own statements."""
    people = problem.data["people"]
    src = {p: [says(p, parse_formula(s))] for p, s in problem.data["statements"].items()}
    cands = [O.kk_heads(f) for f in trace]
    if not all(cands):
        return False
    for choice in product(*cands):
        groups = {p: [f for f, c in zip(trace, choice) if c == p] for p in people}
        if all(equivalent(groups[p], src.get(p, []), people) and (groups[p] == [] or p in src) for p in people):
            return True
    return False


def kk_problem(statements: dict, people=None, roles=None, mode="supplied") -> Problem:
    people = people or sorted(statements)
    data = {"people": people, "statements": statements}
    if roles:
        data["roles"] = roles
    return Problem(task="knights_knaves", query={"people": people, "question": "roles"}, mode=mode, data=data)


def test_audit_repro_no_longer_scores_six():
    p = Problem.from_dict(REPRO)
    sc = score(REPRO_TRACE, p)
    # b1: `knight(Paul)` is no one's statement; b3/b5: Paul=knight violates the puzzle (Paul=knave, Ivy=knight)
    assert sc.bits == [0, 1, 0, 1, 0, 1], sc.reasons
    assert "attributed" in sc.reasons["GRAPH"] and not grade(p, sc.answer)
    assert sc.grounded


@pytest.mark.parametrize("seed", [3, 11])
def test_wrong_answer_constraints_never_score_six_on_generated_puzzles(seed):
    for idx in range(60):
        p = generate_kk(2 + idx % 6, idx, seed=seed)
        assert p.mode == "constructed"
        people, sol = p.data["people"], p.family.solution(p)
        wrong = dict(sol)
        wrong[people[idx % len(people)]] ^= True
        ans = ", ".join(f"{q}={'knight' if wrong[q] else 'knave'}" for q in people)
        canon = p.family.canonical_trace(p)
        # constraints that state the wrong answer, each written as the speaker's "statement"
        forged = "; ".join(f"knight({q}) <-> {'knight' if wrong[q] else 'knave'}({q})" for q in people)
        for graph in ("; ".join(f"{'knight' if wrong[q] else 'knave'}({q})" for q in people), forged):
            trace = replace_slot(replace_slot(replace_slot(canon, "GRAPH", graph), "STRATEGY", ans), "ANSWER", ans)
            trace = replace_slot(trace, "RESULT", "consistent; models=1")
            sc = score(trace, p)
            assert sc.bits[0] == 0 and sc.bits[2] == 0 and sc.bits[4] == 0 and sc.total < 6, (p.id, sc.reasons)
            assert not grade(p, sc.answer)


def test_canonical_traces_of_generated_puzzles_score_six():
    for n in range(2, 11):
        for idx in range(12):
            p = generate_kk(n, idx, seed=17)
            sc = score(p.family.canonical_trace(p), p)
            assert sc.bits == [1] * 6, (p.id, sc.reasons)
            assert grade(p, sc.answer)


# ---- equivalent rewritings pass b1 ---------------------------------------------------------------------
def rewrite(f, rng: Random):
    """A random formula equivalent to ``f``: double negation, knave ↔ not knight, commuted and/or/iff,
    De Morgan, implication as a disjunction."""
    if isinstance(f, Atom):
        r = rng.random()
        if r < 0.25:
            return Not(Atom(f.name, not f.knight))
        if r < 0.4:
            return Not(Not(f))
        return f
    if isinstance(f, Not):
        return Not(rewrite(f.arg, rng))
    a, b = rewrite(f.left, rng), rewrite(f.right, rng)
    r = rng.random()
    if f.op in ("and", "or"):
        if r < 0.3:
            return Not(Bin("or" if f.op == "and" else "and", Not(a), Not(b)))
        return Bin(f.op, b, a) if r < 0.7 else Bin(f.op, a, b)
    if f.op == "->":
        return Bin("or", Not(a), b) if r < 0.5 else Bin("->", Not(b), Not(a))
    return Bin("<->", b, a) if r < 0.5 else Bin("<->", Not(a), Not(b))


def rewrite_constraint(speaker: str, stmt, rng: Random):
    phi = rewrite(stmt, rng)
    return rng.choice([
        Bin("<->", Atom(speaker, True), phi),
        Bin("<->", phi, Atom(speaker, True)),  # iff flipped
        Bin("<->", Atom(speaker, False), Not(phi)),  # knave(S) <-> not φ
        Bin("<->", Not(phi), Atom(speaker, False)),
        Bin("<->", Not(Atom(speaker, True)), Not(phi)),
    ])


def test_random_equivalent_rewritings_pass_b1():
    rng = Random(5)
    for idx in range(120):
        p = generate_kk(2 + idx % 7, idx, seed=23)
        stmts = {s: parse_formula(t) for s, t in p.data["statements"].items()}
        cons = [rewrite_constraint(s, f, rng) for s, f in stmts.items()]
        rng.shuffle(cons)
        for s, f in stmts.items():  # the rewriter is sound (independent check)
            mine = [c for c in cons if s in O.kk_heads(c)]
            assert any(equivalent([c], [says(s, f)], p.data["people"]) for c in mine)
        text = "; ".join(to_text(c) for c in cons)
        assert parse_constraints(text) == cons
        sc = score(replace_slot(p.family.canonical_trace(p), "GRAPH", text), p)
        assert sc.bits == [1] * 6, (p.id, text, sc.reasons)


# ---- per-person swaps fail b1 ------------------------------------------------------------------------
def test_swapped_speakers_fail_b1_even_when_the_conjunction_is_equivalent():
    # Hand-worked: A says "A and B are both knights", B says "A and B are the same kind". The only
    # model is A=B=knight (A=B=knave would make B's claim true). Swapped (A: "same kind", B: "both
    # knights"): A <-> (A <-> B) reduces to B, then B <-> (A and B) forces A: the same single model,
    # yet A never said "same kind" and B never said "both knights".
    p = kk_problem({"A": "knight(A) and knight(B)", "B": "knight(A) <-> knight(B)"})
    swapped = "knight(A) <-> (knight(A) <-> knight(B)); knight(B) <-> (knight(A) and knight(B))"
    tt = TruthTable(["A", "B"])
    assert tt.models(parse_constraints(swapped)) == tt.models(p.family.verification_object(p))
    assert not oracle_b1(parse_constraints(swapped), p)
    trace = p.family.canonical_trace(p)
    assert score(trace, p).bits == [1] * 6
    sc = score(replace_slot(trace, "GRAPH", swapped), p)
    assert sc.bits == [0, 1, 1, 1, 1, 1] and "not equivalent" in sc.reasons["GRAPH"]

    # Brute force over two speakers' statements: every swap whose whole conjunction is equivalent
    # (unique solution) is graded by b1 exactly as the attribution oracle says, and most fail.
    people = ["A", "B"]
    lits = [Atom(q, k) for q in people for k in (True, False)]
    pool = lits + [Bin(op, x, y) for op in ("and", "or", "->", "<->") for x in lits for y in lits if x.name != y.name]
    failing = 0
    for fa, fb in product(pool, pool):
        src, swp = [says("A", fa), says("B", fb)], [says("A", fb), says("B", fa)]
        t = tt.models(src)
        if t != tt.models(swp) or bin(t).count("1") != 1 or equivalent([src[0]], [swp[0]], people):
            continue
        q = kk_problem({"A": to_text(fa), "B": to_text(fb)})
        want = oracle_b1(swp, q)
        got = score(replace_slot(trace, "GRAPH", "; ".join(to_text(c) for c in swp)), q).bits[0]
        assert got == want, (to_text(fa), to_text(fb))
        failing += not want
    assert failing >= 20


def test_b1_agrees_with_the_attribution_oracle_on_random_traces():
    """Random traces mixing true, rewritten, swapped, silent-person and foreign formulas."""
    rng = Random(9)
    disagreements, passes, fails = [], 0, 0
    for it in range(400):
        people = ["A", "B", "C"][: rng.choice((2, 3))]
        lit = lambda: Atom(rng.choice(people), rng.random() < 0.5)  # noqa: E731
        stmt = lambda: lit() if rng.random() < 0.4 else Bin(rng.choice(["and", "or", "->", "<->"]), lit(), lit())  # noqa: E731
        speakers_ = [q for q in people if rng.random() < 0.85] or people[:1]
        stmts = {q: stmt() for q in speakers_}
        p = kk_problem({q: to_text(f) for q, f in stmts.items()}, people=people)
        trace = []
        for q, f in stmts.items():
            r = rng.random()
            if r < 0.5:
                trace.append(rewrite_constraint(q, f, rng))
            elif r < 0.65:
                trace.append(says(rng.choice(people), f))  # possibly attributed to someone else
            elif r < 0.75:
                trace += [says(q, f), says(q, f)]  # a duplicate
            elif r < 0.85:
                trace.append(Bin("<->", lit(), lit()))  # ambiguous heads
            elif r < 0.95:
                trace.append(says(q, stmt()))
        if rng.random() < 0.1:
            trace.append(lit())  # no speaker at all
        if not trace:
            continue
        want = oracle_b1(trace, p)
        sc = score("CONSTRAINTS: " + "; ".join(to_text(c) for c in trace) + "\n", p)
        passes += want
        fails += not want
        if sc.bits[0] != want:
            disagreements.append((p.data["statements"], [to_text(c) for c in trace], sc.reasons.get("GRAPH")))
    assert not disagreements, disagreements[:3]
    assert passes > 60 and fails > 60


def test_silent_person_must_have_no_formula():
    p = kk_problem({"A": "knave(B)"}, people=["A", "B"])
    base = "CONSTRAINTS: knight(A) <-> knave(B)\n"
    assert score(base, p).bits[0] == 1
    sc = score("CONSTRAINTS: knight(A) <-> knave(B); knight(B) <-> (knight(B) or knave(B))\n", p)
    assert sc.bits[0] == 0 and "says nothing" in sc.reasons["GRAPH"]


# ---- declared role words -------------------------------------------------------------------------------
def test_declared_role_words_parse_in_strategy_answer_and_grade():
    d = json.loads(json.dumps(REPRO))
    d["data"]["roles"] = ["pioneer", "laggard"]
    p = Problem.from_dict(d)
    trace = p.family.canonical_trace(p)
    for ans in ("Paul=laggard, Ivy=pioneer", "Paul is a laggard; Ivy is a pioneer",
                "Paul=Laggards, Ivy=PIONEER", "Paul=knave, Ivy=pioneer"):
        t = replace_slot(replace_slot(trace, "STRATEGY", ans), "ANSWER", ans)
        sc = score(t, p)
        assert sc.bits == [1] * 6, (ans, sc.reasons)
        assert sc.answer == {"Paul": False, "Ivy": True}
        assert grade(p, ans) and grade(p, sc.answer)
    assert grade(p, {"Paul": "laggard", "Ivy": "pioneer"})
    assert not grade(p, "Paul=pioneer, Ivy=laggard")
    wrong = replace_slot(trace, "ANSWER", "Paul=pioneer, Ivy=laggard")
    assert score(wrong, p).bits == [1, 1, 1, 1, 1, 0]
    assert not grade(Problem.from_dict(REPRO), "Paul=laggard, Ivy=pioneer")  # not this puzzle's words
    with pytest.raises(ValueError, match="unknown role"):
        parse_assignment("Paul=laggard")


@pytest.mark.parametrize("roles, why", [
    (["knave", "knight"], "built-in"),
    (["pioneer", "liar"], None),
    (["liar", "pioneer"], "built-in"),
    (["pioneer", "pioneers"], "share"),
    (["Ivy", "laggard"], "name"),
    (["pioneer", "ivies"], None),
    (["true", "laggard"], "reserved"),
    (["the good", "laggard"], "article"),
    (["rock and roll", "laggard"], "and"),
    (["pi0neer", "laggard"], "letters"),
    (["pioneer"], "truthful role, lying role"),
])
def test_ambiguous_role_words_are_refused_at_load(roles, why):
    d = json.loads(json.dumps(REPRO))
    d["data"]["roles"] = roles
    p = Problem.from_dict(d)
    if why is None:
        assert score(p.family.canonical_trace(p), p).total == 6
        return
    with pytest.raises(ProblemError, match="data field 'roles'") as err:
        score(REPRO_TRACE, p)
    assert why in str(err.value)


# ---- oversize / duplicate puzzles ---------------------------------------------------------------------
def test_oversize_and_duplicate_puzzles_are_refused_with_problem_error():
    big = [f"P{i}" for i in range(MAX_PEOPLE + 1)]
    for people, field in ((big, "at most"), (["A", "B", "A"], "twice")):
        p = kk_problem({"A": "knight(B)"}, people=people)
        for call in (lambda: score(REPRO_TRACE, p), lambda: grade(p, "A=knight, B=knight"),
                     lambda: KnightsKnaves().normalize_query(p)):
            with pytest.raises(ProblemError, match=field):
                call()
    ok = kk_problem({f"P{i}": f"knave(P{i + 1})" for i in range(MAX_PEOPLE - 1)} | {f"P{MAX_PEOPLE - 1}": "true"},
                    people=[f"P{i}" for i in range(MAX_PEOPLE)])
    roles = ", ".join(f"P{i}={'knight' if (MAX_PEOPLE - 1 - i) % 2 == 0 else 'knave'}" for i in range(MAX_PEOPLE))
    assert grade(ok, roles)


# ---- linear-time parsing (B4): 5k vs 20k characters -------------------------------------------------------
def _cpu(fn, arg, reps: int, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for _ in range(reps):
            try:
                fn(arg)
            except ValueError:
                pass
        best = min(best, time.process_time() - t)
    return best


def _growth(fn, make) -> float:
    """CPU time at 20k characters over 5k (best of 3; ~4 when linear, ~16 when quadratic)."""
    small, big = make(5000), make(20000)
    reps = 1
    while _cpu(fn, small, reps, rounds=1) < 0.02 and reps < 4096:
        reps *= 2
    return _cpu(fn, big, reps) / max(_cpu(fn, small, reps), 1e-9)


KK_PROBLEM = kk_problem({"A": "knave(B)", "B": "knight(A) and knight(B)"})
_fam = KK_PROBLEM.family
ADVERSARIAL = {
    "pair-trailing-spaces": (parse_assignment, lambda n: "A=knight" + " " * n + "!"),
    "pair-name-spaces": (parse_assignment, lambda n: "A" + " " * n + "!"),
    "pair-long-name": (parse_assignment, lambda n: "A" * n + " !"),
    "pair-hyphens": (parse_assignment, lambda n: "A=" + "knight-" * (n // 7) + "!"),
    "pair-articles": (parse_assignment, lambda n: "A is " + "a " * (n // 2) + "!"),
    "pair-many": (parse_assignment, lambda n: "A=knight and " * (n // 13) + "!"),
    "formula-spaces": (parse_formula, lambda n: "knight(A)" + " " * n + "$"),
    "constraints-marker": (split_constraints, lambda n: " " * (n // 2) + "1" * (n // 2) + "x"),
    "constraints-dash": (split_constraints, lambda n: " " * n + "-x"),
    "result-spaces": (_fam.declared_result, lambda n: " " * n + "!"),
    "result-stars": (_fam.declared_result, lambda n: "*" * n + "!"),
    "score-answer": (lambda t: score(t, KK_PROBLEM),
                     lambda n: replace_slot(_fam.canonical_trace(KK_PROBLEM), "ANSWER", "A=knight" + " " * n + "!")),
}


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
def test_regexes_are_linear_on_adversarial_inputs(case):
    fn, make = ADVERSARIAL[case]
    ratio = _growth(fn, make)
    assert ratio < 8, f"{case}: 4x the input took {ratio:.1f}x the time (quadratic would be ~16x)"


# ---- per-item seeds (no overlap across seeds) -------------------------------------------------------------
def test_kk_seeds_share_no_items():
    a = {json.dumps(generate_kk(3, i, seed=0).data, sort_keys=True) for i in range(100)}
    b = {json.dumps(generate_kk(3, i, seed=1).data, sort_keys=True) for i in range(100)}
    assert len(a) > 90 and not a & b
    assert generate_kk(3, 1, seed=0).data == generate_kk(3, 1, seed=0).data


def test_ate_seeds_share_no_items():
    key = lambda p: json.dumps([p.data["cpts"], p.query["threshold"]], sort_keys=True)  # noqa: E731
    a = {key(generate_ate(i, seed=0, n_nodes=4)) for i in range(100)}
    b = {key(generate_ate(i, seed=1, n_nodes=4)) for i in range(100)}
    assert len(a) == 100 and not a & b
    assert key(generate_ate(1, seed=0)) == key(generate_ate(1, seed=0))


def test_generated_answer_text_survives_split():
    p = generate_kk(4, 0, seed=2)
    assert split_slots(p.family.canonical_trace(p)).values["ANSWER"]
