"""`path` and `backdoor_path`: exhibit a (shortest / longest / any) path between two nodes.

A path is a simple sequence of typed edges in the graph's skeleton (``F <- Y -> C``); a backdoor
path additionally starts with an edge into the treatment (``X <- ...`` or ``X <-> ...``).
``shortest`` compares the number of edges with a breadth-first search (exact, polynomial);
``longest`` with a bounded branch-and-bound search memoized per (graph, query): a problem whose
search exceeds the work limit fails b3/b5 closed with a "too large to grade" reason, and ``grade``
raises :class:`ProblemError` for it instead of silently calling a correct answer wrong.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterator, Mapping

from calver.verifier.budget import TooLargeToGrade
from calver.verifier.contract import format_path
from calver.verifier.family import PASS, Check, TraceContext, node_order
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily
from calver.verifier.tasks.paths import (
    longest_path_length,
    path_class,
    shortest_path_length,
)
from calver.verifier.values import cached_path


class _Unknown(Check):
    """A failed check whose predicate could not be decided (past the work limit), typed so that no
    reason text a trace can influence is mistaken for it."""


class _PathFamily(NodeSetFamily):
    answer_type = "path"
    variants = ("any", "shortest", "longest")
    object_arg = "path"
    witness_arg = "path"
    large_class = True
    backdoor: bool = False
    ends: tuple[str, str] = ("source", "target")

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        a, b = (q[k] for k in self.ends)
        if a == b:
            raise ProblemError(f"query fields {self.ends[0]!r} and {self.ends[1]!r} must differ")
        return q

    def parse_object(self, text: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        if text.strip().strip(".").lower() in ("none", "no path", "[]"):
            return ((), None)
        return cached_path(text)

    def coerce_object(self, obj: Any):
        if isinstance(obj, str):
            return self.parse_object(obj)
        if isinstance(obj, (tuple, list)) and len(obj) == 2 and isinstance(obj[0], (list, tuple)):
            return tuple(obj[0]), (tuple(obj[1]) if obj[1] else None)
        return tuple(str(n) for n in obj), None

    def format_object(self, obj: Any) -> str:
        nodes, types = obj
        return format_path(list(nodes), list(types) if types else None) if nodes else "none"

    def canonical_answer_key(self, obj: Any) -> Any:
        return (tuple(obj[0]), tuple(obj[1]) if obj[1] else None)

    def answer_set(self, obj: Any) -> frozenset:
        return frozenset(obj[0])

    def object_from_json(self, data: Any) -> Any:
        nodes, types = data
        return tuple(nodes), (None if types is None else tuple(types))

    def answer_candidates(self, g: CausalGraph, answer: Any, rng: Any) -> Iterator[Any]:
        """``none``, single nodes, node pairs (seeded order), then the answer's path reversed."""
        order = node_order(g, rng)
        yield ((), None)
        yield from (((n,), None) for n in order)
        yield from ((c, None) for c in combinations(order, 2))
        if answer and answer[0]:
            yield (tuple(reversed(answer[0])), None)

    def _resolved(self, g: CausalGraph, obj) -> tuple[tuple[str, ...], tuple[str, ...]]:
        from calver.verifier.primitives import path_edges

        nodes, types = obj
        return tuple(nodes), tuple(path_edges(g, list(nodes), list(types) if types else None))

    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
        a, b = (query[k] for k in self.ends)
        nodes, _types = obj
        kind = "backdoor path" if self.backdoor else "path"
        if not nodes:
            if shortest_path_length(g, a, b, self.backdoor) is None:
                return PASS
            return Check.fail(f"a {kind} exists, so 'none' is wrong")
        unknown = [n for n in nodes if n not in g]
        if unknown:
            return Check.fail(f"{', '.join(unknown)} not in the graph")
        if nodes[0] != a or nodes[-1] != b:
            return Check.fail(f"{self.format_object(obj)} does not run from {a} to {b}")
        if len(set(nodes)) != len(nodes):
            return Check.fail(f"{self.format_object(obj)} repeats a node")
        try:
            _, types = self._resolved(g, obj)
        except (GraphError, ValueError) as e:
            return Check.fail(f"{self.format_object(obj)} is not a path of the graph: {e}")
        if self.backdoor and types[0] == "->":
            return Check.fail(f"{self.format_object(obj)} starts with an edge out of {a}: not a backdoor path")
        variant = query.get("variant", "any")
        if variant != "any":
            try:
                if variant == "shortest":
                    want = shortest_path_length(g, a, b, self.backdoor)
                else:
                    want = longest_path_length(g, a, b, self.backdoor)
            except TooLargeToGrade as e:
                return _Unknown.fail(str(e))
            if len(types) != want:
                return Check.fail(f"{self.format_object(obj)} has {len(types)} edges; the {variant} {kind} has {want}")
        return PASS

    def validity_class(self, g: CausalGraph, query: Mapping[str, Any], limit: int | None = None) -> list[Any]:
        """The variant's paths, shortest first (BFS for shortest, bounded search otherwise), at most
        ``limit``; ``[none]`` if there is no path. Raises :class:`TooLargeToGrade` (a GraphError)
        where the bounded search gives up."""
        a, b = (query[k] for k in self.ends)
        return path_class(g, a, b, self.backdoor, query.get("variant", "any"), limit) or [((), None)]

    def check_result(self, ctx: TraceContext) -> Check:
        # A "too large to grade" predicate is unknown, not false: declaring "invalid" earns nothing.
        obj = self.returned(ctx)
        if obj is not None and ctx.g_ver is not None:
            check = self._predicate_once(ctx, obj)
            if isinstance(check, _Unknown):
                return check
        return super().check_result(ctx)

    def grade(self, problem: Problem, obj: Any) -> bool:
        if problem.graph is None:
            return super().grade(problem, obj)
        check = self.predicate(problem.graph, self.normalize_query(problem), obj)
        if isinstance(check, _Unknown):
            raise ProblemError(check.reason)
        return check.ok

    def witness_paths(self, g, query, obj):
        return [self.format_object(self._resolved(g, obj))] if obj[0] else []

    def witness_ends(self, query):
        return tuple(query[k] for k in self.ends)

    def derivation_slot(self, g, query, obj, witnesses=None):
        a, b = self.ends
        return f"{self.operation}({a}={query[a]}, {b}={query[b]}, path={self.format_object(obj)})"


