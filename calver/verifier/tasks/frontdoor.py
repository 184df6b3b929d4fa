"""`frontdoor_set`: find a set satisfying Pearl's front-door criterion for X -> Y.

Condition (iii) has two readings, chosen by the optional query key ``criterion``
(:func:`~calver.verifier.primitives.frontdoor_violation`): ``set`` (default) tests Z ⊥ Y | X in G
without the out-edges of every member; ``per_member`` tests each z alone (every back-door path
z ... Y blocked by X). Under ``set`` valid sets are not monotone (adding two nodes can restore
what adding either breaks), so minimal searches exhaustively over a soundly pruned pool;
under ``per_member`` every condition but (i) is per member and (i) is upward closed, so minimal
is a one-removal test. Maximal is polynomial under both: the pruned pool is the largest valid set.
"""

from __future__ import annotations

from typing import Any

from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.paths import bits, directed_path_indices, node_mask
from calver.verifier.primitives import (  # the bitmask internals the exact search prunes with
    FRONTDOOR_CRITERIA, _connected, _iii_starts, _reach, _treatment_outcome, is_frontdoor_set,
)
from calver.verifier.problem import ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily


def frontdoor_pool(g: CausalGraph, x: str, y: str, must: int, pool: int, criterion: str = "set",
                   force: bool = True) -> tuple[int, int] | None:
    """Sound pruning for exact minimal/maximal front-door search over the sets Z with ``must`` ⊆ Z ⊆
    ``pool``: returns (must', pool') holding every valid such Z, or None if none is valid.
    (ii) is per member: a node m-connected to X in G without X's out-edges never belongs. (iii)
    only loses paths as Z grows (edges go, so An(X) shrinks): a node connected to Y given X even
    without the out-edges of the whole pool never belongs; repeat to a fixed point. (i) is upward
    closed: it fails for every Z if the pool does not intercept, and (with ``force``) a node
    without which the pool does not intercept belongs to every valid Z."""
    xm, ym = _treatment_outcome(g, x, y, "front-door")
    bad = _reach(g, xm, 0, xm) & pool  # (ii)
    while True:
        if bad & must:
            return None
        pool &= ~bad
        if criterion == "set":
            bad = _reach(g, ym, xm, pool) & pool
        else:  # per member: a node's test does not depend on the pool
            bad = sum(s for s in _iii_starts(pool, criterion) if _connected(g, s, ym, xm, s))
        if not bad:
            break
    if directed_path_indices(g, xm, ym, blocked=pool) is not None:
        return None
    for i in bits(pool & ~must) if force else ():
        if directed_path_indices(g, xm, ym, blocked=pool & ~(1 << i)) is not None:
            must |= 1 << i
    return must, pool


@register
class FrontdoorSet(NodeSetFamily):
    name = "frontdoor_set"
    description = "find a valid front-door adjustment set for the effect of treatment on outcome"
    operation = "frontdoor_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG)
    query_keys = ("treatment", "outcome", "variant", "criterion")
    query_types = {"treatment": "node", "outcome": "node", "variant": "word", "criterion": "word"}
    query_defaults = {"variant": "any", "criterion": "set"}
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

    def normalize_query(self, problem):
        q = super().normalize_query(problem)
        if q["criterion"] not in FRONTDOOR_CRITERIA:
            raise ProblemError(f"query field 'criterion' must be one of {FRONTDOOR_CRITERIA}, got {q['criterion']!r}")
        if q["treatment"] == q["outcome"]:
            raise ProblemError("query fields 'treatment' and 'outcome' must differ")
        return q

    def rule_objects(self, g, query):
        # the treatment's children: every directed X -> ... -> Y path enters one first
        yield g.children(query["treatment"]) - {query["outcome"]}

    def excluded(self, query: dict[str, Any]) -> frozenset[str]:
        return frozenset((query["treatment"], query["outcome"]))

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import frontdoor_violation

        return frontdoor_violation(g, query["treatment"], query["outcome"], nodes, query.get("criterion", "set"))

    def is_base_valid(self, g, query, nodes):
        return is_frontdoor_set(g, query["treatment"], query["outcome"], nodes, query.get("criterion", "set"))

    # ---- exact minimal / maximal ------------------------------------------------------------
    def prune_pool(self, g, query, must, pool):
        kept = frontdoor_pool(g, query["treatment"], query["outcome"], node_mask(g, must), node_mask(g, pool),
                              query.get("criterion", "set"))
        return None if kept is None else (g.names(kept[0]), g.names(kept[1]))

    def _proper_subset_valid(self, g, query, nodes):
        if query.get("criterion", "set") == "set":
            return super()._proper_subset_valid(g, query, nodes)
        # per member: valid = non-empty, members pass alone, (i); (i) is upward closed, so a valid
        # proper subset exists iff some one-removal is valid
        for n in sorted(nodes):
            if self.is_base_valid(g, query, nodes - {n}):
                return nodes - {n}
        return None

    def _proper_superset_valid(self, g, query, nodes):
        # Under either reading the pruned pool is itself valid: every member passes (ii), (iii)
        # holds in G without the pool's out-edges (the fixed point) and the pool ⊇ Z intercepts.
        # Every valid superset of Z lies in it, so Z is maximal iff it is the pool.
        zm = node_mask(g, nodes)
        cands = ((1 << len(g.nodes)) - 1) & ~node_mask(g, self.excluded(query))
        pruned = frontdoor_pool(g, query["treatment"], query["outcome"], zm, cands, query.get("criterion", "set"),
                                force=False)
        if pruned is None or pruned[1] == zm:
            return None
        pool = g.names(pruned[1])
        if self.is_base_valid(g, query, pool):
            return pool
        return super()._proper_superset_valid(g, query, nodes)  # pragma: no cover - see above

    # ---- rendering -----------------------------------------------------------------------------
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
        text = (f"Find {kind} front-door adjustment set for treatment {query['treatment']} "
                f"and outcome {query['outcome']}.")
        if query.get("criterion") == "per_member":
            text += (" Read condition (iii) per member: for each member z alone, every back-door path "
                     "from z to the outcome is blocked by the treatment.")
        return text
