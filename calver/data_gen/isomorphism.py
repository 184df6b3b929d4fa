"""Graphs equal up to renaming their nodes: the test behind ``calver contamination`` (no training graph is a
benchmark's) and ``calver drill-report --exclude`` (no asked drill repeats a training graph).

Two graphs match when a bijection of their nodes maps the directed edges onto the directed edges and the
bidirected onto the bidirected: networkx's VF2 on a digraph whose arcs are labelled ``->`` / ``<->``, after a
Weisfeiler-Lehman hash of the same labelled graph buckets the candidates.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Any, Generic, Iterable, TypeVar

from calver.verifier.graph import CausalGraph

L = TypeVar("L")


def labelled_digraph(g: CausalGraph):
    """``g`` as a networkx DiGraph whose arc ``(u, v)`` carries ``kind``: ``->``, ``<->`` or both
    (``-><->``), so isomorphism respects edge types and node names do not matter."""
    import networkx as nx

    kinds: dict[tuple[str, str], set[str]] = defaultdict(set)
    for a, b in g.directed:
        kinds[(a, b)].add("->")
    for a, b in g.bidirected:
        kinds[(a, b)].add("<->")
        kinds[(b, a)].add("<->")
    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    for (a, b), ks in kinds.items():
        d.add_edge(a, b, kind="".join(sorted(ks)))
    return d


def _wl_key(d) -> str:
    import networkx as nx

    with warnings.catch_warnings():  # networkx 3.5 notes that directed hashes changed: only equality is used here
        warnings.simplefilter("ignore", UserWarning)
        wl = nx.weisfeiler_lehman_graph_hash(d, edge_attr="kind")
    return f"{d.number_of_nodes()}:{d.number_of_edges()}:{wl}"


def _same(a, b) -> bool:
    import networkx as nx

    return nx.is_isomorphic(a, b, edge_match=lambda e1, e2: e1["kind"] == e2["kind"])


def graph_hash(g: CausalGraph) -> str:
    """A Weisfeiler-Lehman hash of :func:`labelled_digraph`: isomorphic graphs share it (the converse is
    checked by :func:`isomorphic`)."""
    return _wl_key(labelled_digraph(g))


def isomorphic(a: CausalGraph, b: CausalGraph) -> bool:
    """Whether ``a`` and ``b`` are the same graph up to renaming their nodes (edge types kept)."""
    return _same(labelled_digraph(a), labelled_digraph(b))


class GraphIndex(Generic[L]):
    """Labelled graphs bucketed by :func:`graph_hash`, each kept as its :func:`labelled_digraph`, so a query
    builds its own digraph once and runs VF2 only against its bucket."""

    def __init__(self, items: Iterable[tuple[L, CausalGraph]] = ()) -> None:
        self._buckets: dict[str, list[tuple[L, Any]]] = defaultdict(list)
        self._n = 0
        for label, g in items:
            self.add(label, g)

    def __len__(self) -> int:
        return self._n

    def add(self, label: L, g: CausalGraph) -> None:
        d = labelled_digraph(g)
        self._buckets[_wl_key(d)].append((label, d))
        self._n += 1

    def find(self, g: CausalGraph) -> L | None:
        """The label of the first indexed graph isomorphic to ``g`` (None: none); stops at the first match."""
        d = labelled_digraph(g)
        return next((label for label, b in self._buckets.get(_wl_key(d), ()) if _same(d, b)), None)


def repeated_graphs(items: Iterable[tuple[str, CausalGraph]], seen: Iterable[CausalGraph]) -> set[str]:
    """The labels of ``items`` (``(label, graph)``) whose graph is isomorphic, up to renaming, to one of ``seen``
    (every size: an evaluation set drops what a training set holds, where ``calver contamination`` flags a
    training item)."""
    index = GraphIndex((i, g) for i, g in enumerate(seen))
    return {label for label, g in items if index.find(g) is not None}
