"""`frontdoor_set`: find a set satisfying Pearl's front-door criterion for X -> Y."""

from __future__ import annotations

from typing import Any

from calver.verifier.graph import GraphClass
from calver.verifier.primitives import is_frontdoor_set
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily


@register
class FrontdoorSet(NodeSetFamily):
    name = "frontdoor_set"
    description = "find a valid front-door adjustment set for the effect of treatment on outcome"
    operation = "frontdoor_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("treatment", "outcome", "variant")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word"}
    object_arg = "adjustment"
    witness_arg = "intercepted"
    bound_args = ("treatment", "outcome")
    example_query = {"treatment": "X", "outcome": "Y", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the front-door set, e.g. {M}",
        "DERIVATION": "frontdoor_check(treatment=X, outcome=Y, adjustment={...}, intercepted=[directed paths "
        "X -> ... -> Y the set intercepts] or none)",
        "RESULT": "valid or invalid (whether the set satisfies the front-door criterion)",
        "ANSWER": "the front-door set only",
    }

    def excluded(self, query: dict[str, Any]) -> frozenset[str]:
        return frozenset((query["treatment"], query["outcome"]))

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import frontdoor_violation

        return frontdoor_violation(g, query["treatment"], query["outcome"], nodes)

    def is_base_valid(self, g, query, nodes):
        return is_frontdoor_set(g, query["treatment"], query["outcome"], nodes)

    def witness_paths(self, g, query, nodes):
        from calver.verifier.contract import format_path
        from calver.verifier.tasks.paths import typed_paths

        paths = typed_paths(g, query["treatment"], query["outcome"], limit=12)
        directed = [(n, t) for n, t in paths if all(x == "->" for x in t)]
        return [format_path(n, t) for n, t in directed[:3]]

    def witness_ends(self, query):
        return (query["treatment"], query["outcome"])

    def question_text(self, query: dict[str, Any]) -> str:
        kind = {"any": "one valid", "minimal": "one minimal valid", "maximal": "one maximal valid"}[query["variant"]]
        return f"Find {kind} front-door adjustment set for treatment {query['treatment']} and outcome {query['outcome']}."
