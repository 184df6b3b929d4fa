"""`frontdoor_set`: find a set satisfying Pearl's front-door criterion for X -> Y.

Condition (iii) has two readings, chosen by the optional query key ``criterion``
(:func:`~calver.verifier.primitives.frontdoor_violation`): ``set`` (default) tests Z ⊥ Y | X in G
without the out-edges of every member; ``per_member`` tests each z alone (every back-door path
z ... Y blocked by X). Valid sets are not monotone under ``set`` (adding two nodes can restore
what adding either breaks), yet minimal and maximal are exact and polynomial under both readings:

* (ii) is per member and (i) is upward closed.
* (iii) under ``set`` is closed under union: with more members G loses more edges and the
  conditioning set stays {X}, so a walk open for the union is open for the part holding its end.
  So within any pool R the sets meeting (ii) and (iii) have a largest member P*(R), the least fixed
  point of "drop the pool nodes a walk from Y given X reaches in G without the pool's out-edges"
  (:func:`_spread`, one linear search: a dropped node's out-edges return as the search goes), and a
  valid S ⊆ R exists iff P*(R) is non-empty and intercepts.
* Maximal: Z is maximal iff Z = P*(all candidates).
* Minimal: some valid S ⊊ Z exists iff for some v ∈ Z, P*(Z ∖ {v}) is valid. A v whose removal
  opens a directed path X -> ... -> Y (``_forced``) never qualifies; nor does one whose search
  reaches a node that never qualifies, since P*(Z ∖ {v}) ⊆ P*(Z ∖ {w}) when the search drops w.
  Under ``per_member`` every subset keeps (ii) and (iii), so only (i) matters: Z is minimal iff
  every member is forced.
"""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.budget import WorkBudget
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.paths import bits, closure, node_mask, union_of
from calver.verifier.primitives import (  # the bitmask internals the exact checks use
    FRONTDOOR_CRITERIA,
    _reach,
    _treatment_outcome,
    is_frontdoor_set,
)
from calver.verifier.problem import ProblemError
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily


def _spread(g: CausalGraph, xm: int, up: int, down: int, fu: int, fd: int, pool: int, stop: int = 0,
            budget: WorkBudget | None = None) -> tuple[int, int, int, bool]:
    """Continue a walk search from Y given X (the states ``up``/``down``: reached with a tail / an
    arrowhead; ``fu``/``fd``: not yet expanded) in G without the outgoing edges of ``pool``; a
    pool node the search reaches leaves the pool, and its out-edges return (also backwards, from
    children reached earlier). Returns (up, down, pool, hit): hit if a node of ``stop`` left the
    pool (the search then stops at once, its states incomplete). The moves are those of
    primitives._reach."""
    pm, cm, sm = g.parents_mask, g.children_mask, g.siblings_mask
    while fu or fd:
        if budget is not None:
            budget.spend(fu.bit_count() + fd.bit_count())
        nu = nd = 0
        m = fu  # entered through a tail, not X: any edge out
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
            if not low & pool:
                nd |= cm[i]
        m = fd & ~xm & ~pool  # entered through an arrowhead, out through a tail
        while m:
            low = m & -m
            m ^= low
            nd |= cm[low.bit_length() - 1]
        m = fd & xm  # a collider on X: out through an arrowhead
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
        nu &= ~pool & ~up
        nd &= ~down
        up |= nu
        down |= nd
        dropped = nd & pool  # reached only through an arrowhead while in the pool
        if dropped:
            pool &= ~dropped
            if dropped & stop:
                return up, down, pool, True
            if budget is not None:
                budget.spend(dropped.bit_count())
            src = (up & ~xm) | (down & xm)  # states that step on to a parent
            back = sum(1 << i for i in bits(dropped) if cm[i] & src) & ~up
            up |= back
            nu |= back
        fu, fd = nu & ~xm, nd
    return up, down, pool, False


def _largest(g: CausalGraph, xm: int, ym: int, pool: int, budget: WorkBudget | None = None) -> int:
    """P*(pool) under the ``set`` reading (see the module docstring); (ii) must already hold."""
    return _spread(g, xm, ym, 0, ym & ~xm, 0, pool, budget=budget)[2]


def _intercepts(g: CausalGraph, xm: int, ym: int, zm: int, budget: WorkBudget | None = None) -> bool:
    reached = closure(g.children_mask, xm, zm)
    if budget is not None:
        budget.spend(1 + reached.bit_count())
    return not reached & ym


def _forced(g: CausalGraph, xm: int, ym: int, zm: int) -> int:
    """Members v of Z such that Z ∖ {v} leaves a directed path X -> ... -> Y open: v is entered from
    X and leads to Y along directed paths that meet Z nowhere else."""
    from_x = closure(g.children_mask, xm, zm | ym)
    to_y = closure(g.parents_mask, ym, zm | xm)
    return union_of(g.children_mask, from_x | xm) & union_of(g.parents_mask, to_y | ym) & zm


def _not_ii(g: CausalGraph, xm: int) -> int:
    """Nodes failing (ii): m-connected to X given nothing in G without X's out-edges."""
    return _reach(g, xm, 0, xm)


