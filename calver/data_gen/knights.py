"""Knights-and-knaves puzzles with a unique solution.

``generate_kk(n_people, idx, seed)`` draws (with the string-keyed per-item rng ``item_rng``) 2–8 people with
varied names, a role pair (knights/knaves, truth-tellers/liars, angels/devils, ...), a hidden
assignment, and one statement per speaker — mostly compound (and / or / not / implication /
iff over literals) and true exactly when the speaker is truthful — until the puzzle has exactly
one solution by truth table. The prompt renders every statement in varied natural language; the
formal statements stay on the problem side (``data.statements``).
"""

from __future__ import annotations

from random import Random

from calver.data_gen.generators import item_rng
from calver.verifier.logic import (
    ROLE_PAIRS,
    Atom,
    Bin,
    Formula,
    Not,
    TruthTable,
    evaluate,
    format_assignment,
    says,
    to_text,
)
from calver.verifier.problem import Problem

NAMES = (
    "Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Iris", "Jack", "Kate", "Leo",
    "Mia", "Noah", "Olivia", "Paul", "Quinn", "Rosa", "Sam", "Tara", "Uma", "Victor", "Wendy", "Xavier",
    "Yara", "Zoe", "Aria", "Ben", "Chloe", "Dylan", "Ella", "Felix", "Gwen", "Hugo", "Ivy", "Jonah",
)
_PLURAL = {"hero": "heroes"}
_VERBS = ("says", "claims", "states", "tells you", "insists", "declares")
_INTROS = (
    "On an island, every inhabitant is either {a_good}, who always tells the truth, or {a_bad}, who always lies.",
    "Each person you meet here is one of two kinds: {goods} always tell the truth and {bads} always lie.",
    "In this village there are only {goods}, who never lie, and {bads}, who never tell the truth.",
    "Every speaker below is either {a_good} (every statement they make is true) "
    "or {a_bad} (every statement they make is false).",
)
MIN_PEOPLE, MAX_PEOPLE = 2, 10  # the corpus uses 2-8; 9-10 are supported (benchmarks)


def _plural(w: str) -> str:
    return _PLURAL.get(w, w + "s")


def _article(w: str) -> str:
    return ("an " if w[0] in "aeiou" else "a ") + w


# ---- statements ---------------------------------------------------------------------------------
def _literal(rng: Random, people: list[str], speaker: str) -> Formula:
    others = [p for p in people if p != speaker]
    who = speaker if (not others or rng.random() < 0.15) else rng.choice(others)
    atom = Atom(who, rng.random() < 0.5)
    return Not(Atom(who, True)) if rng.random() < 0.12 else atom


def random_statement(rng: Random, people: list[str], speaker: str) -> Formula:
    r = rng.random()
    if r < 0.15:
        return _literal(rng, people, speaker)
    a = _literal(rng, people, speaker)
    b = _literal(rng, people, speaker)
    for _ in range(5):  # avoid the same person twice in one binary statement
        if _person(b) != _person(a):
            break
        b = _literal(rng, people, speaker)
    if r < 0.9:
        op = rng.choice(("and", "or", "->", "<->"))
        return Bin(op, a, b)
    return Not(Bin(rng.choice(("and", "or")), _positive(a), _positive(b)))


def _person(f: Formula) -> str:
    return f.arg.name if isinstance(f, Not) else f.name  # type: ignore[union-attr]


def _positive(f: Formula) -> Formula:
    return Atom(f.arg.name, False) if isinstance(f, Not) else f  # type: ignore[union-attr]


# ---- natural language -------------------------------------------------------------------------------
def _lit_text(f: Formula, speaker: str, good: str, bad: str, rng: Random) -> str:
    neg = isinstance(f, Not)
    atom = f.arg if neg else f  # type: ignore[union-attr]
    role = good if atom.knight else bad
    me = atom.name == speaker
    subj, verb = ("I", "am") if me else (atom.name, "is")
    if neg:
        return f"{subj} {verb} not {_article(role)}"
    if not me and rng.random() < 0.25:
        return f"{subj} {verb} one of the {_plural(role)}"
    return f"{subj} {verb} {_article(role)}"


