"""`intervention_reachability`: after do(S) (incoming edges of S removed), can `source` still reach
`target` by a directed path? Answer yes/no; STRATEGY is a witness directed path, or ``none``."""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.contract import assemble_trace, format_kv, format_path, format_set
from calver.verifier.family import PASS, Check, TaskFamily, TraceContext
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.problem import ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.base import parse_result_bool
from calver.verifier.values import format_value, parse_bool


@register
class InterventionReachability(TaskFamily):
    name = "intervention_reachability"
    description = "decide whether source still reaches target by a directed path after intervening on do"
    operation = "reach_after_do"
    answer_type = "bool"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG, GraphClass.DIRECTED)
    query_keys = ("do", "source", "target")
    query_types = {"do": "set", "source": "node", "target": "node"}
    example_query = {"do": ["X"], "source": "X", "target": "Y"}
    witness_arg = "path"  # the DERIVATION's witness path (audits damage it)
    slot_docs = {
        "STRATEGY": "a witness directed path source -> ... -> target in the intervened graph, or none",
        "DERIVATION": "reach_after_do(do={...}, source=A, target=B, path=<the witness path or none>)",
        "RESULT": "reachable or unreachable (true/false)",
        "ANSWER": "yes or no",
    }

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        if q["source"] == q["target"]:
            raise ProblemError("query fields 'source' and 'target' must differ")
        return q

    # objects: STRATEGY is a path tuple (() for none); ANSWER is a bool -------------------------
    def parse_object(self, text: str) -> Any:
        t = text.strip().strip(".*`").lower()
        if t in ("yes", "no", "true", "false", "reachable", "unreachable"):
            return parse_bool(t) if t not in ("reachable", "unreachable") else t == "reachable"
        return self.parse_witness(text)

    def parse_answer(self, text: str) -> bool:
        """The ANSWER is a decision (yes/no; reachable/unreachable): a witness path there is none."""
        obj = self.parse_object(text)
        if not isinstance(obj, bool):
            raise ValueError(f"ANSWER must be yes or no, got {text.strip()[:40]!r}")
        return obj

    def parse_witness(self, text: str) -> tuple[str, ...]:
        from calver.verifier.parsers import parse_path

        if text.strip().strip(".").lower() in ("none", "no path", "[]", "-"):
            return ()
        nodes, types = parse_path(text)
        if types and any(t != "->" for t in types):
            raise ValueError("a witness must be a directed path (only ->)")
        return tuple(nodes)

    def coerce_object(self, obj: Any) -> Any:
        if isinstance(obj, bool):
            return obj
        if isinstance(obj, str):
            return self.parse_object(obj)
        raise TypeError(f"expected yes/no, got {type(obj).__name__}")

    def format_object(self, obj: Any) -> str:
        if isinstance(obj, bool):
            return "yes" if obj else "no"
        return format_path(list(obj)) if obj else "none"

    def truth(self, g: CausalGraph, q: Mapping[str, Any]) -> bool:
        from calver.verifier.primitives import reachable_after_do

        return reachable_after_do(g, q["do"], q["source"], q["target"])

    def witness_holds(self, g: CausalGraph, q: Mapping[str, Any], path: tuple[str, ...]) -> Check:
        if not path:
            if self.truth(g, q):
                return Check.fail(f"'none' is wrong: {q['source']} reaches {q['target']} "
                                  f"after do({format_set(q['do'])})")
            return PASS
        if path[0] != q["source"] or path[-1] != q["target"]:
            return Check.fail(f"witness {format_path(list(path))} does not run from {q['source']} to {q['target']}")
        for a, b in zip(path, path[1:]):
            if b in q["do"]:
                return Check.fail(f"witness uses edge {a}->{b}, removed by do({format_set(q['do'])})")
            if a not in g or b not in g or not g.has_edge(a, b):
                return Check.fail(f"witness edge {a}->{b} is not in the graph")
        if len(set(path)) != len(path):
            return Check.fail("witness path repeats a node")
        return PASS

    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
        if isinstance(obj, bool):
            truth = self.truth(g, query)
            return PASS if obj == truth else Check.fail(f"the correct decision is {'yes' if truth else 'no'}")
        return self.witness_holds(g, query, tuple(obj))

    def validity_class(self, g, query, limit=None):
        return [self.truth(g, query)]

    def canonical_answer_key(self, obj: Any) -> Any:
        return obj

    # bits ------------------------------------------------------------------------------------------
    def _strategy_path(self, ctx: TraceContext):
        s = ctx.strategy
        return None if s is None or isinstance(s, bool) else tuple(s)

    def check_strategy(self, ctx: TraceContext) -> Check:
        path = self._strategy_path(ctx)
        if path is None:
            return Check.fail(ctx.strategy_error or "STRATEGY must be a witness path or none")
        if ctx.g_ver is None:
            return Check.fail("no verification graph: the trace's GRAPH slot is unusable")
        check = self.witness_holds(ctx.g_ver, ctx.query, path)
        if check.ok and isinstance(ctx.answer, bool) and ctx.answer != self.truth(ctx.g_ver, ctx.query):
            return Check.fail("the returned decision is wrong on the verification graph")
        return check

    def check_derivation(self, ctx: TraceContext) -> Check:
        args, check = self.derivation_call(ctx, self.query_keys)
        if args is None:
            return check
        if "path" not in args:
            return Check.fail("DERIVATION lacks argument 'path'")
        path = self.parse_witness(args["path"])
        if path != self._strategy_path(ctx):
            return Check.fail("DERIVATION path differs from STRATEGY")
        for a, b in zip(path, path[1:]):
            if ctx.g_ver is None or a not in ctx.g_ver or b not in ctx.g_ver or not ctx.g_ver.has_edge(a, b):
                return Check.fail(f"DERIVATION witness edge {a}->{b} is not in the graph")
        return PASS

    def check_result(self, ctx: TraceContext) -> Check:
        text = ctx.slots.get("RESULT")
        if text is None:
            return Check.fail(ctx.slots.problems["RESULT"])
        declared = parse_result_bool(text)
        if ctx.g_ver is None:
            return Check.fail("no verification graph to recompute the result on")
        actual = self.truth(ctx.g_ver, ctx.query)
        if declared != actual:
            return Check.fail(f"RESULT says {'reachable' if declared else 'unreachable'}, recomputation disagrees")
        return PASS

    def check_answer(self, ctx: TraceContext) -> Check:
        if not isinstance(ctx.answer, bool):
            return Check.fail(ctx.answer_error or "ANSWER must be yes or no")
        text = ctx.slots.get("RESULT")
        try:
            declared = parse_result_bool(text) if text is not None else None
        except ValueError:
            declared = None
        if declared is None or declared != ctx.answer:
            return Check.fail("ANSWER disagrees with RESULT")
        path = self._strategy_path(ctx)
        if path is None or bool(path) != ctx.answer:
            return Check.fail("ANSWER disagrees with STRATEGY (a witness path means yes, none means no)")
        return PASS

    # rendering ----------------------------------------------------------------------------------
    def grade(self, problem, obj):
        if problem.graph is None:
            return super().grade(problem, obj)  # refuses: no source graph
        if not isinstance(obj, bool):
            return False
        return obj == self.truth(problem.graph, self.normalize_query(problem))

    def canonical_trace(self, problem, obj: Any = None, *, witnesses: int | None = None,
                        order: RenderOrder | None = None, graph_text: str | None = None) -> str:
        """A trace answering ``obj`` (default: the correct decision) with a witness path when yes."""
        from calver.verifier.primitives import find_directed_path

        g, q = problem.graph, self.normalize_query(problem)
        decision = self.truth(g, q) if obj is None else bool(obj)
        path: tuple[str, ...] = ()
        if decision:
            path = tuple(find_directed_path(g, q["source"], q["target"], removed_incoming=q["do"]) or ())
        truth = self.truth(g, q)
        pairs = {"task": self.name, "do": format_set(q["do"]), "source": format_value("node", q["source"]),
                 "target": format_value("node", q["target"]),
                 "graph": problem.graph_class.value}
        return assemble_trace({
            "GRAPH": g.to_text(order) if graph_text is None else graph_text,
            "QUERY": format_kv(pairs),
            "STRATEGY": self.format_object(path),
            "DERIVATION": f"{self.operation}(do={format_set(q['do'])}, source={pairs['source']}, "
                          f"target={pairs['target']}, path={self.format_object(path)})",
            "RESULT": "reachable" if truth else "unreachable",
            "ANSWER": "yes" if decision else "no",
        })

    def question_text(self, query: Mapping[str, Any]) -> str:
        return (f"After intervening on {format_set(query['do'])} (removing the edges into it), is there still a "
                f"directed path from {query['source']} to {query['target']}? Answer yes or no.")