def smaller_frontdoor_set(g: CausalGraph, xm: int, ym: int, zm: int, criterion: str = "set",
                          budget: WorkBudget | None = None) -> int | None:
    """A valid proper subset of the valid front-door set ``zm`` (mask), or None when it is minimal.
    ``set``: at most one search per unforced member, charged to ``budget``; ``per_member``: linear."""
    if criterion != "set":
        free = zm & ~_forced(g, xm, ym, zm)
        return zm & ~(free & -free) if free and zm & (zm - 1) else None
    budget = budget or WorkBudget(what="the minimality check")
    up, down, pool, _ = _spread(g, xm, ym, 0, ym & ~xm, 0, zm & ~_not_ii(g, xm), budget=budget)
    if pool != zm:  # Z itself fails (ii) or (iii): P*(Z) is the only candidate
        return pool if pool and _intercepts(g, xm, ym, pool) else None
    if not _intercepts(g, xm, ym, zm):  # (i) is upward closed: no subset intercepts either
        return None
    known = _forced(g, xm, ym, zm)  # members without which no subset is valid
    src = (up & ~xm) | (down & xm)
    cm = g.children_mask
    for i in bits(zm & ~known):
        v = 1 << i
        rest = zm & ~v
        if not rest:
            break
        if not cm[i] & src:  # no walk from Y reaches v: Z ∖ {v} keeps (iii), and v is unforced
            return rest
        _, _, left, hit = _spread(g, xm, up | v, down, v, 0, rest, stop=known, budget=budget)
        if not hit and left and _intercepts(g, xm, ym, left, budget):
            return left
        known |= v
    return None


def larger_frontdoor_set(g: CausalGraph, xm: int, ym: int, zm: int, cands: int, criterion: str = "set",
                         budget: WorkBudget | None = None) -> int | None:
    """A valid proper superset (within ``cands``) of the valid front-door set ``zm``, or None when it
    is maximal. ``set``: linear (P* of the candidates); ``per_member``: one walk search from Y in G
    decides each outside candidate it reaches only through an arrowhead or not at all (its first
    arrival needs none of its out-edges); the rest cost one search each, charged to ``budget``."""
    pool = cands & ~_not_ii(g, xm)
    if criterion == "set":
        pool = _largest(g, xm, ym, pool, budget)
        return pool if pool != zm and not zm & ~pool else None
    budget = budget or WorkBudget(what="the maximality check")
    up, down, _, _ = _spread(g, xm, ym, 0, ym & ~xm, 0, 0, budget=budget)
    for i in bits(pool & ~zm):
        w = 1 << i
        if not up & w:
            if not down & w:
                return zm | w
            continue
        # w's own test: does a walk from Y reach w in G without w's out-edges?
        if not _spread(g, xm, ym, 0, ym & ~xm, 0, w, stop=w, budget=budget)[3]:
            return zm | w
    return None


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

    def excluded(self, query: Mapping[str, Any]) -> frozenset[str]:
        return frozenset((query["treatment"], query["outcome"]))

    def base_violation(self, g, query, nodes):
        from calver.verifier.primitives import frontdoor_violation

        return frontdoor_violation(g, query["treatment"], query["outcome"], nodes, query.get("criterion", "set"))

    def is_base_valid(self, g, query, nodes):
        return is_frontdoor_set(g, query["treatment"], query["outcome"], nodes, query.get("criterion", "set"))

    # ---- exact minimal / maximal (see the module docstring) --------------------------------------
    def _proper_subset_valid(self, g, query, nodes, budget=None):
        xm, ym = _treatment_outcome(g, query["treatment"], query["outcome"], "front-door")
        found = smaller_frontdoor_set(g, xm, ym, node_mask(g, nodes), query.get("criterion", "set"), budget)
        return None if found is None else g.names(found)

    def _proper_superset_valid(self, g, query, nodes, budget=None):
        xm, ym = _treatment_outcome(g, query["treatment"], query["outcome"], "front-door")
        cands = ((1 << len(g.nodes)) - 1) & ~(xm | ym)
        found = larger_frontdoor_set(g, xm, ym, node_mask(g, nodes), cands, query.get("criterion", "set"), budget)
        return None if found is None else g.names(found)

    # ---- rendering -----------------------------------------------------------------------------
    def witness_paths(self, g, query, nodes):
        from calver.verifier.contract import format_path
        from calver.verifier.tasks.paths import typed_paths

        paths = typed_paths(g, query["treatment"], query["outcome"], limit=12)
        directed = [(n, t) for n, t in paths if all(x == "->" for x in t)]
        return [format_path(n, t) for n, t in directed[:3]]

    def witness_ends(self, query):
        return (query["treatment"], query["outcome"])

    def question_text(self, query: Mapping[str, Any]) -> str:
        kind = {"any": "one valid", "minimal": "one minimal valid", "maximal": "one maximal valid"}[query["variant"]]
        text = (f"Find {kind} front-door adjustment set for treatment {query['treatment']} "
                f"and outcome {query['outcome']}.")
        if query.get("criterion") == "per_member":
            text += (" Read condition (iii) per member: for each member z alone, every back-door path "
                     "from z to the outcome is blocked by the treatment.")
        return text
