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
The strict certificate (:func:`calver.verifier.ate_certificate.strict_certificate`) is reported
separately.

b6 and ``grade`` decide θ > τ, and b6 RESULT vs τ ± ε, in exact rationals (numbers read as the
decimals they write, :mod:`calver.verifier.scm_exact`), so no rounding flips a tie (0.4 − 0.1 vs 0.3,
a zero effect vs τ = 0); the decision is computed once per problem. b4/b5 stay in floats (ψ from a
cached joint). The CPTs state every parent set, so a constructed-mode problem without ``graph``
(behind the label firewall) is judged on the DAG they state, which the policy saw too.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from itertools import combinations
from typing import Any, Mapping

from calver.verifier.budget import TooLargeToGrade
from calver.verifier.contract import assemble_trace, format_kv, format_set
from calver.verifier.family import PASS, Check, TaskFamily, TraceContext
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.memo import Memo, charge
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import register
from calver.verifier.scm import BinarySCM, adjustment_arms, adjustment_functional, decide_ate
from calver.verifier.scm_exact import AteDecision, exact_ate, exact_number, format_exact, margin_side
from calver.verifier.values import format_value, normalize_value

DEFAULT_EPSILON = 0.01
_YES = {"yes": True, "no": False, "true": True, "false": False}
_EMPTY = {"none", "empty", "{}", "∅", "[]", "-", "empty set", "the empty set"}
# one reading per digit run (``\d+\.?\d*`` split runs two ways: quadratic on '1'*19000 + 'x'); fullmatch only
_NUM = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# id(problem) -> (problem, SCM, info): info holds the CPT graph, the exact decisions and ψ per Z,
# charged to the verifier's memo budget (calver.verifier.memo)
_CACHE = Memo("ate problem")
_PSI_COST = 256  # bytes charged per memoized ψ


def parse_number(text: str, what: str = "RESULT") -> float:
    """A bare number (``0.1234``), or ``label = number`` / ``label: number`` (``ATE = 0.12``)."""
    return float(_numeral(text, what))


