"""`backdoor_set`: find a (any / minimal / maximal) valid backdoor adjustment set for X -> Y.

Valid: Z ∩ ({X, Y} ∪ De(X)) = ∅ and X ⊥ Y | Z in G with X's outgoing edges removed (d-separation on
DAGs, m-separation on ADMGs). The derivation lists backdoor paths that Z blocks as witnesses.
Valid sets are the separators within R = V ∖ ({X, Y} ∪ De(X)), so minimal/maximal are exact
(:class:`~calver.verifier.tasks.base.SeparatorFamily`).
"""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.primitives import is_backdoor_set
from calver.verifier.registry import register
from calver.verifier.tasks.base import SeparatorFamily
from calver.verifier.tasks.paths import backdoor_paths


@register
class BackdoorSet(SeparatorFamily):
    name = "backdoor_set"
    description = "find a valid backdoor adjustment set for the effect of treatment on outcome"
    operation = "backdoor_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("treatment", "outcome", "variant")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word"}
    object_arg = "adjustment"
    witness_arg = "blocked"
    bound_args = ("treatment", "outcome")
    example_query = {"treatment": "X", "outcome": "Y", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the adjustment set, e.g. {A, B} ({} for the empty set)",
        "DERIVATION": "backdoor_check(treatment=X, outcome=Y, adjustment={...}, blocked=[backdoor paths Z blocks, "
        "e.g. X <- A -> Y | ...] or none)",
        "RESULT": "valid or invalid (whether the set satisfies the backdoor criterion)",
        "ANSWER": "the adjustment set only",
    }

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        if q["treatment"] == q["outcome"]:
            from calver.verifier.problem import ProblemError

            raise ProblemError("query fields 'treatment' and 'outcome' must differ")
        return q

    def excluded(self, query: Mapping[str, Any]) -> frozenset[str]:
        return frozenset((query["treatment"], query["outcome"]))

    def separator_masks(self, g, query):
        from calver.verifier.primitives import descendants_mask

        xm, ym = 1 << g.index(query["treatment"]), 1 << g.index(query["outcome"])
        rm = ((1 << len(g.nodes)) - 1) & ~(xm | ym | descendants_mask(g, xm))
        return xm, ym, rm, xm

    def candidates(self, g: CausalGraph, query: Mapping[str, Any]) -> list[str]:
        from calver.verifier.primitives import descendants

        banned = self.excluded(query) | descendants(g, query["treatment"])
        return [n for n in g.nodes if n not in banned]

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import backdoor_violation

        return backdoor_violation(g, query["treatment"], query["outcome"], nodes)

    def is_base_valid(self, g, query, nodes):
        return is_backdoor_set(g, query["treatment"], query["outcome"], nodes)

    def rule_objects(self, g, query):
        # the treatment's parents: every backdoor path leaves X through one, as a non-collider; then
        # every non-descendant of X (a superset of them, so valid too, and maximal when it is allowed)
        from calver.verifier.paths import descendants

        x, y = query["treatment"], query["outcome"]
        yield g.parents(x) - {y}
        yield frozenset(g) - descendants(g, [x]) - {x, y}

    def witness_paths(self, g, query, nodes):
        return backdoor_paths(g, query["treatment"], query["outcome"], limit=3)

    def witness_ends(self, query):
        return (query["treatment"], query["outcome"])

    def question_text(self, query: Mapping[str, Any]) -> str:
        kind = {"any": "one valid", "minimal": "one minimal valid", "maximal": "one maximal valid"}[query["variant"]]
        return f"Find {kind} backdoor adjustment set for treatment {query['treatment']} and outcome {query['outcome']}."
