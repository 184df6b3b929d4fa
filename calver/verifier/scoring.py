"""Six-bit trace scoring, grading, and CALVER selection.

``score`` never raises on a trace: any failure becomes a 0 bit with a reason. It raises only on a
malformed *problem* (a ``ProblemError`` naming the field), since that is the caller's bug.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from calver.verifier.contract import SLOTS, parse_kv, split_slots
from calver.verifier.family import Check, TraceContext
from calver.verifier.formats.objects import empty_set_word
from calver.verifier.graph import GraphError
from calver.verifier.memo import LOCK, charge
from calver.verifier.prepared import PreparedProblem, prepare
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import get_family
from calver.verifier.values import normalize_value, values_equal
from calver.verifier.verdict import Verdict

TIE_RULES = ("first", "best", "worst")


def _memo_put(memo: dict, key: tuple, text: str | int | None, value: Any, per_char: int = 8) -> Any:
    """Store ``value`` under ``key`` in a problem's slot memo, charged ``per_char`` bytes per character of
    ``text`` (or a character count)."""
    with LOCK:  # a drop in another thread clears ``memo``: store after the charge, never between
        charge(512 + per_char * (text if isinstance(text, int) else len(text or "")))
        memo[key] = value
    return value


def _safe(fn, *args) -> Check:
    """Run one bit check; an unexpected exception fails the bit closed with its message."""
    try:
        result = fn(*args)
    except (ValueError, GraphError, KeyError, TypeError, RecursionError) as e:
        return Check.fail(f"{type(e).__name__}: {e}")
    if not isinstance(result, Check):  # a family bug must not score a bit by accident
        return Check.fail(f"internal: check returned {type(result).__name__}")
    return result


def score(trace_text: str, problem: Problem | PreparedProblem) -> Verdict:
    """Score one trace against ``problem``: six bits, their total, and a reason per failed bit.

    A pool's candidates repeat GRAPH/QUERY/DERIVATION slots, so slot checks are memoized per problem
    (:mod:`calver.verifier.prepared`): pass a :class:`PreparedProblem` when scoring many traces, or the
    same unchanged ``Problem`` object (found again by identity and re-checked by equality)."""
    try:
        prepared = prepare(problem)
    except KeyError as e:  # only get_family's: prepare turns a family's KeyError into a ProblemError
        return Verdict([0] * 6, {s: f"unregistered task: {e.args[0]}" for s in SLOTS}, task=problem.task)
    problem, family, query, memo = prepared.problem, prepared.family, prepared.query, prepared.memo
    slots = split_slots(trace_text)
    ctx = TraceContext(problem=problem, query=query, slots=slots, memo=memo)
    ctx.remember = lambda key, size, value: _memo_put(memo, key, size, value)
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
            _memo_put(memo, ("GRAPH", gtext), gtext, hit, per_char=32)  # holds the parsed graph
        ctx.trace_graph = hit[0]
        record(0, "GRAPH", hit[1])
    # the source in both modes; sourceless constructed mode: the trace's own graph if it passed b1
    ctx.g_ver = family.verification_graph(problem, ctx.trace_graph, bits[0] == 1, prepared.source)

    # b2 query ------------------------------------------------------------------------------
    qkey = ("QUERY", slots.get("QUERY"), slots.problems.get("QUERY"))  # the reason differs by problem
    qcheck = memo.get(qkey)
    if qcheck is None:
        qcheck = _memo_put(memo, qkey, qkey[1], _safe(check_query, slots, family, problem, query))
    record(1, "QUERY", qcheck)

    # objects --------------------------------------------------------------------------------
    for slot, attr in (("STRATEGY", "strategy"), ("ANSWER", "answer")):
        text = slots.get(slot)
        if text is None:
            setattr(ctx, attr + "_error", slots.problems[slot])
            continue
        try:
            # the ANSWER has its own parser: a decision family's STRATEGY evidence is no answer there
            obj = (family.parse_answer if slot == "ANSWER" else family.parse_object)(text)
            ambiguous_empty(problem, text, obj)
            setattr(ctx, attr, obj)
        except (ValueError, GraphError, RecursionError) as e:
            setattr(ctx, attr + "_error", f"{slot} does not parse as a {family.answer_type}: {e}")

    record(2, "STRATEGY", _safe(family.check_strategy, ctx))
    reads = family.derivation_reads
    if reads is None:
        record(3, "DERIVATION", _safe(family.check_derivation, ctx))
    else:
        # The bit is a function of the slots it declares (text and parse problem), the problem and
        # the verification object: a pool's candidates repeat them, so it is computed once.
        parts = tuple((slots.get(s), slots.problems.get(s)) for s in reads)
        dkey = ("DERIVATION", id(ctx.g_ver), parts)
        hit = memo.get(dkey)
        if hit is None or hit[0] is not ctx.g_ver:
            size = sum(len(v or "") for v, _ in parts)
            hit = _memo_put(memo, dkey, size, (ctx.g_ver, _safe(family.check_derivation, ctx)))
        record(3, "DERIVATION", hit[1])
    record(4, "RESULT", _safe(family.check_result, ctx))
    record(5, "ANSWER", _safe(family.check_answer, ctx))
    return Verdict(bits, reasons, ctx.answer, problem.task, prepared.grounded, slots, ctx.trace_graph,
                      ctx.g_ver)


def verification_object(trace_text: str, problem: Problem | PreparedProblem) -> Any:
    """What ``trace_text`` is judged on, exactly as :func:`score` judges it (``Verdict.g_ver``):
    the problem's source (G*, or the family's formal object) when it has one, else the trace's own
    GRAPH slot if it passed b1, else None."""
    return score(trace_text, problem).g_ver


def is_grounded(problem: Problem | PreparedProblem) -> bool:
    """Whether scores on ``problem`` are judged against its source (see ``Verdict.grounded``).
    Raises ``KeyError`` for an unregistered task and ``ProblemError`` for a malformed problem."""
    if isinstance(problem, PreparedProblem):
        return problem.grounded
    return problem.mode == "supplied" or get_family(problem.task).verification_object(problem) is not None


def check_query(slots, family, problem: Problem, query: Mapping[str, Any]) -> Check:
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
            if key in family.query_defaults and query.get(key) == family.query_defaults[key]:
                continue
            return Check.fail(f"QUERY does not bind {key!r}")
        try:
            value = normalize_value(kind, kv[key])
        except (ValueError, GraphError) as e:
            return Check.fail(f"QUERY {key}: {e}")
        if not values_equal(kind, value, query[key]):
            return Check.fail(f"QUERY {key}={kv[key]} does not match the problem's {key}")
    return Check(True)


def ambiguous_empty(problem: Problem, text: str, obj: Any) -> None:
    """ValueError when ``text`` reads as the empty set through a word (``{none}``, ``nothing``) that also
    names a node of ``problem`` (any case): the writer may mean the node, so neither reading is taken.
    ``{}`` / ``set()`` is the empty set and ``{"none"}`` the node."""
    if obj != frozenset() or not isinstance(obj, frozenset):
        return
    word = empty_set_word(text)
    if word is None:
        return
    names = set(problem.graph.nodes) if problem.graph is not None else set()
    names.update(problem.variables or ())
    if any(n.lower() == word for n in names):
        raise ValueError(f"{text.strip()[:40]!r} is ambiguous: {word!r} names a node; write {{\"{word}\"}} for "
                         "the node or {} for the empty set")


def grade(problem: Problem | PreparedProblem, answer: Any) -> bool:
    """Is ``answer`` correct for ``problem`` on its source graph (the task predicate, no reference)?

    ``answer`` may be ANSWER-slot text or a Python object (set of nodes, list path, bool, number,
    dict assignment). An answer that does not parse is wrong.
    """
    if isinstance(problem, PreparedProblem):
        family, problem = problem.family, problem.problem
    else:
        family = get_family(problem.task)
    try:
        obj = family.object_for(problem, answer)  # problem-aware: K&K reads the puzzle's role words
        if isinstance(answer, str):
            ambiguous_empty(problem, answer, obj)
    except ProblemError:
        raise
    except (ValueError, GraphError, TypeError):
        return False
    try:
        return bool(family.grade(problem, obj))
    except ProblemError:
        raise
    except (ValueError, GraphError, TypeError):
        return False


def select(traces: Sequence[str], problem: Problem | PreparedProblem, tie: str = "first") -> int:
    """CALVER: among the traces with the maximum score, the earliest whose ANSWER parsed, else the
    earliest (``first``, the deployed rule; see :func:`select_from_scores`).

    ``best`` / ``worst`` break score ties by the tied candidates' graded correctness (an audit
    oracle that reads the label: never deploy it).
    """
    if tie not in TIE_RULES:
        raise ValueError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    if not traces:
        raise ValueError("select needs at least one trace")
    try:
        problem = prepare(problem)
    except KeyError:  # an unregistered task: score fails every trace closed
        pass
    scores = [score(t, problem) for t in traces]
    totals = [s.total for s in scores]
    correct = None
    if tie != "first":  # grade only the tied candidates, from the scores already computed
        top = max(totals)
        tied = [i for i, t in enumerate(totals) if t == top]
        if len(tied) > 1:
            correct = {i: scores[i].answer is not None and grade(problem, scores[i].answer) for i in tied}
    return select_from_scores(totals, tie, correct=correct, parsed=[s.answer is not None for s in scores])


def select_from_scores(totals: Sequence[int], tie: str = "first", *, traces=None, problem=None, correct=None,
                       parsed: Sequence[bool] | Mapping[int, bool] | None = None) -> int:
    """The CALVER rule on precomputed totals (the one implementation every caller uses).

    ``first``: among the candidates tied at the maximum total, the earliest whose ANSWER parsed
    (``parsed[i]``, i.e. ``Verdict.answer is not None``), else the earliest. An unparsable ANSWER
    can still score 5/6 through the STRATEGY fallback; it must not win a tie against an answer.
    ``parsed=None``: computed by scoring the tied ``traces`` on ``problem`` when both are given, else
    every candidate counts as parsed (the plain earliest maximum).

    ``best`` / ``worst`` (audit only): the earliest tied candidate graded correct / not correct
    (``correct[i]``, or graded from ``traces``), else the ``first`` choice.
    """
    if tie not in TIE_RULES:
        raise ValueError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    best = max(totals)
    tied = [i for i, s in enumerate(totals) if s == best]
    if len(tied) == 1:
        return tied[0]
    scored: dict[int, Verdict] = {}
    if (parsed is None or (tie != "first" and correct is None)) and traces is not None and problem is not None:
        scored = {i: score(traces[i], problem) for i in tied}
    if parsed is None and scored:
        parsed = {i: sc.answer is not None for i, sc in scored.items()}
    first = next((i for i in tied if parsed[i]), tied[0]) if parsed is not None else tied[0]
    if tie == "first":
        return first
    if correct is None:
        if not scored:
            raise ValueError(f"tie rule {tie!r} needs correct= or traces= and problem=")
        correct = {i: sc.answer is not None and grade(problem, sc.answer) for i, sc in scored.items()}
    want = tie == "best"
    for i in tied:
        if bool(correct[i]) == want:
            return i
    return first