def _numeral(text: str, what: str) -> str:
    t = text.strip().strip("*`").strip().rstrip(".").strip()
    if not _NUM.fullmatch(t):
        parts = re.split(r"[=:≈]", t)
        if len(parts) < 2:
            raise ValueError(f"{what} is not a number: {text[:40]!r}")
        t = parts[-1].strip().strip("*`").strip().rstrip(".").strip()
        if not _NUM.fullmatch(t):
            raise ValueError(f"{what} is not a number: {text[:40]!r}")
    if not math.isfinite(float(t)):
        raise ValueError(f"{what} is not finite")
    return t


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
    def _entry(self, problem: Problem) -> tuple[BinarySCM, dict[str, Any]]:
        hit = _CACHE.get(id(problem))
        if hit is not None and hit[0] is problem:
            return hit[1], hit[2]
        if "cpts" not in problem.data:
            raise ProblemError("ate_threshold problem is missing data field 'cpts'")
        try:
            scm = BinarySCM.from_data(problem.data["cpts"])
        except ValueError as e:
            raise ProblemError(f"data field 'cpts': {e}") from None
        if problem.graph is None:
            if problem.mode == "supplied":  # the prompt shows G*: without it b1 could never pass
                raise ProblemError("ate_threshold problem is missing field 'graph'")
        else:
            why = scm.check_graph(problem.graph)
            if why:
                raise ProblemError(f"data field 'cpts' does not match the graph: {why}")
        info: dict[str, Any] = {"psi": {}, "decision": {}, "exact": {}}
        entries = sum(a.size for a in scm.p1.values())
        _CACHE.put(id(problem), (problem, scm, info), 4096 + 24 * entries + 256 * len(scm.nodes))
        return scm, info

    def scm(self, problem: Problem) -> BinarySCM:
        return self._entry(problem)[0]

    def source_graph(self, problem: Problem) -> CausalGraph:
        """G*: ``problem.graph`` (bound to the CPTs at load), else the DAG the CPTs state."""
        if problem.graph is not None:
            return problem.graph
        scm, info = self._entry(problem)
        if "graph" not in info:
            info["graph"] = scm.graph()
        return info["graph"]

    def verification_object(self, problem: Problem) -> Any:
        return self.source_graph(problem)

    def _psi(self, problem: Problem, x: str, y: str, z: frozenset) -> float:
        scm, info = self._entry(problem)
        memo = info["psi"]
        key = (x, y, frozenset(z))
        if key not in memo:
            value = adjustment_functional(scm, x, y, sorted(z))
            charge(_PSI_COST + 16 * len(z))  # a long run may try ever new sets on one problem
            memo[key] = value
        return memo[key]

    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        q = super().normalize_query(problem)
        if q["treatment"] == q["outcome"]:
            raise ProblemError("query fields 'treatment' and 'outcome' must differ")
        scm = self.scm(problem)
        for key in ("treatment", "outcome"):
            if q[key] not in scm.parents:
                raise ProblemError(f"query field {key!r} names {q[key]!r}, which has no CPT")
        eps = problem.data.get("epsilon", DEFAULT_EPSILON)
        try:
            q["epsilon_exact"] = exact_number(eps)
            eps = normalize_value("number", eps)
        except ValueError as e:
            raise ProblemError(f"data field 'epsilon': {e}") from None
        if eps <= 0:
            raise ProblemError("data field 'epsilon' must be positive")
        try:
            q["threshold_exact"] = exact_number(problem.query["threshold"])
        except ValueError as e:
            raise ProblemError(f"query field 'threshold': {e}") from None
        if "threshold" in problem.data:
            try:
                t = normalize_value("number", problem.data["threshold"])
            except ValueError as e:
                raise ProblemError(f"data field 'threshold': {e}") from None
            if abs(t - q["threshold"]) > 1e-12:
                raise ProblemError("data field 'threshold' differs from query field 'threshold'")
        q["epsilon"] = eps
        return q

    def exact_effect(self, problem: Problem, query: Mapping[str, Any] | None = None) -> Fraction:
        """θ(P; X, Y) exactly, as a Fraction (:func:`~calver.verifier.scm_exact.exact_ate`), memoized
        per problem. Decisions use :meth:`decision`, which is exact too and cheaper on large SCMs."""
        q = query if query is not None else self.normalize_query(problem)
        scm, info = self._entry(problem)
        key = (q["treatment"], q["outcome"])
        if key not in info["exact"]:
            info["exact"][key] = exact_ate(scm, *key)
        return info["exact"][key]

    def decision(self, problem: Problem, query: Mapping[str, Any] | None = None) -> AteDecision:
        """θ > τ decided exactly (:func:`~calver.verifier.scm.decide_ate`), memoized per problem."""
        q = query if query is not None else self.normalize_query(problem)
        scm, info = self._entry(problem)
        tau = _tau(q)
        last = info.get("last")  # the scorer passes one query object per problem: skip hashing τ
        if last is not None and last[0] is tau and last[1] == q["treatment"] and last[2] == q["outcome"]:
            return last[3]
        key = (q["treatment"], q["outcome"], tau)
        if key not in info["decision"]:
            exact = info["exact"].get(key[:2])
            try:
                info["decision"][key] = (AteDecision(exact > tau, exact, float(exact)) if exact is not None
                                         else decide_ate(scm, q["treatment"], q["outcome"], tau))
            except TooLargeToGrade as e:  # deterministic: remembered, not recomputed per call
                info["decision"][key] = e
        hit = info["decision"][key]
        if isinstance(hit, TooLargeToGrade):
            raise TooLargeToGrade(str(hit))
        info["last"] = (tau, *key[:2], hit)
        return hit

    def truth(self, problem: Problem) -> bool:
        return self.decision(problem).exceeds

    def grade(self, problem: Problem, obj: Any) -> bool:
        try:
            return isinstance(obj, bool) and obj == self.truth(problem)
        except TooLargeToGrade as e:  # as for longest paths: refuse rather than guess
            raise ProblemError(f"too large to grade exactly: {e}") from None

    def is_valid_on(self, g: Any, query: Mapping[str, Any], obj: Any, problem: Problem | None = None) -> bool:
        """A decision is valid iff it is the exact one (θ from the problem's CPTs, whatever ``g``);
        an adjustment set iff it satisfies the backdoor criterion on ``g``."""
        if isinstance(obj, bool):
            if problem is None:
                raise ValueError("an ate_threshold decision is judged on the problem's CPTs: pass the problem")
            return obj == self.decision(problem, query).exceeds
        from calver.verifier.primitives import is_backdoor_set

        z = frozenset(obj)
        return all(n in g for n in z) and is_backdoor_set(g, query["treatment"], query["outcome"], z)

    def validity_class(self, g: CausalGraph, query: Mapping[str, Any],
                       limit: int | None = None) -> list[frozenset[str]]:
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

    def parse_answer(self, text: str) -> bool:
        """The ANSWER is a decision: an adjustment set there is no answer (nor a tie-winning one)."""
        t = text.strip().strip(".*`!").strip().lower()
        if t not in _YES:
            raise ValueError(f"ANSWER must be yes or no, got {text.strip()[:40]!r}")
        return _YES[t]

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

    def check_answer(self, ctx: TraceContext) -> Check:
        """b6: the decision must be the exact one (θ > τ, θ from the CPTs), so an estimate inside the
        ε-margin cannot carry a wrong yes/no; and it must not contradict the trace's own RESULT where
        that estimate is clear of the margin (|RESULT − τ| > ε, in exact decimals)."""
        if not isinstance(ctx.answer, bool):
            return Check.fail(ctx.answer_error or "ANSWER must be yes or no")
        q = ctx.query
        d = self.decision(ctx.problem, q)
        said = "yes" if ctx.answer else "no"
        tau = _tau(q)
        if ctx.answer != d.exceeds:
            return Check.fail(f"ANSWER {said} is wrong: the effect θ is {d.describe()}, "
                              f"{'above' if d.exceeds else 'not above'} the threshold {format_exact(tau)}")
        text = ctx.slots.get("RESULT")
        key = ("ate RESULT side", text)  # a pool's candidates repeat RESULT texts
        side = ctx.memo.get(key) if ctx.memo is not None and text is not None else None
        if side is None:
            try:
                if text is None:
                    raise ValueError(ctx.slots.problems["RESULT"])
                side = margin_side(_numeral(text, "RESULT"), tau, q.get("epsilon_exact") or exact_number(q["epsilon"]),
                                   q["threshold"], q["epsilon"])
            except ValueError as e:
                side = str(e)
            if ctx.remember is not None and text is not None:
                ctx.remember(key, text, side)
        if isinstance(side, str):
            return Check.fail(f"ANSWER cannot be checked against RESULT: {side}")
        outside, above = side
        if outside and ctx.answer != above:
            return Check.fail(f"ANSWER {said} disagrees with RESULT {text.strip()[:40]} vs threshold "
                              f"{format_exact(tau)}")
        return PASS

    # ---- rendering ----------------------------------------------------------------------------
    def default_adjustment(self, problem: Problem) -> frozenset[str]:
        """A smallest valid backdoor set (ties: first in sorted order), else Pa(X)."""
        g, q = self.source_graph(problem), self.normalize_query(problem)
        from calver.verifier.primitives import descendants, is_backdoor_set

        x, y = q["treatment"], q["outcome"]
        banned = {x, y} | descendants(g, x)
        cands = sorted(n for n in g.nodes if n not in banned)
        for r in range(min(len(cands), 6) + 1):
            for c in combinations(cands, r):
                if is_backdoor_set(g, x, y, c):
                    return frozenset(c)
        return frozenset(g.parents(x))

    def canonical_trace(self, problem: Problem, obj: Any = None, *, witnesses: int | None = None,
                        order: RenderOrder | None = None, graph_text: str | None = None) -> str:
        """A trace adjusting for ``obj`` when it is a set (default: :meth:`default_adjustment`);
        a bool ``obj`` is written as the ANSWER verbatim (it scores 6 iff it is the exact decision);
        otherwise the ANSWER is the exact decision. ``graph_text``: a text of ``problem.graph`` for the GRAPH slot."""
        q = self.normalize_query(problem)
        z = frozenset(obj) if isinstance(obj, (set, frozenset, list, tuple)) else self.default_adjustment(problem)
        x, y = q["treatment"], q["outcome"]
        a1, a0 = adjustment_arms(self.scm(problem), x, y, sorted(z))
        theta = round(a1 - a0, 6)
        decision = obj if isinstance(obj, bool) else self.decision(problem, q).exceeds
        pairs = {"task": self.name, "treatment": format_value("node", x), "outcome": format_value("node", y),
                 "threshold": f"{q['threshold']:g}", "graph": "DAG"}
        return assemble_trace({
            "GRAPH": self.source_graph(problem).to_text(order) if graph_text is None else graph_text,
            "QUERY": format_kv(pairs),
            "STRATEGY": format_set(z),
            "DERIVATION": f"{self.operation}(treatment={pairs['treatment']}, outcome={pairs['outcome']}, "
                          f"adjustment={format_set(z)}, "
                          f"p1={a1:.6f}, p0={a0:.6f}, effect={theta:.6f})",
            "RESULT": f"{theta:.6f}",
            "ANSWER": "yes" if decision else "no",
        })

    def question_text(self, query: Mapping[str, Any]) -> str:
        return (f"Is the average treatment effect of {query['treatment']} on {query['outcome']}, "
                f"P({query['outcome']}=1 | do({query['treatment']}=1)) - "
                f"P({query['outcome']}=1 | do({query['treatment']}=0)), "
                f"greater than {query['threshold']:g}? Answer yes or no.")


def _tau(query: Mapping[str, Any]) -> Fraction:
    """τ exactly: the normalized query's ``threshold_exact``, else its float's shortest decimal."""
    tau = query.get("threshold_exact")
    return tau if isinstance(tau, Fraction) else exact_number(query["threshold"])
