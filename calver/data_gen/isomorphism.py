"""Graphs equal up to renaming their nodes: the test behind ``calver contamination`` (no training graph is a
benchmark's) and ``calver drill-report --exclude`` (no asked drill repeats a training graph).

Two graphs match when a bijection of their nodes maps the directed edges onto the directed edges and the
bidirected onto the bidirected: networkx's VF2 on a digraph whose arcs are labelled ``->`` / ``<->``, after a
Weisfeiler-Lehman hash of the same labelled graph buckets the candidates.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Iterable

from calver.verifier.graph import CausalGraph


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


def graph_hash(g: CausalGraph) -> str:
    """A Weisfeiler-Lehman hash of :func:`labelled_digraph`: isomorphic graphs share it (the converse is
    checked by :func:`isomorphic`)."""
    import networkx as nx

    d = labelled_digraph(g)
    with warnings.catch_warnings():  # networkx 3.5 notes that directed hashes changed: only equality is used here
        warnings.simplefilter("ignore", UserWarning)
        wl = nx.weisfeiler_lehman_graph_hash(d, edge_attr="kind")
    return f"{d.number_of_nodes()}:{d.number_of_edges()}:{wl}"


def isomorphic(a: CausalGraph, b: CausalGraph) -> bool:
    """Whether ``a`` and ``b`` are the same graph up to renaming their nodes (edge types kept)."""
    import networkx as nx

    return nx.is_isomorphic(labelled_digraph(a), labelled_digraph(b),
                            edge_match=lambda e1, e2: e1["kind"] == e2["kind"])


def repeated_graphs(items: Iterable[tuple[str, CausalGraph]], seen: Iterable[CausalGraph]) -> set[str]:
    """The labels of ``items`` (``(label, graph)``) whose graph is isomorphic, up to renaming, to one of ``seen``
    (every size: an evaluation set drops what a training set holds, where :func:`check` flags a training item)."""
    index: dict[str, list[CausalGraph]] = defaultdict(list)
    for g in seen:
        index[graph_hash(g)].append(g)
    return {label for label, g in items if any(isomorphic(g, b) for b in index.get(graph_hash(g), ()))}
