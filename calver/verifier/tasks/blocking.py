"""`blocking_set`: find a set Z that blocks one given path (endpoints excluded)."""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.contract import format_path, format_set, parse_call
from calver.verifier.family import Check
from calver.verifier.graph import GraphClass
from calver.verifier.problem import ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily
from calver.verifier.values import normalize_value


@register
class BlockingSet(NodeSetFamily):
    name = "blocking_set"
    description = "find a node set that blocks the given path"
    operation = "block_path"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("path", "variant")
    query_types = {"path": "typed_path", "variant": "word"}
    object_arg = "given"
    witness_arg = "path"
    variants = ("any", "minimal")
    example_query = {"path": "A <- B -> C", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the blocking set, e.g. {B}",
        "DERIVATION": "block_path(path=<the path, with edge types>, given={...})",
        "RESULT": "valid or invalid (whether the set blocks the path)",
        "ANSWER": "the blocking set only",
    }

    def __init__(self) -> None:
        self._masks: dict = {}

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        nodes, types = q["path"]
        if len(nodes) < 2:
            raise ProblemError("query field 'path' needs at least two nodes")
        if problem.graph is not None:
            from calver.verifier.primitives import path_edges

            try:
                types = tuple(path_edges(problem.graph, list(nodes), list(types) if types else None))
            except ValueError as e:
                raise ProblemError(f"query field 'path': {e}") from None
            q["path"] = (nodes, types)
        return q

    def excluded(self, query: Mapping[str, Any]) -> frozenset[str]:
        nodes = query["path"][0]
        return frozenset((nodes[0], nodes[-1]))

    def candidates(self, g, query):
        return [n for n in query["path"][0][1:-1]] + [
            n for n in g.nodes if n not in query["path"][0]
        ]

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import blocks_path

        ends = nodes & self.excluded(query)
        if ends:
            return f"the set may not contain the path's endpoints ({', '.join(sorted(ends))})"
        path, types = query["path"]
        if blocks_path(g, list(path), nodes, list(types) if types else None):
            return None
        return f"{format_set(nodes)} leaves the path {format_path(list(path), list(types) if types else None)} open"

    def is_base_valid(self, g, query, nodes):
        from calver.verifier.paths import blocks_path_masks, node_mask, path_blocking_masks

        path, types = query["path"]
        if path[0] in nodes or path[-1] in nodes:  # endpoints may not be conditioned on
            return False
        # validity-class enumeration asks about one path for every subset: validate it once
        key = (id(g), path, types)
        hit = self._masks.get(key)
        if hit is None or hit[0] is not g:
            if len(self._masks) > 256:
                self._masks.clear()
            hit = self._masks[key] = (g, path_blocking_masks(g, path, types or None))
        return blocks_path_masks(hit[1], node_mask(g, nodes))

    def _proper_subset_valid(self, g, query, nodes, budget=None):
        # Z blocks iff it holds a non-collider of the path (then that node alone blocks) or misses
        # some collider's descendant closure (then every subset, ∅ included, does too): every valid
        # set has a valid subset of size <= 1, so testing ∅ and the singletons is exhaustive.
        for sub in [frozenset()] + [frozenset([n]) for n in sorted(nodes)]:
            if sub != nodes and self.is_base_valid(g, query, sub):
                return sub
        return None

    def rule_objects(self, g, query):
        # a path with a collider is blocked by the empty set; otherwise by any interior node
        yield frozenset()
        for n in query["path"][0][1:-1]:
            yield frozenset([n])

    def witness_paths(self, g, query, nodes):
        path, types = query["path"]
        return [format_path(list(path), list(types) if types else None)]

    def derivation_slot(self, g, query, nodes, witnesses=None):
        return f"{self.operation}(path={self.witness_paths(g, query, nodes)[0]}, given={format_set(nodes)})"

    def check_derivation(self, ctx):
        check = super().check_derivation(ctx)
        if not check.ok:
            return check
        _op, args = parse_call(ctx.slots.get("DERIVATION"))
        declared = normalize_value("typed_path", args["path"])
        want = ctx.query["path"]
        if declared[0] != want[0] or (declared[1] is not None and declared[1] != want[1]):
            return Check.fail(f"DERIVATION path={args['path']} is not the query's path")
        return check

    def witness_ends(self, query):
        nodes = query["path"][0]
        return (nodes[0], nodes[-1])

    def question_text(self, query: Mapping[str, Any]) -> str:
        path, types = query["path"]
        kind = "one minimal" if query["variant"] == "minimal" else "one"
        return f"Find {kind} node set that blocks the path {format_path(list(path), list(types) if types else None)}."

