"""Seeded random graph generators: DAGs, ADMGs (latent confounding as bidirected edges) and
directed graphs with planted cycles.

Graphs are first built on integer nodes ``0..n-1`` whose index order is a topological order of the
directed acyclic part (:class:`Skeleton`), so families can plant structure (``X -> M -> Y`` with a
confounder, a cycle ...) by position; :func:`label` then names the nodes with a random assignment
(``names.node_names``), so no name reveals a position. Every function takes the item's ``rng``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from calver.verifier.graph import CausalGraph, GraphClass


@dataclass
class Skeleton:
    """A graph on nodes ``0..n-1`` (directed ``(i, j)`` pairs, bidirected pairs with ``i < j``)."""

    n: int
    directed: set[tuple[int, int]] = field(default_factory=set)
    bidirected: set[tuple[int, int]] = field(default_factory=set)
    kind: str = "DAG"

    def add_bidirected(self, i: int, j: int) -> None:
        if i != j:
            self.bidirected.add((min(i, j), max(i, j)))

    def children(self, i: int) -> list[int]:
        return sorted(b for a, b in self.directed if a == i)

    def reachable(self, i: int) -> set[int]:
        """Nodes reachable from ``i`` by a directed path (``i`` excluded unless on a cycle)."""
        out: set[int] = set()
        stack = [i]
        adj: dict[int, list[int]] = {}
        for a, b in self.directed:
            adj.setdefault(a, []).append(b)
        while stack:
            for b in adj.get(stack.pop(), ()):
                if b not in out:
                    out.add(b)
                    stack.append(b)
        return out


def random_dag(rng: random.Random, n: int, density: float) -> Skeleton:
    """Erdős–Rényi DAG: each forward pair ``i < j`` gets ``i -> j`` with probability ``density``."""
    sk = Skeleton(n)
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < density:
                sk.directed.add((i, j))
    return sk


def add_latents(rng: random.Random, sk: Skeleton, latent: float, *, at_least: int = 1,
                forbid: set[tuple[int, int]] | frozenset = frozenset()) -> Skeleton:
    """Make ``sk`` an ADMG: each unordered pair gets ``i <-> j`` with probability ``latent``
    (pairs in ``forbid`` excepted); at least ``at_least`` bidirected edges overall."""
    sk.kind = "ADMG"
    pairs = [(i, j) for i in range(sk.n) for j in range(i + 1, sk.n) if (i, j) not in forbid]
    for p in pairs:
        if rng.random() < latent:
            sk.bidirected.add(p)
    free = [p for p in pairs if p not in sk.bidirected]
    while len(sk.bidirected) < at_least and free:
        p = free.pop(rng.randrange(len(free)))
        sk.bidirected.add(p)
    return sk


def plant_cycles(rng: random.Random, sk: Skeleton, k: int, max_len: int = 4) -> Skeleton:
    """Make ``sk`` a directed graph with ``k`` planted cycles: each picks 2..``max_len`` nodes in
    increasing order, adds the forward chain between them and the closing back edge."""
    sk.kind = "directed"
    for _ in range(k):
        length = rng.randint(2, max(2, min(max_len, sk.n)))
        nodes = sorted(rng.sample(range(sk.n), length))
        for a, b in zip(nodes, nodes[1:]):
            sk.directed.add((a, b))
        sk.directed.add((nodes[-1], nodes[0]))
    return sk


def random_skeleton(rng: random.Random, n: int, density: float, kind: str, latent: float) -> Skeleton:
    """A random graph of class ``kind`` (``DAG``, ``ADMG``, ``directed``)."""
    sk = random_dag(rng, n, density)
    if kind == "ADMG":
        add_latents(rng, sk, latent)
    elif kind == "directed":
        plant_cycles(rng, sk, rng.randint(1, 3))
    return sk


def label(sk: Skeleton, names: list[str]) -> CausalGraph:
    """Name the skeleton's nodes (``names[i]`` for node ``i``); nodes are listed in name order."""
    if len(names) != sk.n or len(set(names)) != sk.n:
        raise ValueError(f"need {sk.n} distinct names, got {len(names)}")
    return CausalGraph.build(
        sorted(names),
        [(names[a], names[b]) for a, b in sorted(sk.directed)],
        [(names[a], names[b]) for a, b in sorted(sk.bidirected)],
        GraphClass.parse(sk.kind),
    )
