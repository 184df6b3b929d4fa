"""Bounded enumeration of typed simple paths, used to list witness paths in canonical derivations."""

from __future__ import annotations

from calver.verifier.contract import format_path
from calver.verifier.graph import CausalGraph


def _neighbours(g: CausalGraph, node: str):
    """(neighbour, edge type as written from ``node``) pairs, in a deterministic order."""
    out = [(c, "->") for c in sorted(g.children(node))]
    out += [(p, "<-") for p in sorted(g.parents(node))]
    out += [(s, "<->") for s in sorted(g.siblings(node))]
    return out


def typed_paths(g: CausalGraph, start: str, end: str, *, first_into_start: bool = False,
                limit: int = 3, max_len: int = 8) -> list[tuple[list[str], list[str]]]:
    """Up to ``limit`` simple paths start..end (shortest first, BFS over partial paths).

    ``first_into_start``: the first edge must have an arrowhead at ``start`` (a backdoor path).
    """
    found: list[tuple[list[str], list[str]]] = []
    frontier: list[tuple[list[str], list[str]]] = [([start], [])]
    while frontier and len(found) < limit:
        nxt = []
        for nodes, types in frontier:
            for nb, t in _neighbours(g, nodes[-1]):
                if nb in nodes:
                    continue
                if first_into_start and not types and t == "->":
                    continue
                cand = (nodes + [nb], types + [t])
                if nb == end:
                    found.append(cand)
                    if len(found) >= limit:
                        break
                elif len(cand[0]) < max_len:
                    nxt.append(cand)
            if len(found) >= limit:
                break
        frontier = nxt[:2000]  # keep enumeration bounded on dense graphs
    return found


def backdoor_paths(g: CausalGraph, x: str, y: str, limit: int = 3) -> list[str]:
    return [format_path(n, t) for n, t in typed_paths(g, x, y, first_into_start=True, limit=limit)]
