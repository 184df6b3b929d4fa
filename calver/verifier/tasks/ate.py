"""`ate_threshold`: does the average treatment effect of X on Y exceed a threshold τ?

The problem supplies a DAG and binary CPTs (``data.cpts``, see :mod:`calver.verifier.scm`), the
threshold τ (``query.threshold``) and the numeric tolerance ε (``data.epsilon``), both declared
before evaluation. A trace::

    GRAPH: Z -> X, Z -> Y, X -> Y
    QUERY: task=ate_threshold; treatment=X; outcome=Y; threshold=0.1; graph=DAG
    STRATEGY: {Z}
    DERIVATION: backdoor_adjust(treatment=X, outcome=Y, adjustment={Z}, p1=0.62, p0=0.41, effect=0.21)
    RESULT: 0.21
    ANSWER: yes

Bits: b1 GRAPH equals G* (supplied) / its parent sets equal the CPTs' conditioning sets
(constructed) — this binds the graph to the tables; b2 QUERY binds treatment, outcome and
threshold; b3 STRATEGY Z is a valid backdoor set on G_ver; b4 the record names ``backdoor_adjust``,
binds treatment/outcome, ``adjustment`` = STRATEGY, ``effect`` = RESULT, and (if given)
p1 − p0 = effect within ε; b5 |θ̂ − ψ(P; X, Y, Z)| ≤ ε; b6 ANSWER is yes iff the exact ATE (from the
CPTs) exceeds τ, and it does not contradict θ̂ where |θ̂ − τ| > ε.
The strict certificate (:func:`strict_certificate`) is reported separately.
"""

from __future__ import annotations

import math
import re
from itertools import combinations
from typing import Any

from calver.verifier.contract import assemble_trace, format_kv, format_set
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.family import PASS, Check, TaskFamily, TraceContext
from calver.verifier.registry import register
from calver.verifier.values import normalize_value
from calver.verifier.scm import BinarySCM, adjustment_arms, adjustment_functional, is_positive, true_ate

DEFAULT_EPSILON = 0.01
_YES = {"yes": True, "no": False, "true": True, "false": False}
_EMPTY = {"none", "empty", "{}", "∅", "[]", "-", "empty set", "the empty set"}
# one reading per digit run (``\d+\.?\d*`` split runs two ways: quadratic on '1'*19000 + 'x'); fullmatch only
_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_CACHE: dict[int, tuple[Problem, BinarySCM, dict[tuple, float]]] = {}


def parse_number(text: str, what: str = "RESULT") -> float:
    """A bare number (``0.1234``), or ``label = number`` / ``label: number`` (``ATE = 0.12``)."""
    t = text.strip().strip("*`").strip().rstrip(".").strip()
    if not _NUM.fullmatch(t):
        parts = re.split(r"[=:≈]", t)
        if len(parts) < 2:
            raise ValueError(f"{what} is not a number: {text[:40]!r}")
        t = parts[-1].strip().strip("*`").strip().rstrip(".").strip()
        if not _NUM.fullmatch(t):
            raise ValueError(f"{what} is not a number: {text[:40]!r}")
    x = float(t)
    if not math.isfinite(x):
        raise ValueError(f"{what} is not finite")
    return x


