"""`knights_knaves`: who is a knight (always truthful) and who is a knave (always lies)?

The CONSTRAINTS slot (the graph slot's analogue) holds the trace's own formalization in the closed
grammar of :mod:`calver.verifier.logic`; a truth-table engine replaces the graph predicates::

    CONSTRAINTS: knight(A) <-> knave(B); knight(B) <-> (knight(A) and knight(B))
    QUERY: task=knights_knaves; people={A, B}; question=roles
    STRATEGY: A=knave, B=knight
    DERIVATION: truth_table(people={A, B}, assignments=4)
    RESULT: consistent; models=1
    ANSWER: A=knave, B=knight

Bits: b1 the constraints parse and mention only the puzzle's people (supplied mode: and are
logically equivalent to the problem's statements); b2 QUERY binds the people and the question;
b3 the STRATEGY assignment covers exactly the people and satisfies the constraints of G_ver (the
trace's own constraints in constructed mode, the problem's in supplied mode); b4 the record names
``truth_table`` and binds the people (``assignments``, if given, equals 2^n); b5 the declared
verdict (consistent/inconsistent) and ``models=N`` equal the truth-table recomputation; b6 the
ANSWER equals the STRATEGY assignment. Grading uses the puzzle's unique solution, computed from
``data.statements`` (never from the trace).
"""

from __future__ import annotations

import re
from typing import Any

from calver.verifier.contract import assemble_trace, format_kv, format_set, parse_kv
from calver.verifier.logic import (
    Formula,
    TruthTable,
    count_models,
    format_assignment,
    names,
    parse_assignment,
    parse_constraints,
    parse_formula,
    says,
    to_text,
)
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import PASS, Check, TaskFamily, TraceContext, parse_bool, register

QUESTIONS = ("roles",)
_CACHE: dict[int, tuple[Problem, dict[str, Any]]] = {}


def problem_constraints(problem: Problem) -> tuple[tuple[str, ...], list[Formula]]:
    """The people and the constraints ``knight(S) <-> φ`` of ``data.statements``."""
    data = problem.data
    people = data.get("people")
    if not isinstance(people, (list, tuple)) or not people:
        raise ProblemError("knights_knaves problem needs data field 'people' (a non-empty list)")
    people = tuple(str(p) for p in people)
    stmts = data.get("statements")
    if not isinstance(stmts, dict):
        raise ProblemError("knights_knaves problem needs data field 'statements' (speaker -> formula or list)")
    out = []
    for speaker, said in stmts.items():
        if speaker not in people:
            raise ProblemError(f"data field 'statements': speaker {speaker!r} is not one of the people")
        for s in [said] if isinstance(said, str) else list(said):
            try:
                f = parse_formula(str(s))
            except ValueError as e:
                raise ProblemError(f"data field 'statements' ({speaker}): {e}") from None
            unknown = names(f) - set(people)
            if unknown:
                raise ProblemError(f"data field 'statements' ({speaker}) names unknown people: {', '.join(sorted(unknown))}")
            out.append(says(speaker, f))
    return people, out