@register
class PathTask(_PathFamily):
    name = "path"
    description = "exhibit one (shortest / longest / any) path between source and target, edges of any type"
    operation = "find_path"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("source", "target", "variant")
    query_types = {"source": "node", "target": "node", "variant": "word"}
    bound_args = ("source", "target")
    example_query = {"source": "A", "target": "C", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the path with its edge types, e.g. A <- B -> C (none if no path exists)",
        "DERIVATION": "find_path(source=A, target=C, path=<the path>)",
        "RESULT": "valid or invalid (whether it is a path of the requested kind)",
        "ANSWER": "the path only",
    }

    def question_text(self, query):
        kind = {"any": "one", "shortest": "the shortest", "longest": "the longest"}[query["variant"]]
        return f"Find {kind} path from {query['source']} to {query['target']} (edges of any direction)."


@register
class BackdoorPath(_PathFamily):
    name = "backdoor_path"
    description = "exhibit one (shortest / longest / any) backdoor path from treatment to outcome"
    operation = "find_backdoor_path"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("treatment", "outcome", "variant")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word"}
    bound_args = ("treatment", "outcome")
    backdoor = True
    ends = ("treatment", "outcome")
    example_query = {"treatment": "X", "outcome": "Y", "variant": "shortest"}
    slot_docs = {
        "STRATEGY": "the backdoor path with its edge types, e.g. X <- Z -> Y (none if there is none)",
        "DERIVATION": "find_backdoor_path(treatment=X, outcome=Y, path=<the path>)",
        "RESULT": "valid or invalid (whether it is a backdoor path of the requested kind)",
        "ANSWER": "the path only",
    }

    def question_text(self, query):
        kind = {"any": "one", "shortest": "the shortest", "longest": "the longest"}[query["variant"]]
        return f"Find {kind} backdoor path from {query['treatment']} to {query['outcome']}."
