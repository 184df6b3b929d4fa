"""`knights_knaves`: who is a knight (always truthful) and who is a knave (always lies)?

The CONSTRAINTS slot (the graph slot's analogue) holds the trace's own formalization in the closed
grammar of :mod:`calver.verifier.logic`; a truth-table engine replaces the graph predicates::

    CONSTRAINTS: knight(A) <-> knave(B); knight(B) <-> (knight(A) and knight(B))
    QUERY: task=knights_knaves; people={A, B}; question=roles
    STRATEGY: A=knave, B=knight
    DERIVATION: truth_table(people={A, B}, assignments=4)
    RESULT: consistent; models=1
    ANSWER: A=knave, B=knight

Bits: b1 the constraints parse, mention only the puzzle's people, and are — per person —
logically equivalent to ``data.statements`` (both modes): each formula is attributed to the speaker S
of ``knight(S) <-> φ`` / ``knave(S) <-> φ`` / ``φ <-> knight(S)``, and the conjunction of S's
formulas must have the truth table of what S said (a silent person gets none; a formula no speaker
heads fails); b2 QUERY binds the people and the question; b3 the STRATEGY assignment covers exactly
the people and satisfies the puzzle's constraints (the source, never the trace's); b4 the record
names ``truth_table`` and binds the people (``assignments``, if given, equals 2^n); b5 the declared
verdict (consistent/inconsistent) and ``models=N`` equal the truth-table recomputation on the
source; b6 the ANSWER equals the STRATEGY assignment. Assignments may use the puzzle's declared role
words (``data.roles``: truthful ↔ knight, lying ↔ knave). Grading uses the puzzle's unique
solution, computed from ``data.statements`` (never from the trace).

A problem without ``data.statements`` (``meta["verification"] == "candidate_local"``: the firewall drops
them) is judged on the statements read from its text (:mod:`.knights_text`; unreadable text fails b1, b3
and b5); it must be in constructed mode and is never graded (grading reads the unstripped problem).
"""

from __future__ import annotations

import re
from itertools import product
from typing import Any, Iterator, Mapping

from calver.verifier.contract import assemble_trace, format_kv, format_set, parse_kv
from calver.verifier.family import PASS, Check, TaskFamily, TraceContext
from calver.verifier.formats.common import RenderOrder
from calver.verifier.logic import (
    MAX_PEOPLE as _ENGINE_MAX_PEOPLE,
)
from calver.verifier.logic import (
    Formula,
    TruthTable,
    count_models,
    format_assignment,
    is_person_name,
    names,
    parse_assignment,
    parse_constraints,
    parse_formula,
    role_vocabulary,
    says,
    speakers,
    to_text,
)
from calver.verifier.memo import Memo
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.knights_text import PuzzleTextError, text_statements
from calver.verifier.values import parse_bool

QUESTIONS = ("roles",)
MAX_PEOPLE = _ENGINE_MAX_PEOPLE  # a puzzle's people (2^n truth tables); larger puzzles are refused at load
MAX_EXHAUSTIVE = 8  # ambiguous b1 attributions searched exhaustively (after the greedy pass) up to this many
_CACHE = Memo("knights puzzle")  # id(problem) -> (problem, info): truth tables of 2^n bits each


def _statement_list(speaker: str, said: Any) -> list[str]:
    if isinstance(said, str):
        return [said]
    if isinstance(said, (list, tuple)) and all(isinstance(x, str) for x in said):
        return list(said)
    raise ProblemError(f"data field 'statements' ({speaker}): expected a formula string or a list of them, "
                       f"got {type(said).__name__}")


