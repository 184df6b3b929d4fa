"""`mediator`: mediators of X -> Y (nodes on a directed path X -> ... -> M -> ... -> Y).

Variants: ``any`` (one mediator, answered as a one-node set), ``direct`` (one one-hop mediator:
X -> M -> Y edges), ``all`` (the set of all mediators).
"""

from __future__ import annotations

from typing import Any

from calver.verifier.contract import format_path, format_set
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.registry import PASS, Check, register
from calver.verifier.tasks.base import NodeSetFamily


@register
class Mediator(NodeSetFamily):
    name = "mediator"
    description = "name mediators of the effect of treatment on outcome (nodes on a directed path between them)"
    operation = "mediator_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG, GraphClass.DIRECTED)
    variants = ("any", "direct", "all")
    query_keys = ("treatment", "outcome", "variant")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word"}
    object_arg = "mediators"
    witness_arg = "paths"
    bound_args = ("treatment", "outcome")
    example_query = {"treatment": "X", "outcome": "Y", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the mediator set, e.g. {M} (variant any/direct: exactly one node; all: every mediator)",
        "DERIVATION": "mediator_check(treatment=X, outcome=Y, mediators={...}, paths=[X -> M -> Y | ...])",
        "RESULT": "valid or invalid (whether the set is a correct mediator answer)",
        "ANSWER": "the mediator set only",
    }

    def excluded(self, query):
        return frozenset((query["treatment"], query["outcome"]))

    def _mediators(self, g: CausalGraph, query) -> frozenset[str]:
        from calver.verifier.primitives import mediators

        x, y = query["treatment"], query["outcome"]
        if query["variant"] == "direct":
            return frozenset(m for m in g.children(x) if m != y and g.has_edge(m, y))
        return frozenset(mediators(g, x, y))

    def predicate(self, g: CausalGraph, query: dict[str, Any], obj: Any) -> Check:
        nodes = frozenset(obj)
        unknown = sorted(n for n in nodes if n not in g)
        if unknown:
            return Check.fail(f"{', '.join(unknown)} not in the graph")
        true = self._mediators(g, query)
        x, y = query["treatment"], query["outcome"]
        if query["variant"] == "all":
            if nodes == true:
                return PASS
            miss, extra = sorted(true - nodes), sorted(nodes - true)
            bits = ([f"misses {', '.join(miss)}"] if miss else []) + ([f"{', '.join(extra)} not mediators"] if extra else [])
            return Check.fail(f"{format_set(nodes)} is not the set of all mediators of {x} -> {y}: " + "; ".join(bits))
        if len(nodes) != 1:
            return Check.fail(f"variant {query['variant']} asks for exactly one mediator, got {len(nodes)}")
        (m,) = nodes
        if m in true:
            return PASS
        hop = "one-hop " if query["variant"] == "direct" else ""
        return Check.fail(f"{m} is not a {hop}mediator: no directed path {x} -> ... -> {m} -> ... -> {y}")

    def validity_class(self, g, query, limit=None):
        true = self._mediators(g, query)
        if query["variant"] == "all":
            return [true]
        return [frozenset({m}) for m in sorted(true)]

    def witness_paths(self, g, query, nodes):
        from calver.verifier.primitives import find_directed_path

        x, y = query["treatment"], query["outcome"]
        out = []
        for m in sorted(nodes)[:3]:
            a = find_directed_path(g, x, m)
            b = find_directed_path(g, m, y)
            if a and b:
                out.append(format_path(list(a) + list(b)[1:]))
        return out

    def witness_ends(self, query):
        return (query["treatment"], query["outcome"])

    def question_text(self, query: dict[str, Any]) -> str:
        x, y = query["treatment"], query["outcome"]
        return {
            "any": f"Name one mediator of the effect of {x} on {y}.",
            "direct": f"Name one variable M with {x} -> M -> {y} (a one-hop mediator).",
            "all": f"List all mediators of the effect of {x} on {y}.",
        }[query["variant"]]
