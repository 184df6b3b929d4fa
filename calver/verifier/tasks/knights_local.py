"""Candidate-local scoring of `knights_knaves`: a problem without ``data.statements``.

The label firewall drops the puzzle's formal statements from a problem marked
``meta["verification"] = "candidate_local"`` (:func:`calver.infer.firewall.strip_problem`), as the
paper's K&K study does: the selector sees the puzzle text, and CALVER checks each trace's assignment
against that trace's *own* CONSTRAINTS formalization, never the puzzle's. Grading still uses the
statements (on the unstripped problem).

The rule (b2, b4, b6 are as in grounded mode):

- b1: the CONSTRAINTS slot parses into at least one formula, names only the puzzle's people, and is a
  *complete, determinate formalization*:

  1. every formula is attributable to a speaker S (``knight(S) <-> φ`` / ``knave(S) <-> φ`` /
     ``φ <-> knight(S)``, :func:`~calver.verifier.logic.speakers`), and S is one of the puzzle's
     speakers (``data.speakers`` when the problem declares it — the firewall writes it, the statement
     keys, which the text shows anyway — else every person);
  2. coverage: every speaker gets a formula of its own (a matching of speakers to distinct formulas
     headed by them), so a formalization that leaves a speaker out cannot pass;
  3. determinacy: the conjunction has exactly one model. A roles puzzle asks who is who; a
     formalization that leaves several assignments open (empty, tautologies such as
     ``knight(A) <-> knight(A)`` for everyone) or none (a contradiction) has not formalized a puzzle
     with an answer. Every trace that passes grounded b1 with one formula per speaker passes this
     (a gradable puzzle has exactly one model), so the rule only removes degenerate formalizations.

- b3: the STRATEGY assignment satisfies the trace's own constraints; b5: the RESULT verdict and
  ``models=N`` equal the truth-table recomputation on the trace's own constraints. Both run only on a
  formalization that passed b1 (``TaskFamily.verification_graph``: the trace's graph only if b1
  passed); otherwise they fail, so a degenerate formalization earns no b3/b5 for free.

Why it resists gaming: the free formalizations (nothing, only tautologies, a subset of the speakers,
formulas no speaker heads, a contradiction that makes every "inconsistent" verdict right) all fail
b1 and with it b3/b5, so they reach at most 3/6 (b2, b4, b6) and never tie an honest 6/6 candidate.
What no candidate-local rule can catch is a *fabricated but determinate* formalization (say
``knight(A) <-> (knight(B) or knave(B))`` for every A, forcing all knights): the score then certifies
consistency with the trace's own claim, not correctness, which is the paper's design
(``TraceScore.grounded`` is False) and why the GRPO reward stays grounded.
"""

from __future__ import annotations

from typing import Any

from calver.verifier.family import PASS, Check, TraceContext
from calver.verifier.logic import Formula, TruthTable, count_models, names, speakers, to_text
from calver.verifier.problem import Problem, ProblemError

# meta["verification"] of a K&K problem: the firewall keeps (grounded) or drops (candidate_local) its statements
VERIFICATION_MODES: tuple[str, ...] = ("grounded", "candidate_local")


def problem_speakers(problem: Problem, people: tuple[str, ...]) -> tuple[str, ...]:
    """``data.speakers`` (validated, in the order of ``people``), or every person when absent."""
    declared = problem.data.get("speakers")
    if declared is None:
        return people
    if not isinstance(declared, (list, tuple)) or not all(isinstance(s, str) for s in declared):
        raise ProblemError("data field 'speakers' must be a list of people")
    unknown = [s for s in declared if s not in people]
    if unknown:
        raise ProblemError(f"data field 'speakers': {unknown[0][:40]!r} is not one of the people")
    if len(set(declared)) != len(declared):
        raise ProblemError("data field 'speakers' lists a person twice")
    return tuple(p for p in people if p in declared)


def _unmatched(heads: list[list[str]], who: tuple[str, ...]) -> str | None:
    """The first speaker of ``who`` that cannot get a formula of its own (``heads[k]``: the speakers
    formula k may be attributed to), or None when a matching covers them all (Kuhn's algorithm).
    A head set with at most two names can serve at most two speakers, so two copies of each suffice."""
    kept: list[list[str]] = []
    seen: dict[tuple[str, ...], int] = {}
    for h in heads:
        key = tuple(h)
        if seen.get(key, 0) < len(h):
            seen[key] = seen.get(key, 0) + 1
            kept.append(h)
    owner: dict[int, str] = {}

    def place(s: str, tried: set[int]) -> bool:
        for k, h in enumerate(kept):
            if s in h and k not in tried:
                tried.add(k)
                if k not in owner or place(owner[k], tried):
                    owner[k] = s
                    return True
        return False

    for s in who:
        if not place(s, set()):
            return s
    return None


def check_local_constraints(formulas: list[Formula], info: dict[str, Any]) -> Check:
    """Candidate-local b1 (see the module docstring)."""
    people, tt, who = info["people"], info["tt"], info["speakers"]
    if not formulas:
        return Check.fail("CONSTRAINTS are empty")
    used = set().union(*(names(f) for f in formulas))
    unknown = sorted(used - set(people))
    if unknown:
        return Check.fail(f"CONSTRAINTS name people not in the puzzle: {', '.join(unknown[:5])}")
    talkers = set(who)
    heads: list[list[str]] = []
    for k, f in enumerate(formulas, 1):
        cands = speakers(f)
        if not cands:
            return Check.fail(f"CONSTRAINTS formula {k} ({to_text(f)[:60]}) is not of the form knight(S) <-> "
                              "<what S said>, so it cannot be attributed to one speaker")
        ok = [s for s in cands if s in talkers]
        if not ok:
            return Check.fail(f"CONSTRAINTS formula {k} gives {cands[0]} a statement, but {cands[0]} says "
                              "nothing in the puzzle")
        heads.append(ok)
    missing = _unmatched(heads, who)
    if missing is not None:
        return Check.fail(f"CONSTRAINTS lack a formula of {missing}'s own (every speaker needs one)")
    n = count_models(tt.models(formulas))
    if n != 1:
        return Check.fail(f"CONSTRAINTS have {n} models: a formalization of the puzzle must determine every "
                          "role (exactly one satisfying assignment)")
    return PASS


def local_table(ctx: TraceContext, tt: TruthTable) -> tuple[int, Check]:
    """The models bitset of the trace's own constraints (``ctx.g_ver``, set only when b1 passed), or
    (0, a failed Check) when there is nothing to check against. Memoized per parsed slot."""
    g = ctx.g_ver
    if g is None:
        return 0, Check.fail("CONSTRAINTS did not pass b1, so there is no formalization to check against "
                             "(candidate-local scoring)")
    key = ("kk_local_models", id(g))
    hit = ctx.memo.get(key) if ctx.memo is not None else None
    if hit is None or hit[0] is not g:
        hit = (g, tt.models(g))
        if ctx.remember is not None:
            ctx.remember(key, 2 ** tt.n // 8, hit)
    return hit[1], PASS