def _problem_people(problem: Problem) -> tuple[str, ...]:
    """The validated ``data.people``; every defect is a ProblemError naming the field."""
    data = problem.data
    people = data.get("people")
    if not isinstance(people, (list, tuple)) or not people:
        raise ProblemError("knights_knaves problem needs data field 'people' (a non-empty list)")
    bad = [p for p in people if not is_person_name(p)]
    if bad:
        raise ProblemError(f"data field 'people': {str(bad[0])[:40]!r} is not a name the grammar can write "
                           "(letters, digits, '_', starting with a letter; not a keyword)")
    if len(people) > MAX_PEOPLE:
        raise ProblemError(f"data field 'people': {len(people)} people; at most {MAX_PEOPLE} are supported")
    if len(set(people)) != len(people):
        dup = next(p for i, p in enumerate(people) if p in people[:i])
        raise ProblemError(f"data field 'people' lists {dup!r} twice")
    return tuple(people)


def _problem_statements(problem: Problem) -> tuple[tuple[str, ...], dict[str, list[Formula]]]:
    """Validated people and each speaker's constraints; every defect is a ProblemError naming the field."""
    people = _problem_people(problem)
    stmts = problem.data.get("statements")
    if not isinstance(stmts, dict):
        raise ProblemError("knights_knaves problem needs data field 'statements' (speaker -> formula or list)")
    out: dict[str, list[Formula]] = {}
    for speaker, said in stmts.items():
        if speaker not in people:
            raise ProblemError(f"data field 'statements': speaker {str(speaker)[:40]!r} is not one of the people")
        for s in _statement_list(speaker, said):
            try:
                f = parse_formula(s)
            except ValueError as e:
                raise ProblemError(f"data field 'statements' ({speaker}): {e}") from None
            unknown = names(f) - set(people)
            if unknown:
                raise ProblemError(f"data field 'statements' ({speaker}) names unknown people: "
                                   f"{', '.join(sorted(unknown))}")
            out.setdefault(speaker, []).append(says(speaker, f))
    return people, out


def problem_roles(problem: Problem, people: tuple[str, ...]) -> dict[str, bool]:
    """The extra role words of ``data.roles`` (``[truthful, lying]``); ProblemError if ambiguous."""
    roles = problem.data.get("roles")
    if roles is None:
        return {}
    if not isinstance(roles, (list, tuple)) or len(roles) != 2:
        raise ProblemError("data field 'roles' must be [truthful role, lying role]")
    try:
        return role_vocabulary(roles[0], roles[1], people)
    except ValueError as e:
        raise ProblemError(f"data field 'roles': {e}") from None


def attribute_constraints(formulas: list[Formula], tt: TruthTable, said: dict[str, int]) -> Check:
    """b1: group ``formulas`` by speaker (:func:`~calver.verifier.logic.speakers`) so that, for every
    person S, the conjunction of S's formulas has the truth table ``said[S]`` (S's statements; a silent
    S, absent from ``said``, must get none). A formula may go to S only if S's statements imply it, so
    each group can only shrink towards ``said[S]``; a formula headed on both sides by a person
    (``knight(A) <-> knave(B)``) goes where it is needed (greedy, then exhaustive for a few)."""
    full = tt.full
    cur = {s: full for s in said}
    ambiguous: list[tuple[int, list[str]]] = []
    for k, f in enumerate(formulas, 1):
        cands = speakers(f)
        if not cands:
            return Check.fail(f"CONSTRAINTS formula {k} ({to_text(f)[:60]}) is not of the form knight(S) <-> "
                              "<what S said>, so it cannot be attributed to one speaker")
        t = tt.table(f)
        ok = [s for s in cands if s in said and not said[s] & (full ^ t)]
        if not ok:
            s = cands[0]
            if s not in said and len(cands) == 1:
                return Check.fail(f"CONSTRAINTS formula {k} gives {s} a statement, but {s} says nothing in the puzzle")
            return Check.fail(f"CONSTRAINTS formula {k} is not equivalent to what {' or '.join(cands)} "
                              "said in the puzzle")
        if len(ok) == 1:
            cur[ok[0]] &= t
        else:
            ambiguous.append((t, ok))
    base = dict(cur)
    for t, ok in ambiguous:  # greedy: to the first person whose group it still narrows
        s = next((s for s in ok if cur[s] & t != cur[s]), ok[0])
        cur[s] &= t
    if any(cur[s] != said[s] for s in said) and 0 < len(ambiguous) <= MAX_EXHAUSTIVE:
        for choice in product((0, 1), repeat=len(ambiguous)):
            trial = dict(base)
            for (t, ok), c in zip(ambiguous, choice):
                trial[ok[c]] &= t
            if all(trial[s] == said[s] for s in said):
                return PASS
    for s in tt.people:
        if s in said and cur[s] != said[s]:
            if cur[s] == full:
                return Check.fail(f"CONSTRAINTS lack {s}'s statement")
            return Check.fail(f"CONSTRAINTS for {s} are not equivalent to what {s} said in the puzzle")
    return PASS