@register
class AteThreshold(TaskFamily):
    name = "ate_threshold"
    description = "decide whether the average treatment effect of treatment on outcome exceeds the threshold"
    operation = "backdoor_adjust"
    derivation_reads = ("DERIVATION", "STRATEGY", "RESULT")  # effect = RESULT is part of the binding
    answer_type = "bool"
    graph_classes = (GraphClass.DAG,)
    data_payload_keys = frozenset({"cpts"})
    query_keys = ("treatment", "outcome", "threshold")
    query_types = {"treatment": "node", "outcome": "node", "threshold": "number"}
    example_query = {"treatment": "X", "outcome": "Y", "threshold": 0.1}
    slot_docs = {
        "QUERY": "task=ate_threshold; treatment=<X>; outcome=<Y>; threshold=<τ as given>; graph=DAG",
        "STRATEGY": "the adjustment set Z you adjust for, e.g. {A, B} ({} for none); it must satisfy the backdoor "
        "criterion",
        "DERIVATION": "backdoor_adjust(treatment=X, outcome=Y, adjustment={...}, p1=<Σ_z P(Y=1|X=1,z)P(z)>, "
        "p0=<Σ_z P(Y=1|X=0,z)P(z)>, effect=<p1 - p0>)",
        "RESULT": "the estimated average treatment effect as a number, e.g. 0.1234",
        "ANSWER": "yes if the effect exceeds the threshold, else no",
    }

    # ---- problem side --------------------------------------------------------------------
    def scm(self, problem: Problem) -> BinarySCM:
        hit = _CACHE.get(id(problem))
        if hit is not None and hit[0] is problem:
            return hit[1]
        if "cpts" not in problem.data:
            raise ProblemError("ate_threshold problem is missing data field 'cpts'")
        try:
            scm = BinarySCM.from_data(problem.data["cpts"])
        except ValueError as e:
            raise ProblemError(f"data field 'cpts': {e}") from None
        if problem.graph is None:
            raise ProblemError("ate_threshold problem is missing field 'graph'")
        why = scm.check_graph(problem.graph)
        if why:
            raise ProblemError(f"data field 'cpts' does not match the graph: {why}")
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[id(problem)] = (problem, scm, {})
        return scm

    def _psi(self, problem: Problem, x: str, y: str, z: frozenset) -> float:
        scm = self.scm(problem)
        memo = _CACHE[id(problem)][2]
        key = (x, y, frozenset(z))
        if key not in memo:
            memo[key] = adjustment_functional(scm, x, y, sorted(z))
        return memo[key]

    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        q = super().normalize_query(problem)
        if q["treatment"] == q["outcome"]:
            raise ProblemError("query fields 'treatment' and 'outcome' must differ")
        self.scm(problem)
        eps = problem.data.get("epsilon", DEFAULT_EPSILON)
        try:
            eps = normalize_value("number", eps)
        except ValueError as e:
            raise ProblemError(f"data field 'epsilon': {e}") from None
        if eps <= 0:
            raise ProblemError("data field 'epsilon' must be positive")
        if "threshold" in problem.data:
            try:
                t = normalize_value("number", problem.data["threshold"])
            except ValueError as e:
                raise ProblemError(f"data field 'threshold': {e}") from None
            if abs(t - q["threshold"]) > 1e-12:
                raise ProblemError("data field 'threshold' differs from query field 'threshold'")
        q["epsilon"] = eps
        return q

    def grade(self, problem: Problem, obj: Any) -> bool:
        return isinstance(obj, bool) and obj == self.truth(problem)

    def is_valid_on(self, g: Any, query: dict[str, Any], obj: Any, problem: Problem | None = None) -> bool:
        """A decision is valid iff it is the exact one (ψ from the problem's CPTs, whatever ``g``);
        an adjustment set iff it satisfies the backdoor criterion on ``g``."""
        if isinstance(obj, bool):
            if problem is None:
                raise ValueError("an ate_threshold decision is judged on the problem's CPTs: pass the problem")
            return obj == (self.exact_effect(problem, query) > query["threshold"])
        from calver.verifier.primitives import is_backdoor_set

        z = frozenset(obj)
        return all(n in g for n in z) and is_backdoor_set(g, query["treatment"], query["outcome"], z)

    def validity_class(self, g: CausalGraph, query: dict[str, Any], limit: int | None = None) -> list[frozenset[str]]:
        """The *strategy* validity class: every valid backdoor set (answers are decisions: use ``grade``)."""
        from calver.verifier.primitives import descendants, enumerate_valid_sets, is_backdoor_set

        x, y = query["treatment"], query["outcome"]
        banned = {x, y} | descendants(g, x)
        cands = [n for n in g.nodes if n not in banned]
        return enumerate_valid_sets(g, cands, lambda z: is_backdoor_set(g, x, y, z), limit=limit)

    # ---- objects ---------------------------------------------------------------------------
    def parse_set(self, text: str) -> frozenset[str]:
        from calver.verifier.parsers import parse_node_set

        t = text.strip().strip(".*`").strip()
        if t.lower() in _EMPTY:
            return frozenset()
        return parse_node_set(t)

    def parse_object(self, text: str) -> Any:
        t = text.strip().strip(".*`!").strip().lower()
        if t in _YES:
            return _YES[t]
        return self.parse_set(text)

    def coerce_object(self, obj: Any) -> Any:
        if isinstance(obj, bool):
            return obj
        if isinstance(obj, str):
            return self.parse_object(obj)
        if isinstance(obj, (set, frozenset, list, tuple)):
            return frozenset(str(v) for v in obj)
        raise TypeError(f"expected yes/no or an adjustment set, got {type(obj).__name__}")

    def format_object(self, obj: Any) -> str:
        if isinstance(obj, bool):
            return "yes" if obj else "no"
        return format_set(obj)

    def canonical_answer_key(self, obj: Any) -> Any:
        return obj if isinstance(obj, bool) else frozenset(obj)

    def object_from_json(self, data: Any) -> Any:
        return data if isinstance(data, bool) else frozenset(data)  # the class holds adjustment sets

    def _strategy_set(self, ctx: TraceContext) -> frozenset[str] | None:
        s = ctx.strategy
        return None if s is None or isinstance(s, bool) else frozenset(s)

    def _theta(self, ctx: TraceContext) -> float:
        text = ctx.slots.get("RESULT")
        if text is None:
            raise ValueError(ctx.slots.problems["RESULT"])
        return parse_number(text)

    # ---- bits -----------------------------------------------------------------------------
    def check_graph(self, trace_graph: Any, problem: Problem) -> Check:
        base = super().check_graph(trace_graph, problem)
        if not base.ok or problem.mode == "supplied":
            return base
        why = self.scm(problem).check_graph(trace_graph)
        return Check.fail(f"GRAPH is not bound to the CPTs: {why}") if why else PASS

    def check_strategy(self, ctx: TraceContext) -> Check:
        from calver.verifier.primitives import backdoor_violation

        z = self._strategy_set(ctx)
        if z is None:
            return Check.fail(ctx.strategy_error or "STRATEGY must be an adjustment set")
        if ctx.g_ver is None:
            return Check.fail("no verification graph: the trace's GRAPH slot is unusable")
        unknown = sorted(n for n in z if n not in ctx.g_ver)
        if unknown:
            return Check.fail(f"STRATEGY names variable(s) not in the graph: {', '.join(unknown)}")
        why = backdoor_violation(ctx.g_ver, ctx.query["treatment"], ctx.query["outcome"], z)
        return Check.fail(why) if why else PASS

    def check_derivation(self, ctx: TraceContext) -> Check:
        args, check = self.derivation_call(ctx, ("treatment", "outcome"))
        if args is None:
            return check
        if "adjustment" not in args:
            return Check.fail("DERIVATION lacks argument 'adjustment'")
        z = self._strategy_set(ctx)
        if z is None:
            return Check.fail("DERIVATION cannot bind an unparsed STRATEGY")
        if self.parse_set(args["adjustment"]) != z:
            return Check.fail(f"DERIVATION adjustment={args['adjustment']} differs from STRATEGY")
        if "effect" not in args:
            return Check.fail("DERIVATION lacks argument 'effect'")
        effect = parse_number(args["effect"], "DERIVATION effect")
        theta = self._theta(ctx)
        if abs(effect - theta) > 1e-9 * max(1.0, abs(theta)):
            return Check.fail(f"DERIVATION effect={args['effect']} differs from RESULT {theta:g}")
        if ("p1" in args) != ("p0" in args):
            return Check.fail("DERIVATION gives only one of p1, p0")
        if "p1" in args:
            p1, p0 = parse_number(args["p1"], "DERIVATION p1"), parse_number(args["p0"], "DERIVATION p0")
            if not (0 <= p1 <= 1 and 0 <= p0 <= 1):
                return Check.fail("DERIVATION p1/p0 must be probabilities in [0, 1]")
            if abs((p1 - p0) - effect) > ctx.query["epsilon"] + 1e-12:
                return Check.fail(f"DERIVATION p1 - p0 = {p1 - p0:.6g} differs from effect {effect:g} by more than ε")
        return PASS

    def check_result(self, ctx: TraceContext) -> Check:
        theta = self._theta(ctx)
        z = self._strategy_set(ctx)
        if z is None:
            return Check.fail("no adjustment set to recompute ψ(P; X, Y, Z) on")
        q = ctx.query
        try:
            psi = self._psi(ctx.problem, q["treatment"], q["outcome"], z)
        except ValueError as e:
            return Check.fail(f"ψ(P; X, Y, Z) is undefined for Z = {format_set(z)}: {e}")
        if abs(theta - psi) > q["epsilon"] + 1e-12:
            return Check.fail(f"RESULT {theta:g} differs from ψ(P; X, Y, {format_set(z)}) = {psi:.6g} "
                              f"by more than ε = {q['epsilon']:g}")
        return PASS

    def exact_effect(self, problem: Problem, query: dict[str, Any] | None = None) -> float:
        """The ATE ψ computed exactly from the CPTs (truncated factorization), memoized per problem."""
        q = query if query is not None else self.normalize_query(problem)
        scm = self.scm(problem)
        memo = _CACHE[id(problem)][2]
        key = ("ate", q["treatment"], q["outcome"])
        if key not in memo:
            memo[key] = true_ate(scm, q["treatment"], q["outcome"])
        return memo[key]

    def truth(self, problem: Problem) -> bool:
        return self.exact_effect(problem) > self.normalize_query(problem)["threshold"]

    def check_answer(self, ctx: TraceContext) -> Check:
        """b6: the decision must be the exact one (ψ > τ, ψ from the CPTs), so an estimate inside the
        ε-margin cannot carry a wrong yes/no; and it must not contradict the trace's own RESULT where
        that estimate is clear of the margin."""
        if not isinstance(ctx.answer, bool):
            return Check.fail(ctx.answer_error or "ANSWER must be yes or no")
        tau, eps = ctx.query["threshold"], ctx.query["epsilon"]
        psi = self.exact_effect(ctx.problem, ctx.query)
        said = "yes" if ctx.answer else "no"
        if ctx.answer != (psi > tau):
            return Check.fail(f"ANSWER {said} is wrong: the exact effect {psi:.6g} is "
                              f"{'above' if psi > tau else 'not above'} the threshold {tau:g}")
        try:
            theta = self._theta(ctx)
        except ValueError as e:
            return Check.fail(f"ANSWER cannot be checked against RESULT: {e}")
        if abs(theta - tau) > eps and ctx.answer != (theta > tau):
            return Check.fail(f"ANSWER {said} disagrees with RESULT {theta:g} vs threshold {tau:g}")
        return PASS

    # ---- rendering ----------------------------------------------------------------------------
    def default_adjustment(self, problem: Problem) -> frozenset[str]:
        """A smallest valid backdoor set (ties: first in sorted order), else Pa(X)."""
        g, q = problem.graph, self.normalize_query(problem)
        from calver.verifier.primitives import descendants, is_backdoor_set

        x, y = q["treatment"], q["outcome"]
        banned = {x, y} | descendants(g, x)
        cands = sorted(n for n in g.nodes if n not in banned)
        for r in range(min(len(cands), 6) + 1):
            for c in combinations(cands, r):
                if is_backdoor_set(g, x, y, c):
                    return frozenset(c)
        return frozenset(g.parents(x))

    def canonical_trace(self, problem: Problem, obj: Any = None, *, witnesses: int | None = None) -> str:
        """A trace adjusting for ``obj`` when it is a set (default: :meth:`default_adjustment`);
        a bool ``obj`` is written as the ANSWER verbatim (it scores 6 iff it matches θ̂ vs τ)."""
        q = self.normalize_query(problem)
        z = frozenset(obj) if isinstance(obj, (set, frozenset, list, tuple)) else self.default_adjustment(problem)
        x, y = q["treatment"], q["outcome"]
        a1, a0 = adjustment_arms(self.scm(problem), x, y, sorted(z))
        theta = round(a1 - a0, 6)
        decision = obj if isinstance(obj, bool) else theta > q["threshold"]
        pairs = {"task": self.name, "treatment": x, "outcome": y, "threshold": f"{q['threshold']:g}", "graph": "DAG"}
        return assemble_trace({
            "GRAPH": problem.graph.to_text(),
            "QUERY": format_kv(pairs),
            "STRATEGY": format_set(z),
            "DERIVATION": f"{self.operation}(treatment={x}, outcome={y}, adjustment={format_set(z)}, "
                          f"p1={a1:.6f}, p0={a0:.6f}, effect={theta:.6f})",
            "RESULT": f"{theta:.6f}",
            "ANSWER": "yes" if decision else "no",
        })

    def question_text(self, query: dict[str, Any]) -> str:
        return (f"Is the average treatment effect of {query['treatment']} on {query['outcome']}, "
                f"P({query['outcome']}=1 | do({query['treatment']}=1)) - "
                f"P({query['outcome']}=1 | do({query['treatment']}=0)), "
                f"greater than {query['threshold']:g}? Answer yes or no.")


