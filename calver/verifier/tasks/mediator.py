"""`mediator`: mediators of X -> Y.

M (not X or Y) is a mediator iff some directed walk X -> ... -> M -> ... -> Y visits X only at its
start and Y only at its end: M is reachable from X in G - {Y} and Y is reachable from M in G - {X}
(:func:`~calver.verifier.primitives.mediators`). On a DAG that is "M lies on a directed path from X
to Y"; on a cyclic graph a feedback loop through M counts, since it carries X's effect to Y (and
whether M lies on a *simple* directed path is NP-complete to decide).

Variants: ``any`` (one mediator, answered as a one-node set), ``direct`` (one one-hop mediator:
edges X -> M and M -> Y), ``all`` (the set of all mediators). Witness paths in the DERIVATION are
such walks, written forwards (``X -> M -> Y``) or backwards (``Y <- M <- X``).
"""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.contract import format_path, format_set
from calver.verifier.family import PASS, Check
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily, split_paths
from calver.verifier.values import cached_path


def walk_violation(g: CausalGraph, text: str, x: str, y: str) -> str | None:
    """Why a witness text is not a directed walk of ``g`` from x to y meeting x only first and y
    only last, or None. Edge existence raises (:func:`check_witness_paths` reports it first)."""
    from calver.verifier.primitives import path_edges

    nodes, types = cached_path(text)
    nodes = list(nodes)
    kinds = set(path_edges(g, nodes, types))  # an untyped list takes the graph's edge types
    if kinds == {"<-"}:
        nodes.reverse()
    elif kinds != {"->"}:
        return f"DERIVATION witness {text!r} is not a directed walk (its arrows must all point one way)"
    if len(nodes) < 2 or nodes[0] != x or nodes[-1] != y or x in nodes[1:] or y in nodes[:-1]:
        return (f"DERIVATION witness {text!r} is not a directed walk from {x} to {y} meeting {x} only first "
                f"and {y} only last")
    return None


@register
class Mediator(NodeSetFamily):
    name = "mediator"
    description = ("name mediators of the effect of treatment on outcome: nodes M on a directed walk treatment -> ... "
                   "-> M -> ... -> outcome that meets treatment only at its start and outcome only at its end "
                   "(on a DAG: on a directed path between them)")
    operation = "mediator_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG, GraphClass.DIRECTED)
    variants = ("any", "direct", "all")
    single_answer_variants = ("all",)  # every mediator: one set
    query_keys = ("treatment", "outcome", "variant")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word"}
    object_arg = "mediators"
    witness_arg = "paths"
    bound_args = ("treatment", "outcome")
    example_query = {"treatment": "X", "outcome": "Y", "variant": "any"}
    slot_docs = {
        "STRATEGY": "the mediator set, e.g. {M} (variant any: exactly one mediator; direct: exactly one M with "
                    "edges X -> M and M -> Y; all: every mediator)",
        "DERIVATION": "mediator_check(treatment=X, outcome=Y, mediators={...}, paths=[X -> M -> Y | ...]), each path "
                      "a directed walk of the graph from X to Y meeting X and Y only at its ends",
        "RESULT": "valid or invalid (whether the set is a correct mediator answer)",
        "ANSWER": "the mediator set only",
    }

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        if q["treatment"] == q["outcome"]:  # no walk X -> ... -> Y meets X only first and Y only last
            from calver.verifier.problem import ProblemError

            raise ProblemError("query fields 'treatment' and 'outcome' must differ")
        return q

    def excluded(self, query):
        return frozenset((query["treatment"], query["outcome"]))

    def _mediators(self, g: CausalGraph, query) -> frozenset[str]:
        from calver.verifier.primitives import mediators

        return frozenset(mediators(g, query["treatment"], query["outcome"], one_hop=query["variant"] == "direct"))

    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
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
            bits = (([f"misses {', '.join(miss)}"] if miss else [])
                    + ([f"{', '.join(extra)} not mediators"] if extra else []))
            return Check.fail(f"{format_set(nodes)} is not the set of all mediators of {x} -> {y}: " + "; ".join(bits))
        if len(nodes) != 1:
            return Check.fail(f"variant {query['variant']} asks for exactly one mediator, got {len(nodes)}")
        (m,) = nodes
        if m in true:
            return PASS
        if query["variant"] == "direct":
            return Check.fail(f"{m} is not a one-hop mediator: edges {x} -> {m} and {m} -> {y} are not both in "
                              "the graph")
        return Check.fail(f"{m} is not a mediator: no directed walk {x} -> ... -> {m} -> ... -> {y} meeting {x} and "
                          f"{y} only at its ends")

    def validity_class(self, g, query, limit=None):
        true = self._mediators(g, query)
        if query["variant"] == "all":
            return [true]
        return [frozenset({m}) for m in sorted(true)]

    def witness_paths(self, g, query, nodes):
        from calver.verifier.primitives import mediator_walk

        x, y = query["treatment"], query["outcome"]
        walks = (mediator_walk(g, x, y, m) for m in sorted(nodes)[:3])
        return list(dict.fromkeys(format_path(w) for w in walks if w))  # mediators may share a walk

    def witness_ends(self, query):
        return (query["treatment"], query["outcome"])

    def check_derivation(self, ctx):
        check = super().check_derivation(ctx)  # binding, and every witness edge in the graph
        if not check.ok:
            return check
        args, _ = self.derivation_call(ctx, self.bound_args)
        for text in split_paths(args.get(self.witness_arg) or ""):
            why = walk_violation(ctx.g_ver, text, ctx.query["treatment"], ctx.query["outcome"])
            if why:
                return Check.fail(why)
        return PASS

    def question_text(self, query: Mapping[str, Any]) -> str:
        x, y = query["treatment"], query["outcome"]
        return {
            "any": f"Name one mediator of the effect of {x} on {y}.",
            "direct": f"Name one variable M with {x} -> M -> {y} (a one-hop mediator).",
            "all": f"List all mediators of the effect of {x} on {y}.",
        }[query["variant"]]
