"""Knights-and-knaves puzzles from reasoning-gym (``reasoning_gym.logic.knights_knaves``), an external
source nobody here wrote (Xie et al.'s K&K generator, as packaged by reasoning-gym).

``reasoning_gym_kk(n_people, n, seed)`` draws ``n`` items of reasoning-gym's dataset (its own seeding:
item ``i`` of a dataset seeded ``s`` uses ``Random(s + i)``; the dataset seed is
``rg_seed(seed, n_people)``, so different calver seeds and sizes draw disjoint item windows) and
converts each into a calver ``knights_knaves`` Problem:

- ``text``: the puzzle exactly as reasoning-gym renders it (``item["question"]``);
- ``data.people``: its names, in its order; ``data.roles``: its role pair (knight/knave, saint/sinner, ...);
- ``data.statements``: its internal statement trees (``("telling-truth", i)``, ``("lying", i)``,
  ``("not", s)``, n-ary ``("and"|"or", s1, s2, ...)``, ``("->", a, b)``, ``("<=>", a, b)``) translated
  into calver's grammar (:mod:`calver.verifier.logic`).

Every item is then checked: calver's truth table must find exactly one solution, equal to
reasoning-gym's own (its ``metadata["solution"]`` and its answer text, read back with the puzzle's
role words, and reasoning-gym's ``score_answer`` of calver's answer must be 1.0). An item failing
any check is skipped and counted by reason. Needs ``pip install reasoning-gym`` (the ``bench`` extra).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from calver.verifier.logic import (
    Atom,
    Bin,
    Formula,
    Not,
    TruthTable,
    format_assignment,
    parse_assignment,
    says,
    to_text,
)
from calver.verifier.problem import Problem, ProblemError

INSTALL_HINT = "reasoning-gym is not installed: pip install reasoning-gym  (or: pip install -e '.[bench]')"
SKIP_REASONS = ("translation", "not_unique", "mismatch", "problem")
RG_DEPTH, RG_WIDTH = 2, 2  # reasoning-gym's defaults (KnightsKnavesConfig)


def available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("reasoning_gym") is not None
    except (ImportError, ValueError):  # a module blocked with sys.modules[name] = None
        return False


def rg_seed(seed: int, n_people: int) -> int:
    """The reasoning-gym dataset seed of a calver (seed, size): windows of 2^20 items never overlap."""
    return (int(seed) * 64 + int(n_people)) << 20


def to_formula(stmt: Any, names: list[str]) -> Formula:
    """One reasoning-gym statement tree as a calver formula (ValueError on anything unknown)."""
    if not isinstance(stmt, (tuple, list)) or not stmt:
        raise ValueError(f"not a statement: {stmt!r}")
    tag, args = stmt[0], stmt[1:]
    if tag in ("telling-truth", "lying"):
        if len(args) != 1 or not isinstance(args[0], int) or not 0 <= args[0] < len(names):
            raise ValueError(f"bad person index in {stmt!r}")
        return Atom(names[args[0]], tag == "telling-truth")
    subs = [to_formula(a, names) for a in args]
    if tag == "not" and len(subs) == 1:
        return Not(subs[0])
    if tag in ("and", "or") and len(subs) >= 2:
        out = subs[0]
        for f in subs[1:]:
            out = Bin(tag, out, f)
        return out
    if tag in ("->", "<=>") and len(subs) == 2:
        return Bin("->" if tag == "->" else "<->", subs[0], subs[1])
    raise ValueError(f"unknown statement {tag!r} with {len(subs)} argument(s)")


def convert_item(item: dict[str, Any], n_people: int, seed: int, idx: int,
                 score_answer: Callable[[str, dict], float] | None = None) -> Problem:
    """A reasoning-gym item as a calver Problem; ValueError('<reason>: ...') when a check fails.
    ``score_answer``: reasoning-gym's own scorer (the dataset's), which must give calver's answer 1.0."""
    md = item["metadata"]
    names = [str(x) for x in md["names"]]
    terms = md["knight_knave_terms"]
    good, bad = str(terms["knight"]), str(terms["knave"])
    try:
        stmts = {p: to_formula(s, names) for p, s in zip(names, md["statements"], strict=True)}
    except ValueError as e:
        raise ValueError(f"translation: {e}") from None
    people = list(names)
    problem = Problem(
        task="knights_knaves",
        query={"people": people, "question": "roles"},
        text=str(item["question"]),
        mode="constructed",
        variables=tuple(people),
        data={"people": people, "statements": {p: to_text(f) for p, f in stmts.items()}, "roles": [good, bad]},
        id=f"rgkk-{n_people}-{seed}-{idx}",
        meta={"source": "reasoning_gym", "encoding": "none", "people": n_people, "n_valid": 1,
              "generator": "reasoning_gym.logic.knights_knaves", "rg_seed": rg_seed(seed, n_people),
              "rg_index": idx, "seed": seed, "idx": idx},
    )
    from calver.verifier.registry import get_family

    family = get_family("knights_knaves")
    try:
        roles = family.info(problem)["roles"]
    except ProblemError as e:
        raise ValueError(f"problem: {e}") from None
    sols = TruthTable(people).solutions([says(p, f) for p, f in stmts.items()])
    if len(sols) != 1:
        raise ValueError(f"not_unique: calver's truth table finds {len(sols)} solutions")
    ours = sols[0]
    theirs = {p: bool(v) for p, v in zip(names, md["solution"], strict=True)}
    if ours != theirs:
        raise ValueError("mismatch: calver's solution differs from reasoning-gym's metadata")
    try:
        text_answer = parse_assignment(str(item["answer"]), roles)
    except ValueError as e:
        raise ValueError(f"mismatch: reasoning-gym's answer text does not read back: {e}") from None
    if text_answer != ours:
        raise ValueError("mismatch: calver's solution differs from reasoning-gym's answer text")
    if score_answer is not None:
        said = ", ".join(f"{p} is a {good if ours[p] else bad}" for p in people)
        if score_answer(said, item) != 1.0:
            raise ValueError("mismatch: reasoning-gym's score_answer rejects calver's solution")
    problem.meta["solution"] = format_assignment(ours, people)
    return problem


def reasoning_gym_kk(n_people: int, n: int, seed: int = 0) -> tuple[list[Problem], Counter]:
    """``n`` reasoning-gym puzzles of ``n_people`` people, converted and checked, and the skip counts
    (by reason). ImportError when reasoning-gym is not installed."""
    from reasoning_gym.logic.knights_knaves import KnightsKnavesConfig, KnightsKnavesDataset

    ds = KnightsKnavesDataset(KnightsKnavesConfig(n_people=n_people, depth_constraint=RG_DEPTH,
                                                  width_constraint=RG_WIDTH, size=n, seed=rg_seed(seed, n_people)))
    problems: list[Problem] = []
    skipped: Counter = Counter()
    for idx in range(n):
        item = ds[idx]
        try:
            problems.append(convert_item(item, n_people, seed, idx, ds.score_answer))
        except (ValueError, KeyError, TypeError) as e:
            reason = str(e).split(":", 1)[0]
            skipped[reason if reason in SKIP_REASONS else "problem"] += 1
    return problems, skipped