def render_statement(f: Formula, speaker: str, good: str, bad: str, rng: Random) -> str:
    lit = lambda g: _lit_text(g, speaker, good, bad, rng)  # noqa: E731
    if isinstance(f, (Atom,)) or (isinstance(f, Not) and isinstance(f.arg, Atom)):
        s = lit(f)
    elif isinstance(f, Not):
        inner = f.arg
        a, b = lit(inner.left), lit(inner.right)  # type: ignore[union-attr]
        if inner.op == "or":  # type: ignore[union-attr]
            s = rng.choice((f"neither is it true that {a} nor that {b}",
                            f"it is false that {a}, and it is also false that {b}"))
        else:
            s = rng.choice((f"it is not the case that both {a} and {b}", f"{a} and {b} are not both true"))
    else:
        a, b = lit(f.left), lit(f.right)
        s = rng.choice({
            "and": (f"{a} and {b}", f"both {a} and {b}"),
            "or": (f"{a} or {b}", f"at least one of these is true: {a}, or {b}", f"{a} or {b} (or both)"),
            "->": (f"if {a}, then {b}", f"{b} if {a}", f"{a} only if {b}"),
            "<->": (f"{a} if and only if {b}", f"{a} exactly when {b}"),
        }[f.op])
    return s[0].upper() + s[1:]


# ---- puzzles --------------------------------------------------------------------------------------------
def generate_kk(n_people: int, idx: int, seed: int = 0, max_tries: int = 2000) -> Problem:
    """One unique-solution puzzle with ``n_people`` (2–8; up to 10 supported) people, seeded per
    ``(n_people, seed, idx)``."""
    if not MIN_PEOPLE <= n_people <= MAX_PEOPLE:
        raise ValueError(f"n_people must be in [{MIN_PEOPLE}, {MAX_PEOPLE}], got {n_people}")
    rng = item_rng(f"knights_knaves/{n_people}", seed, idx)  # string-keyed: (seed, idx) pairs never share an rng
    people = rng.sample(NAMES, n_people)
    good, bad = rng.choice(ROLE_PAIRS)
    tt = TruthTable(people)
    for _ in range(max_tries):
        hidden = {p: rng.random() < 0.5 for p in people}
        stmts: dict[str, Formula] = {}
        for p in people:
            for _k in range(50):
                f = random_statement(rng, people, p)
                if evaluate(f, hidden) == hidden[p]:
                    break
            else:
                f = Not(f) if not isinstance(f, Not) else f.arg
            stmts[p] = f
        sols = tt.solutions([says(p, f) for p, f in stmts.items()])
        if len(sols) == 1:
            assert sols[0] == hidden
            break
    else:  # pragma: no cover - astronomically unlikely for n <= 8
        raise RuntimeError(f"no unique-solution puzzle after {max_tries} tries")
    order = list(people)
    rng.shuffle(order)
    intro = rng.choice(_INTROS).format(a_good=_article(good), a_bad=_article(bad),
                                       goods=_plural(good), bads=_plural(bad))
    lines = [intro, f"You meet {len(people)} inhabitants: {', '.join(people)}."]
    for p in order:
        verb = rng.choice(_VERBS)
        lines.append(f'{p} {verb}: "{render_statement(stmts[p], p, good, bad, rng)}."')
    lines.append(f"Who is {_article(good)} and who is {_article(bad)}?")
    if (good, bad) != ("knight", "knave"):
        lines.append(f"(In the formal slots write knight(NAME) for {_article(good)} "
                     f"and knave(NAME) for {_article(bad)}.)")
    return Problem(
        task="knights_knaves",
        query={"people": list(people), "question": "roles"},
        text="\n".join(lines),
        mode="constructed",
        variables=tuple(people),
        data={"people": list(people), "statements": {p: to_text(stmts[p]) for p in order}, "roles": [good, bad]},
        id=f"kk-{n_people}-{seed}-{idx}",
        meta={"solution": format_assignment(hidden, people), "source": "knights", "encoding": "none",
              "people": n_people, "n_valid": 1, "generator": "calver.data_gen.knights", "seed": seed, "idx": idx},
    )