def _source_tables(people: tuple[str, ...], by_speaker: dict[str, list[Formula]]) -> dict[str, Any]:
    """The truth tables b1-b5 are judged on: each speaker's (b1) and all constraints' models as one bitset
    (solutions are decoded only for grading: a 20-person puzzle may have 2^20)."""
    tt = TruthTable(people)
    cons = [c for cs in by_speaker.values() for c in cs]
    return {"tt": tt, "constraints": cons, "said": {s: tt.models(cs) for s, cs in by_speaker.items()},
            "table": tt.models(cons)}


def _cache_info(problem: Problem, info: dict[str, Any]) -> dict[str, Any]:
    tables = 2 + len(info["said"])
    cost = 4096 + tables * (2 ** len(info["people"]) // 8) + 256 * len(info["constraints"] or ())
    _CACHE.put(id(problem), (problem, info), cost)
    return info


def text_reads_back(problem: Problem) -> str:
    """"" when the text reads into statements equivalent, speaker by speaker, to ``data.statements``; else why."""
    people, formal = _problem_statements(problem)
    try:
        read = text_statements(problem, people)
    except PuzzleTextError as e:
        return str(e)
    if set(read) != set(formal):
        return "the text's speakers differ from the statements' speakers"
    tt = TruthTable(people)
    bad = next((s for s in formal if tt.models(read[s]) != tt.models(formal[s])), None)
    return "" if bad is None else f"{bad}'s statement reads back as another formula"


@register
class KnightsKnaves(TaskFamily):
    name = "knights_knaves"
    description = "decide who is a knight (always tells the truth) and who is a knave (always lies)"
    operation = "truth_table"
    derivation_reads = ("DERIVATION",)
    answer_type = "assignment"
    graph_classes = ()
    graph_label = "CONSTRAINTS"
    data_payload_keys = frozenset({"statements", "people", "roles", "speakers"})
    query_keys = ("people", "question")
    query_types = {"people": "set", "question": "word"}
    example_query = {"people": ["A", "B"], "question": "roles"}
    slot_docs = {
        "GRAPH": "one formula per speaker S: knight(S) <-> <what S said>, separated by ';'. Grammar: knight(A), "
        "knave(A), not, and, or, -> (implies), <-> (iff), parentheses",
        "QUERY": "task=knights_knaves; people={every person, comma-separated}; question=roles",
        "STRATEGY": "the proposed assignment, e.g. A=knight, B=knave (every person)",
        "DERIVATION": "truth_table(people={A, B, ...}, assignments=<2^n>)",
        "RESULT": "consistent or inconsistent (does STRATEGY satisfy CONSTRAINTS), then models=<number of satisfying "
        "assignments>, e.g. consistent; models=1",
        "ANSWER": "the assignment only, e.g. A=knight, B=knave",
    }

    # ---- problem side -----------------------------------------------------------------------------
    def info(self, problem: Problem) -> dict[str, Any]:
        hit = _CACHE.get(id(problem))
        if hit is not None and hit[0] is problem:
            return hit[1]
        if "statements" not in problem.data:
            return self._local_info(problem)
        people, by_speaker = _problem_statements(problem)
        info = {"people": people, "roles": problem_roles(problem, people), "grounded": True,
                **_source_tables(people, by_speaker)}
        return _cache_info(problem, info)

    def _local_info(self, problem: Problem) -> dict[str, Any]:
        """A candidate-local problem: no formal statements, so they are read from the puzzle text; when the
        reader cannot, ``constraints`` is None and ``text_error`` says why (b1, b3 and b5 then fail)."""
        people = _problem_people(problem)
        if problem.mode != "constructed":
            raise ProblemError("a knights_knaves problem without data field 'statements' is scored candidate-locally "
                               "and must be in mode 'constructed'")
        info: dict[str, Any] = {"people": people, "roles": problem_roles(problem, people), "grounded": False,
                                "tt": TruthTable(people), "constraints": None, "said": {}, "text_error": ""}
        try:
            by_speaker = text_statements(problem, people)
        except PuzzleTextError as e:
            info["text_error"] = f"the puzzle text cannot be read: {e}"
            return _cache_info(problem, info)
        info.update(_source_tables(people, by_speaker))
        return _cache_info(problem, info)

    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        q = super().normalize_query(problem)
        info = self.info(problem)
        if q["people"] != frozenset(info["people"]):
            raise ProblemError("query field 'people' differs from data field 'people'")
        if q["question"] not in QUESTIONS:
            raise ProblemError(f"query field 'question' must be one of {QUESTIONS}, got {q['question']!r}")
        return q

    def verification_object(self, problem: Problem) -> list[Formula] | None:
        """The puzzle's constraints: from its formal statements, or read from its text (candidate-local);
        None when the text cannot be read."""
        return self.info(problem)["constraints"]

    def _grounded_info(self, problem: Problem, what: str) -> dict[str, Any]:
        info = self.info(problem)
        if not info["grounded"]:
            raise ProblemError(f"knights_knaves problem {problem.id!r} has no data field 'statements': {what} needs "
                               "the puzzle's statements (a candidate-local problem is scored, never graded; grade "
                               "the unstripped problem)")
        return info

    def solution(self, problem: Problem) -> dict[str, bool]:
        info = self._grounded_info(problem, "grading")
        n = count_models(info["table"])
        if n != 1:
            raise ProblemError(f"data field 'statements': the puzzle has {n} solutions; grading needs exactly one")
        return info["tt"].decode(info["table"].bit_length() - 1)

    def grade(self, problem: Problem, obj: Any) -> bool:
        return isinstance(obj, dict) and obj == self.solution(problem)

    def object_for(self, problem: Problem, answer: Any) -> dict[str, bool]:
        """An answer (text or mapping) read with the puzzle's own role words (``scoring.grade``)."""
        roles = self.info(problem)["roles"]
        if isinstance(answer, str):
            return parse_assignment(answer, roles)
        return self.coerce_object(answer, roles)

    def predicate(self, g: Any, query: Mapping[str, Any], obj: Any) -> Check:
        """``obj`` satisfies the constraint list ``g`` over the query's people."""
        tt = TruthTable(sorted(query["people"]))
        try:
            ok = tt.satisfies(g, obj)
        except ValueError as e:
            return Check.fail(str(e))
        return PASS if ok else Check.fail("the assignment violates a constraint")

    def validity_class(self, g: Any, query: Mapping[str, Any], limit: int | None = None) -> list[dict[str, bool]]:
        sols = TruthTable(sorted(query["people"])).solutions(g)
        return sols[:limit] if limit is not None else sols

    # ---- the constraints slot (b1) ---------------------------------------------------------------------
    def parse_graph_slot(self, text: str, problem: Problem) -> list[Formula]:
        return parse_constraints(text)

    def check_graph(self, trace_graph: Any, problem: Problem) -> Check:
        """b1: per person, the trace's formulas are equivalent to what that person said (in the formal
        statements, or in the puzzle text as :mod:`~.knights_text` reads it)."""
        info = self.info(problem)
        if info["constraints"] is None:
            return Check.fail(info["text_error"])
        used = set().union(*(names(f) for f in trace_graph)) if trace_graph else set()
        unknown = sorted(used - set(info["people"]))
        if unknown:
            return Check.fail(f"CONSTRAINTS name people not in the puzzle: {', '.join(unknown[:5])}")
        return attribute_constraints(trace_graph, info["tt"], info["said"])

    # ---- objects --------------------------------------------------------------------------------------
    def parse_object(self, text: str) -> dict[str, bool]:
        return parse_assignment(text)

    def coerce_object(self, obj: Any, roles: dict[str, bool] | None = None) -> dict[str, bool]:
        if isinstance(obj, str):
            return parse_assignment(obj, roles)
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                out[str(k)] = v if isinstance(v, bool) else parse_assignment(f"{k}={v}", roles)[str(k)]
            return out
        raise TypeError(f"expected an assignment, got {type(obj).__name__}")

    def format_object(self, obj: Any) -> str:
        return format_assignment(obj)

    def canonical_answer_key(self, obj: Any) -> Any:
        return frozenset(obj.items())

    def answer_candidates(self, g: Any, answer: Any, rng: Any) -> Iterator[dict[str, bool]]:
        """The answer with one person's role flipped, person by person (sorted)."""
        if isinstance(answer, dict):
            for person in sorted(answer):
                yield {**answer, person: not answer[person]}

    def _tt(self, ctx: TraceContext) -> TruthTable:
        return self.info(ctx.problem)["tt"]

    def _objects(self, ctx: TraceContext) -> None:
        """Re-read STRATEGY/ANSWER with the puzzle's declared role words (the scorer's generic
        ``parse_object`` knows only the built-in ones); once per trace."""
        if ctx.extra.get("kk_roles_read"):
            return
        ctx.extra["kk_roles_read"] = True
        roles = self.info(ctx.problem)["roles"]
        if not roles:
            return
        for slot, attr in (("STRATEGY", "strategy"), ("ANSWER", "answer")):
            text = ctx.slots.get(slot)
            if text is None:
                continue
            try:
                setattr(ctx, attr, parse_assignment(text, roles))
                setattr(ctx, attr + "_error", "")
            except ValueError as e:
                setattr(ctx, attr, None)
                setattr(ctx, attr + "_error", f"{slot} does not parse as an assignment: {e}")

    # ---- bits (b3-b5 always on the puzzle's own constraints, never the trace's) --------------------------
    def check_strategy(self, ctx: TraceContext) -> Check:
        self._objects(ctx)
        if ctx.strategy is None:
            return Check.fail(ctx.strategy_error or "STRATEGY does not parse")
        tt, table, check = self._table(ctx)
        if not check.ok:
            return check
        try:
            ok = bool((table >> tt.code(ctx.strategy)) & 1)
        except ValueError as e:
            return Check.fail(f"STRATEGY: {e}")
        if ok:
            return PASS
        return Check.fail(f"STRATEGY {format_assignment(ctx.strategy, tt.people)} violates the puzzle's statements")

    def _table(self, ctx: TraceContext) -> tuple[TruthTable, int, Check]:
        """What b3/b5 are judged on: the puzzle's models (from its statements or its text)."""
        info = self.info(ctx.problem)
        if info["constraints"] is None:
            return info["tt"], 0, Check.fail(info["text_error"])
        return info["tt"], info["table"], PASS

    def check_derivation(self, ctx: TraceContext) -> Check:
        args, check = self.derivation_call(ctx, ("people",))
        if args is None:
            return check
        if "assignments" in args:
            n = len(ctx.query["people"])
            if args["assignments"].strip() != str(2 ** n):
                return Check.fail(f"DERIVATION assignments={args['assignments']} but {n} people have {2 ** n}")
        return PASS

    @staticmethod
    def _split_result(text: str) -> tuple[bool, str]:
        """(the RESULT verdict, the text after it)."""
        # one character class before the verdict: linear (``\s*[*_`]*\s*`` backtracked quadratically)
        m = re.match(r"[\s*_`]*([A-Za-z]+)\s*[*_`]*\s*[;,.:]?\s*(.*)$", text, re.DOTALL)
        if not m:
            raise ValueError(f"RESULT has no verdict: {text[:40]!r}")
        return parse_bool(m.group(1)), m.group(2)

    def declared_result(self, text: str) -> tuple[bool, int]:
        verdict, rest = self._split_result(text)
        kv = parse_kv(rest)
        if "models" not in kv:
            raise ValueError("RESULT does not state models=<number of satisfying assignments>")
        try:
            models = int(kv["models"].strip().rstrip("."))
        except ValueError:
            raise ValueError(f"RESULT models={kv['models']!r} is not an integer") from None
        return verdict, models

    def check_result(self, ctx: TraceContext) -> Check:
        text = ctx.slots.get("RESULT")
        if text is None:
            return Check.fail(ctx.slots.problems["RESULT"])
        verdict, models = self.declared_result(text)
        self._objects(ctx)
        if ctx.strategy is None:
            return Check.fail("no STRATEGY assignment to recompute consistency for")
        tt, t, check = self._table(ctx)
        if not check.ok:
            return Check.fail(f"RESULT cannot be recomputed: {check.reason}")
        try:
            actual = bool((t >> tt.code(ctx.strategy)) & 1)
        except ValueError as e:
            return Check.fail(f"RESULT cannot be recomputed: {e}")
        n_models = count_models(t)
        if verdict != actual:
            return Check.fail(f"RESULT says {'consistent' if verdict else 'inconsistent'} but the truth table says "
                              f"{'consistent' if actual else 'inconsistent'}")
        if models != n_models:
            return Check.fail(f"RESULT says models={models} but the constraints have {n_models} model(s)")
        return PASS

    def check_answer(self, ctx: TraceContext) -> Check:
        self._objects(ctx)
        if ctx.answer is None:
            return Check.fail(ctx.answer_error or "ANSWER does not parse")
        people = self.info(ctx.problem)["people"]
        missing = [p for p in people if p not in ctx.answer]
        extra = sorted(set(ctx.answer) - set(people))
        if missing or extra:
            return Check.fail("ANSWER must assign exactly the puzzle's people"
                              + (f"; missing {', '.join(missing)}" if missing else "")
                              + (f"; unknown {', '.join(extra)}" if extra else ""))
        if ctx.strategy is None:
            return Check.fail("ANSWER cannot be checked against an unparsed STRATEGY")
        if ctx.answer != ctx.strategy:
            return Check.fail(f"ANSWER {format_assignment(ctx.answer, people)} differs from STRATEGY "
                              f"{format_assignment(ctx.strategy, people)}")
        # as in the set families: an answer the trace's own RESULT disowns earns no bit
        text = ctx.slots.get("RESULT")
        try:
            verdict = self._split_result(text)[0] if text is not None else None
        except ValueError:
            verdict = None
        if verdict is not True:
            return Check.fail("ANSWER gives an assignment although RESULT does not declare it consistent")
        return PASS

    # ---- rendering ----------------------------------------------------------------------------------------
    def canonical_trace(self, problem: Problem, obj: Any = None, *, witnesses: int | None = None,
                        order: RenderOrder | None = None, graph_text: str | None = None) -> str:
        """A trace with the problem's constraints proposing ``obj`` (default: the solution); no graph, so
        ``order`` and ``graph_text`` are not read."""
        info = self._grounded_info(problem, "a canonical trace")
        people, cons, tt = info["people"], info["constraints"], info["tt"]
        assignment = self.solution(problem) if obj is None else self.object_for(problem, obj)
        t = tt.models(cons)
        consistent = bool((t >> tt.code(assignment)) & 1)
        return assemble_trace({
            "GRAPH": "; ".join(to_text(f) for f in cons),
            "QUERY": format_kv({"task": self.name, "people": format_set(people), "question": "roles"}),
            "STRATEGY": format_assignment(assignment, people),
            "DERIVATION": f"{self.operation}(people={format_set(people)}, assignments={2 ** len(people)})",
            "RESULT": f"{'consistent' if consistent else 'inconsistent'}; models={count_models(t)}",
            "ANSWER": format_assignment(assignment, people),
        }, graph_label=self.graph_label)

    def question_text(self, query: Mapping[str, Any]) -> str:
        return (f"Which of {', '.join(sorted(query['people']))} are knights and which are knaves? "
                "Give every person's role.")