# ---- the strict ATE certificate ---------------------------------------------------------------
def strict_certificate(problem: Problem, trace: str) -> tuple[bool, list[str]]:
    """Whether ``trace`` earns the strict ATE certificate for ``problem`` (Theorem 1), and why not.

    Every guard is evaluated independently of the six-bit score (which it also requires):
    max score 6/6; the graph is a DAG and P is positive; Z ∩ ({X, Y} ∪ De(X)) = ∅ (reasons
    ``X in Z``, ``Y in Z``, ``descendant of X in Z``); X ⊥ Y | Z with X's outgoing edges removed
    (``backdoor path open``); and the recomputed ψ lies outside the margin (``inside margin
    |ψ−τ| ≤ ε``). Z is checked for membership *before* ψ is computed, so no number from an
    X ∈ Z adjustment is ever trusted. The graph and slots are the score's own (``TraceScore.g_ver``,
    ``TraceScore.slots``): G*, which the CPTs bind in both modes.
    """
    from calver.verifier.primitives import descendants, find_open_path, format_path
    from calver.verifier.registry import get_family
    from calver.verifier.scoring import score

    if problem.task != AteThreshold.name:
        return False, [f"the strict ATE certificate applies to ate_threshold problems, not {problem.task}"]
    fam = get_family(problem.task)
    reasons: list[str] = []
    q = fam.normalize_query(problem)
    x, y, tau, eps = q["treatment"], q["outcome"], q["threshold"], q["epsilon"]
    sc = score(trace, problem)
    if sc.total != 6:
        failed = ", ".join(sorted(sc.reasons)) or "?"
        reasons.append(f"not max score: {sc.total}/6 (failed {failed})")
    g = sc.g_ver
    if g is None:
        return False, reasons + ["no usable graph"]
    scm = fam.scm(problem)
    if g.kind is not GraphClass.DAG or not g.acyclic:
        reasons.append("graph is not a DAG")
    if not is_positive(scm):
        reasons.append("P is not positive")
    stext = sc.slots.get("STRATEGY")
    try:
        if stext is None:
            raise ValueError(sc.slots.problems.get("STRATEGY", "STRATEGY missing"))
        z = fam.parse_set(stext)
    except (ValueError, GraphError) as e:
        return False, reasons + [f"no adjustment set: {e}"]
    unknown = sorted(n for n in z if n not in g)
    if unknown:
        return False, reasons + [f"Z names unknown variable(s) {', '.join(unknown)}"]
    membership_ok = True
    if x in z:
        reasons.append(f"X in Z: the treatment {x} is in the adjustment set")
        membership_ok = False
    if y in z:
        reasons.append(f"Y in Z: the outcome {y} is in the adjustment set")
        membership_ok = False
    bad = sorted(z & descendants(g, x))
    if bad:
        reasons.append(f"descendant of X in Z: {', '.join(bad)}")
        membership_ok = False
    if not membership_ok:
        reasons.append("ψ not computed: Z violates treatment exclusion")
        return False, reasons
    path = find_open_path(g, x, y, z, remove_outgoing_of=x)
    if path is not None:
        reasons.append(f"backdoor path open: {format_path(path[0], path[1])}")
    try:
        psi = adjustment_functional(scm, x, y, z)
    except ValueError as e:
        return False, reasons + [f"ψ not computed: {e}"]
    if not abs(psi - tau) > eps:
        reasons.append(f"inside margin |ψ−τ| ≤ ε: |{psi:.6g} − {tau:g}| = {abs(psi - tau):.3g} ≤ {eps:g}")
    return not reasons, reasons
