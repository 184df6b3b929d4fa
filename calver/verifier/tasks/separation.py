"""`separation_set`: find a conditioning set Z with X ⊥ Y | Z (d-separation on DAGs, m-separation on ADMGs).

Minimal/maximal are exact and polynomial (:class:`~calver.verifier.tasks.base.SeparatorFamily`)."""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.contract import format_set
from calver.verifier.graph import GraphClass
from calver.verifier.primitives import is_separated
from calver.verifier.registry import register
from calver.verifier.tasks.base import SeparatorFamily


@register
class SeparationSet(SeparatorFamily):
    name = "separation_set"
    description = "find a node set that d-separates (DAG) or m-separates (ADMG) x from y"
    operation = "separation_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("x", "y", "variant")
    query_types = {"x": "set", "y": "set", "variant": "word"}
    object_arg = "given"
    witness_arg = "blocked"
    bound_args = ("x", "y")
    example_query = {"x": ["A"], "y": ["C"], "variant": "any"}
    slot_docs = {
        "STRATEGY": "the conditioning set, e.g. {B} ({} for the empty set)",
        "DERIVATION": "separation_check(x={...}, y={...}, given={...}, blocked=[paths the set blocks] or none)",
        "RESULT": "valid or invalid (whether x and y are separated given the set)",
        "ANSWER": "the conditioning set only",
    }

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        if not q["x"] or not q["y"]:
            from calver.verifier.problem import ProblemError

            raise ProblemError("query fields 'x' and 'y' must be non-empty")
        if q["x"] & q["y"]:
            from calver.verifier.problem import ProblemError

            raise ProblemError("query fields 'x' and 'y' must be disjoint")
        return q

    def rule_objects(self, g, query):
        # local Markov property: a node is separated from its non-descendants by its parents
        # (the union of both sides' parents first: valid in ~90% of generated DAG queries, one rule to learn)
        ends = frozenset(query["x"]) | frozenset(query["y"])
        px, py = (frozenset().union(*(g.parents(n) for n in query[side])) - ends for side in ("x", "y"))
        yield from (px | py, px, py)
        yield frozenset(g) - ends  # every other node: often valid, and then maximal

    def excluded(self, query: Mapping[str, Any]) -> frozenset[str]:
        return frozenset(query["x"]) | frozenset(query["y"])

    def separator_masks(self, g, query):
        from calver.verifier.primitives import node_mask

        xm, ym = node_mask(g, query["x"]), node_mask(g, query["y"])
        return xm, ym, ((1 << len(g.nodes)) - 1) & ~(xm | ym), 0

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import is_separated, open_path

        clash = nodes & self.excluded(query)
        if clash:
            return f"the conditioning set may not contain x or y ({', '.join(sorted(clash))})"
        if is_separated(g, query["x"], query["y"], nodes):
            return None
        path = None
        for a in sorted(query["x"]):
            for b in sorted(query["y"]):
                path = open_path(g, a, b, nodes)
                if path:
                    break
            if path:
                break
        shown = " - ".join(path) if path else "a path"
        return f"{shown} is open given {format_set(nodes)}"

    def is_base_valid(self, g, query, nodes):
        x, y = query["x"], query["y"]
        return x.isdisjoint(nodes) and y.isdisjoint(nodes) and is_separated(g, x, y, nodes)

    def witness_paths(self, g, query, nodes):
        from calver.verifier.contract import format_path
        from calver.verifier.tasks.paths import typed_paths

        if len(query["x"]) != 1 or len(query["y"]) != 1:
            return []
        (a,), (b,) = tuple(query["x"]), tuple(query["y"])
        return [format_path(n, t) for n, t in typed_paths(g, a, b, limit=3)]

    def witness_ends(self, query):
        if len(query["x"]) == 1 and len(query["y"]) == 1:
            return (next(iter(query["x"])), next(iter(query["y"])))
        return None

    def question_text(self, query: Mapping[str, Any]) -> str:
        kind = {"any": "one valid", "minimal": "one minimal valid", "maximal": "one maximal valid"}[query["variant"]]
        return (f"Find {kind} node set that separates {format_set(query['x'])} from "
                f"{format_set(query['y'])} (conditioning set excludes both).")
