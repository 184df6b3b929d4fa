"""Fast validity-class enumeration for the node-set families, on bitmasks.

The families' own ``validity_class`` runs ``base_violation`` per subset, which builds a feedback
sentence (an open path) for every invalid subset: right for grading, slow for generation. Here the
same predicates run as plain mask tests on the verifier's own Bayes-ball routine, in the same
order (size, then sorted names) and with the same minimal/maximal post-filters. The generator
tests check equality with ``family.validity_class`` on every generated item and on random graphs;
families without a fast path fall back to the family's method.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Iterator

from calver.verifier.graph import CausalGraph
from calver.verifier.primitives import (
    descendants_mask,
    directed_path_indices,
    maximal_sets,
    minimal_sets,
    path_edges,
)
from calver.verifier.registry import get_family

try:  # the verifier's mask-level d-/m-connection test (same routine its predicates use)
    from calver.verifier.primitives import _connected as _verifier_connected
except ImportError:  # pragma: no cover - fall back to the public, name-based API
    _verifier_connected = None


def connected(g: CausalGraph, xm: int, ym: int, zm: int, no_out: int = 0) -> bool:
    """Is some node of ``ym`` d-/m-connected to ``xm`` given ``zm`` (outgoing edges of ``no_out``
    deleted)?"""
    if _verifier_connected is not None:
        return _verifier_connected(g, xm, ym, zm, no_out)
    from calver.verifier.primitives import is_separated

    return not is_separated(g, g.names(xm), g.names(ym), g.names(zm), remove_outgoing_of=g.names(no_out))


def subset_masks(g: CausalGraph, pool: int) -> Iterator[int]:
    """Every subset of ``pool`` as a mask, ordered by size then by sorted member names."""
    bits = [1 << g.index(n) for n in sorted(g.names(pool))]
    for k in range(len(bits) + 1):
        yield from map(sum, combinations(bits, k))


def _enumerate(g: CausalGraph, pool: int, ok: Callable[[int], bool], limit: int | None) -> list[frozenset[str]]:
    hits = []
    for zm in subset_masks(g, pool):
        if ok(zm):
            hits.append(zm)
            if limit is not None and len(hits) >= limit:
                break
    names = g.names
    return [names(zm) for zm in hits]


def _separated(g: CausalGraph, xm: int, ym: int, no_out: int = 0) -> Callable[[int], bool]:
    """``z -> X ⊥ Y | z`` (outgoing edges of ``no_out`` deleted), bound once per query."""
    if _verifier_connected is None:
        return lambda z: not connected(g, xm, ym, z, no_out)
    conn = _verifier_connected
    return lambda z: not conn(g, xm, ym, z, no_out)


def _variant(valid: list[frozenset[str]], variant: str) -> list[frozenset[str]]:
    if variant == "minimal":
        return minimal_sets(valid)
    if variant == "maximal":
        return maximal_sets(valid)
    return valid


def _all_mask(g: CausalGraph) -> int:
    return (1 << len(g.nodes)) - 1


def backdoor(g: CausalGraph, q: dict[str, Any], limit: int | None = None) -> list[frozenset[str]]:
    xm, ym = 1 << g.index(q["treatment"]), 1 << g.index(q["outcome"])
    pool = _all_mask(g) & ~(xm | ym | descendants_mask(g, xm))
    return _variant(_enumerate(g, pool, _separated(g, xm, ym, xm), limit), q["variant"])


def separation(g: CausalGraph, q: dict[str, Any], limit: int | None = None) -> list[frozenset[str]]:
    xm, ym = g.mask(q["x"]), g.mask(q["y"])
    pool = _all_mask(g) & ~(xm | ym)
    return _variant(_enumerate(g, pool, _separated(g, xm, ym), limit), q["variant"])


def frontdoor(g: CausalGraph, q: dict[str, Any], limit: int | None = None) -> list[frozenset[str]]:
    xm, ym = 1 << g.index(q["treatment"]), 1 << g.index(q["outcome"])

    def ok(z: int) -> bool:
        return bool(z) and directed_path_indices(g, xm, ym, blocked=z) is None \
            and not connected(g, xm, z, 0, xm) and not connected(g, z, ym, xm, z)

    pool = _all_mask(g) & ~(xm | ym)
    return _variant(_enumerate(g, pool, ok, limit), q["variant"])


def blocking(g: CausalGraph, q: dict[str, Any], limit: int | None = None) -> list[frozenset[str]]:
    """A set blocks the path iff it holds an interior non-collider, or misses some interior
    collider together with all of that collider's descendants."""
    nodes, types = q["path"]
    types = path_edges(g, list(nodes), list(types) if types else None)
    idx = [g.index(n) for n in nodes]
    noncol, collider_zones = 0, []
    for k in range(1, len(idx) - 1):
        if types[k - 1] in ("->", "<->") and types[k] in ("<-", "<->"):
            collider_zones.append(descendants_mask(g, 1 << idx[k], include_self=True))
        else:
            noncol |= 1 << idx[k]

    def ok(z: int) -> bool:
        return bool(z & noncol) or any(not z & zone for zone in collider_zones)

    pool = _all_mask(g) & ~((1 << idx[0]) | (1 << idx[-1]))
    return _variant(_enumerate(g, pool, ok, limit), q["variant"])


FAST: dict[str, Callable[..., list[frozenset[str]]]] = {
    "backdoor_set": backdoor,
    "separation_set": separation,
    "frontdoor_set": frontdoor,
    "blocking_set": blocking,
}


def validity_class(task: str, g: Any, query: dict[str, Any], limit: int | None = None) -> list[Any]:
    """The validity class of a normalized ``query`` on ``g`` (fast path where one exists)."""
    fast = FAST.get(task)
    if fast is not None:
        return fast(g, query, limit)
    fam = get_family(task)
    return fam.validity_class(g, query, limit=limit) if limit is not None else fam.validity_class(g, query)
