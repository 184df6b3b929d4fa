"""The 2026-12-03 audit's candidate-local knights-and-knaves battery (H1) as a library, shared by
``tests/test_knights_text.py`` (small, in CI) and ``benchmarks/attack_bench.py`` (at scale).

Every trace is scored on the label-firewall view of a ``meta["verification"] = "candidate_local"`` puzzle
(no formal statements: what the CALVER selector, the score table and ``calver bench`` score on), and
"wrong" is decided by the independent brute-force solver of ``tests/oracles.py`` over the puzzle's own
statements. Templates:

- A ``knight(S) <-> true`` for every speaker, answering "everyone is a knight" (the puzzle ignored);
- B ``knight(S) <-> true|false`` fixing a chosen wrong assignment;
- C each speaker given the next speaker's real statement (a misattribution), proposing its unique model;
- D the honest formalization with one literal flipped or one operator changed, proposing its unique model;
- control: the honest formalization proposing the true solution (must score 6/6).
A wrong answer at 6/6 is a reward hack and a selection error.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Iterator

from oracles import ev, kk_solutions, parse

from calver.infer.firewall import strip_problem
from calver.verifier import Problem, score

TEMPLATES = ("A", "B", "C", "D", "control")


def _fmt_set(xs) -> str:
    return "{" + ", ".join(xs) + "}"


def _assign(people, a) -> str:
    return ", ".join(f"{p}={'knight' if a[p] else 'knave'}" for p in people)


def kk_trace(people, constraints, a, n_models: int = 1) -> str:
    return (f"CONSTRAINTS: {'; '.join(constraints)}\n"
            f"QUERY: task=knights_knaves; people={_fmt_set(people)}; question=roles\n"
            f"STRATEGY: {_assign(people, a)}\n"
            f"DERIVATION: truth_table(people={_fmt_set(people)}, assignments={2 ** len(people)})\n"
            f"RESULT: consistent; models={n_models}\nANSWER: {_assign(people, a)}\n")


def candidate_local_view(p: Problem) -> Problem:
    return strip_problem(dataclasses.replace(p, meta={**p.meta, "verification": "candidate_local"}))


def _said(p: Problem) -> dict[str, str]:
    stmts = p.data["statements"]
    return {s: (v if isinstance(v, str) else " and ".join(f"({x})" for x in v)) for s, v in stmts.items()}


def _models(people, formulas: list[str]) -> list[dict[str, bool]]:
    fs = [parse(f) for f in formulas]
    out = []
    for bits in itertools.product((True, False), repeat=len(people)):
        v = dict(zip(people, bits))
        if all(ev(f, v) for f in fs):
            out.append(v)
    return out


def _mutants(stmt: str) -> Iterator[str]:
    """``stmt`` with one literal flipped or one binary operator replaced."""
    toks = stmt.replace("(", " ( ").replace(")", " ) ").split()
    for i, t in enumerate(toks):
        swap = {"knight": "knave", "knave": "knight", "and": "or", "or": "and", "->": "<->", "<->": "->"}.get(t)
        if swap:
            yield " ".join(toks[:i] + [swap] + toks[i + 1:]).replace("( ", "(").replace(" )", ")")


def attack_traces(p: Problem) -> Iterator[tuple[str, str, dict[str, bool]]]:
    """(template, trace, proposed assignment) for one puzzle with formal statements."""
    people = list(p.data["people"])
    said = _said(p)
    speakers = [s for s in people if s in said]
    honest = [f"knight({s}) <-> ({said[s]})" for s in speakers]
    allk = {q: True for q in people}
    yield "A", kk_trace(people, [f"knight({s}) <-> true" for s in speakers], allk), allk
    truth = kk_solutions(people, p.data["statements"])[0]
    wrong = {**truth, people[0]: not truth[people[0]]}
    fixing = [f"knight({s}) <-> {'true' if wrong[s] else 'false'}" for s in speakers]
    fixing += [f"knight({speakers[0]}) <-> (knight({speakers[0]}) <-> {'knight' if wrong[q] else 'knave'}({q}))"
               for q in people if q not in said]
    yield "B", kk_trace(people, fixing, wrong), wrong
    shifted = [f"knight({s}) <-> ({said[speakers[(k + 1) % len(speakers)]]})" for k, s in enumerate(speakers)]
    sols = _models(people, shifted)
    if len(sols) == 1:
        yield "C", kk_trace(people, shifted, sols[0]), sols[0]
    for k, s in enumerate(speakers):
        for m in _mutants(said[s]):
            cons = honest[:k] + [f"knight({s}) <-> ({m})"] + honest[k + 1:]
            sols = _models(people, cons)
            if len(sols) == 1:
                yield "D", kk_trace(people, cons, sols[0]), sols[0]
    yield "control", kk_trace(people, honest, truth), truth


def run(problems: list[Problem]) -> dict[str, Counter]:
    """Per template: traces, 6/6 on the view, wrong (oracle), wrong at 6/6, and control misses."""
    out: dict[str, Counter] = {t: Counter() for t in TEMPLATES}
    for p in problems:
        view = candidate_local_view(p)
        truth = kk_solutions(list(p.data["people"]), p.data["statements"])
        for name, tr, a in attack_traces(p):
            s = score(tr, view)
            c = out[name]
            c["traces"] += 1
            c["six"] += s.total == 6
            c["wrong"] += a not in truth
            c["wrong_six"] += s.total == 6 and a not in truth
            c["control_miss"] += name == "control" and s.total != 6
    return out
