"""Six-bit trace scoring, grading, and CALVER selection.

``score`` never raises on a trace: any failure becomes a 0 bit with a reason. It raises only on a
malformed *problem* (a ``ProblemError`` naming the field), since that is the caller's bug.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from calver.verifier.contract import SLOTS, parse_kv, split_slots
from calver.verifier.graph import GraphError
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import (
    Check,
    TraceContext,
    get_family,
    normalize_value,
    values_equal,
)

TIE_RULES = ("first", "best", "worst")


@dataclass
class TraceScore:
    bits: list[int]
    reasons: dict[str, str] = field(default_factory=dict)  # slot -> why its bit failed
    answer: Any = None  # the parsed ANSWER object (None if it did not parse)
    task: str = ""

    @property
    def total(self) -> int:
        return sum(self.bits)

    @property
    def max_score(self) -> bool:
        return self.total == len(SLOTS)

    def to_dict(self) -> dict[str, Any]:
        ans = self.answer
        if isinstance(ans, (set, frozenset)):
            ans = sorted(ans)
        elif isinstance(ans, tuple):
            ans = list(ans)
        return {"bits": list(self.bits), "total": self.total, "reasons": dict(self.reasons), "answer": ans}


_PROBLEM_CACHE: dict[int, tuple[Problem, dict[str, Any], dict[Any, Any]]] = {}


def _problem_state(problem: Problem, family) -> tuple[dict[str, Any], dict[Any, Any]]:
    """(normalized query, memo of slot checks that depend only on slot text + problem).

    A problem is scored K times and its candidates repeat GRAPH/QUERY slots, so b1 and b2 are
    computed once per distinct slot text. Keyed by identity: ``Problem`` is mutable, so callers
    that mutate a problem between scores get a fresh entry only for a new object.
    """
    hit = _PROBLEM_CACHE.get(id(problem))
    if hit is not None and hit[0] is problem:
        return hit[1], hit[2]
    q = family.normalize_query(problem)
    if len(_PROBLEM_CACHE) > 4096:
        _PROBLEM_CACHE.clear()
    _PROBLEM_CACHE[id(problem)] = (problem, q, {})
    return q, _PROBLEM_CACHE[id(problem)][2]


def _safe(fn, *args) -> Check:
    """Run one bit check; an unexpected exception fails the bit closed with its message."""
    try:
        result = fn(*args)
    except (ValueError, GraphError, KeyError, TypeError, RecursionError) as e:
        return Check.fail(f"{type(e).__name__}: {e}")
    if not isinstance(result, Check):  # a family bug must not score a bit by accident
        return Check.fail(f"internal: check returned {type(result).__name__}")
    return result


def score(trace_text: str, problem: Problem) -> TraceScore:
    """Score one trace against ``problem``: six bits, their total, and a reason per failed bit."""
    try:
        family = get_family(problem.task)
    except KeyError as e:
        return TraceScore([0] * 6, {s: f"unregistered task: {e.args[0]}" for s in SLOTS}, task=problem.task)
    query, memo = _problem_state(problem, family)
    slots = split_slots(trace_text)
    ctx = TraceContext(problem=problem, query=query, slots=slots)
    bits = [0] * 6
    reasons: dict[str, str] = {}

    def record(i: int, slot: str, check: Check) -> None:
        if check.ok:
            bits[i] = 1
        else:
            reasons[slot] = check.reason or f"{slot} check failed"

    # b1 graph ------------------------------------------------------------------------------
    gtext = slots.get("GRAPH")
    if gtext is None:
        record(0, "GRAPH", Check.fail(slots.problems["GRAPH"]))
    else:
        hit = memo.get(("GRAPH", gtext))
        if hit is None:
            try:
                parsed = family.parse_graph_slot(gtext, problem)
            except (ValueError, GraphError, RecursionError) as e:
                hit = (None, Check.fail(f"GRAPH does not parse: {e}"))
            else:
                hit = (parsed, _safe(family.check_graph, parsed, problem))
            memo[("GRAPH", gtext)] = hit
        ctx.trace_graph = hit[0]
        record(0, "GRAPH", hit[1])
    if problem.mode == "supplied":
        ctx.g_ver = family.verification_object(problem) if hasattr(family, "verification_object") else problem.graph
    elif bits[0]:
        ctx.g_ver = ctx.trace_graph  # constructed mode: only a well-formed own graph is usable

    # b2 query ------------------------------------------------------------------------------
    qkey = ("QUERY", slots.get("QUERY"))
    if qkey not in memo:
        memo[qkey] = _safe(check_query, slots, family, problem, query)
    record(1, "QUERY", memo[qkey])

    # objects --------------------------------------------------------------------------------
    for slot, attr in (("STRATEGY", "strategy"), ("ANSWER", "answer")):
        text = slots.get(slot)
        if text is None:
            setattr(ctx, attr + "_error", slots.problems[slot])
            continue
        try:
            setattr(ctx, attr, family.parse_object(text))
        except (ValueError, GraphError, RecursionError) as e:
            setattr(ctx, attr + "_error", f"{slot} does not parse as a {family.answer_type}: {e}")

    record(2, "STRATEGY", _safe(family.check_strategy, ctx))
    record(3, "DERIVATION", _safe(family.check_derivation, ctx))
    record(4, "RESULT", _safe(family.check_result, ctx))
    record(5, "ANSWER", _safe(family.check_answer, ctx))
    return TraceScore(bits, reasons, ctx.answer, problem.task)


def check_query(slots, family, problem: Problem, query: dict[str, Any]) -> Check:
    text = slots.get("QUERY")
    if text is None:
        return Check.fail(slots.problems["QUERY"])
    try:
        kv = parse_kv(text)
    except ValueError as e:
        return Check.fail(f"QUERY: {e}")
    task = kv.get("task", "").strip().strip("'\"`").lower()
    if task != family.name:
        return Check.fail(f"QUERY task is {task or 'missing'!r}, expected {family.name!r}")
    if problem.graph_class is not None and family.graph_label == "GRAPH":
        declared = kv.get("graph")
        if declared is None:
            return Check.fail("QUERY does not declare the graph class (graph=...)")
        try:
            from calver.verifier.graph import GraphClass

            if GraphClass.parse(declared) is not problem.graph_class:
                return Check.fail(f"QUERY graph class {declared!r} differs from {problem.graph_class.value}")
        except GraphError as e:
            return Check.fail(f"QUERY graph class: {e}")
    for key in family.query_keys:
        kind = family.query_types[key]
        if key not in kv:
            if key == "variant" and query.get("variant") == "any":
                continue
            return Check.fail(f"QUERY does not bind {key!r}")
        try:
            value = normalize_value(kind, kv[key])
        except (ValueError, GraphError) as e:
            return Check.fail(f"QUERY {key}: {e}")
        if not values_equal(kind, value, query[key]):
            return Check.fail(f"QUERY {key}={kv[key]} does not match the problem's {key}")
    return Check(True)


def grade(problem: Problem, answer: Any) -> bool:
    """Is ``answer`` correct for ``problem`` on its source graph (the task predicate, no reference)?

    ``answer`` may be ANSWER-slot text or a Python object (set of nodes, list path, bool, number,
    dict assignment). An answer that does not parse is wrong.
    """
    family = get_family(problem.task)
    if isinstance(answer, str):
        try:
            obj = family.parse_object(answer)
        except (ValueError, GraphError):
            return False
    else:
        try:
            obj = family.coerce_object(answer) if hasattr(family, "coerce_object") else answer
        except (ValueError, GraphError, TypeError):
            return False
    try:
        return bool(family.grade(problem, obj))
    except ProblemError:
        raise
    except (ValueError, GraphError, TypeError):
        return False


def select(traces: Sequence[str], problem: Problem, tie: str = "first") -> int:
    """CALVER: index of the earliest trace with the maximum score (``first``, the deployed rule).

    ``best`` / ``worst`` break score ties by the tied candidates' graded correctness (an audit
    oracle that reads the label: never deploy it).
    """
    if tie not in TIE_RULES:
        raise ValueError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    if not traces:
        raise ValueError("select needs at least one trace")
    totals = [score(t, problem).total for t in traces]
    return select_from_scores(totals, tie, traces=traces, problem=problem)


def select_from_scores(totals: Sequence[int], tie: str = "first", *, traces=None, problem=None, correct=None) -> int:
    best = max(totals)
    tied = [i for i, s in enumerate(totals) if s == best]
    if tie == "first" or len(tied) == 1:
        return tied[0]
    if correct is None:
        correct = {}
        for i in tied:
            sc = score(traces[i], problem)
            correct[i] = sc.answer is not None and grade(problem, sc.answer)
    want = tie == "best"
    for i in tied:
        if bool(correct[i]) == want:
            return i
    return tied[0]