@register
class KnightsKnaves(TaskFamily):
    name = "knights_knaves"
    description = "decide who is a knight (always tells the truth) and who is a knave (always lies)"
    operation = "truth_table"
    answer_type = "assignment"
    graph_classes = ()
    graph_label = "CONSTRAINTS"
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
        people, cons = problem_constraints(problem)
        tt = TruthTable(people)
        sols = tt.solutions(cons)
        info = {"people": people, "constraints": cons, "tt": tt, "solutions": sols}
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[id(problem)] = (problem, info)
        return info

    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        q = super().normalize_query(problem)
        info = self.info(problem)
        if q["people"] != frozenset(info["people"]):
            raise ProblemError("query field 'people' differs from data field 'people'")
        if q["question"] not in QUESTIONS:
            raise ProblemError(f"query field 'question' must be one of {QUESTIONS}, got {q['question']!r}")
        return q

    def verification_object(self, problem: Problem) -> list[Formula]:
        """Supplied mode: the problem's own constraints."""
        return self.info(problem)["constraints"]

    def solution(self, problem: Problem) -> dict[str, bool]:
        sols = self.info(problem)["solutions"]
        if len(sols) != 1:
            raise ProblemError(f"knights_knaves puzzle has {len(sols)} solutions; grading needs exactly one")
        return sols[0]

    def grade(self, problem: Problem, obj: Any) -> bool:
        return isinstance(obj, dict) and obj == self.solution(problem)

    def predicate(self, g: Any, query: dict[str, Any], obj: Any) -> Check:
        """``obj`` satisfies the constraint list ``g`` over the query's people."""
        tt = TruthTable(sorted(query["people"]))
        try:
            ok = tt.satisfies(g, obj)
        except ValueError as e:
            return Check.fail(str(e))
        return PASS if ok else Check.fail("the assignment violates a constraint")

    def validity_class(self, g: Any, query: dict[str, Any], limit: int | None = None) -> list[dict[str, bool]]:
        sols = TruthTable(sorted(query["people"])).solutions(g)
        return sols[:limit] if limit is not None else sols

    # ---- the constraints slot (b1) ---------------------------------------------------------------------
    def parse_graph_slot(self, text: str, problem: Problem) -> list[Formula]:
        return parse_constraints(text)

    def check_graph(self, trace_graph: Any, problem: Problem) -> Check:
        info = self.info(problem)
        people = set(info["people"])
        used = set().union(*(names(f) for f in trace_graph)) if trace_graph else set()
        unknown = sorted(used - people)
        if unknown:
            return Check.fail(f"CONSTRAINTS name people not in the puzzle: {', '.join(unknown[:5])}")
        if problem.mode == "supplied":
            tt: TruthTable = info["tt"]
            if tt.models(trace_graph) != tt.models(info["constraints"]):
                return Check.fail("CONSTRAINTS are not equivalent to the puzzle's statements")
        return PASS

    # ---- objects --------------------------------------------------------------------------------------
    def parse_object(self, text: str) -> dict[str, bool]:
        return parse_assignment(text)

    def coerce_object(self, obj: Any) -> dict[str, bool]:
        if isinstance(obj, str):
            return parse_assignment(obj)
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                out[str(k)] = v if isinstance(v, bool) else parse_assignment(f"{k}={v}")[str(k)]
            return out
        raise TypeError(f"expected an assignment, got {type(obj).__name__}")

    def format_object(self, obj: Any) -> str:
        return format_assignment(obj)

    def canonical_answer_key(self, obj: Any) -> Any:
        return frozenset(obj.items())

    def _tt(self, ctx: TraceContext) -> TruthTable:
        return self.info(ctx.problem)["tt"]

    # ---- bits -------------------------------------------------------------------------------------------
    def check_strategy(self, ctx: TraceContext) -> Check:
        if ctx.strategy is None:
            return Check.fail(ctx.strategy_error or "STRATEGY does not parse")
        if ctx.g_ver is None:
            return Check.fail("no verification constraints: the trace's CONSTRAINTS slot is unusable")
        tt = self._tt(ctx)
        try:
            ok = tt.satisfies(ctx.g_ver, ctx.strategy)
        except ValueError as e:
            return Check.fail(f"STRATEGY: {e}")
        return PASS if ok else Check.fail(f"STRATEGY {format_assignment(ctx.strategy, tt.people)} violates the constraints")

    def check_derivation(self, ctx: TraceContext) -> Check:
        args, check = self.derivation_call(ctx, ("people",))
        if args is None:
            return check
        if "assignments" in args:
            n = len(ctx.query["people"])
            if args["assignments"].strip() != str(2 ** n):
                return Check.fail(f"DERIVATION assignments={args['assignments']} but {n} people have {2 ** n}")
        return PASS

    def declared_result(self, text: str) -> tuple[bool, int]:
        m = re.match(r"\s*[*_`]*\s*([A-Za-z]+)\s*[*_`]*\s*[;,.:]?\s*(.*)$", text, re.DOTALL)
        if not m:
            raise ValueError(f"RESULT has no verdict: {text[:40]!r}")
        verdict = parse_bool(m.group(1))
        kv = parse_kv(m.group(2))
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
        if ctx.g_ver is None:
            return Check.fail("no verification constraints to recompute the result on")
        if ctx.strategy is None:
            return Check.fail("no STRATEGY assignment to recompute consistency for")
        tt = self._tt(ctx)
        t = tt.models(ctx.g_ver)
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
        return PASS

    # ---- rendering ----------------------------------------------------------------------------------------
    def canonical_trace(self, problem: Problem, obj: Any = None) -> str:
        """A trace with the problem's constraints proposing ``obj`` (default: the solution)."""
        info = self.info(problem)
        people, cons, tt = info["people"], info["constraints"], info["tt"]
        assignment = self.solution(problem) if obj is None else self.coerce_object(obj)
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

    def question_text(self, query: dict[str, Any]) -> str:
        return (f"Which of {', '.join(sorted(query['people']))} are knights and which are knaves? "
                "Give every person's role.")
