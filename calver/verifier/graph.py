"""Typed causal graphs: DAGs, ADMGs (directed + bidirected edges) and directed graphs that may cycle.

Edge type is part of the graph's identity from parsing to grading. Nodes are strings. Every graph
precomputes integer bitmask adjacency once (``parents_mask`` etc.), so the primitives in
``calver.verifier.primitives`` run as bit operations rather than networkx traversals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Iterable, Iterator

if TYPE_CHECKING:
    from calver.verifier.formats.common import RenderOrder


class GraphClass(str, Enum):
    DAG = "DAG"
    ADMG = "ADMG"
    DIRECTED = "directed"  # directed graph, cycles allowed (cycle-witness tasks)

    @classmethod
    def parse(cls, value: "GraphClass | str") -> "GraphClass":
        if isinstance(value, GraphClass):
            return value
        key = str(value).strip().lower()
        aliases = {
            "dag": cls.DAG,
            "admg": cls.ADMG,
            "directed": cls.DIRECTED,
            "digraph": cls.DIRECTED,
            "directed graph": cls.DIRECTED,
            "cyclic": cls.DIRECTED,
            "dg": cls.DIRECTED,
        }
        if key not in aliases:
            raise GraphError(f"unknown graph class {value!r}; expected one of DAG, ADMG, directed")
        return aliases[key]


class GraphError(ValueError):
    """A graph text or structure is malformed, or violates its declared class."""


# Line breaks as str.splitlines reads them: a name holding one cannot sit on a trace's slot line.
_LINE_BREAKS = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def check_name(name: object) -> None:
    """Raise :class:`GraphError` unless ``name`` is a legal node name: a non-empty string with no line
    break that some quote pair of arrow text can hold (``"..."``, ``'...'`` or ``“...”``). Every
    legal name survives ``to_text`` -> ``parse_graph``; the other renderers hold it or refuse it."""
    if not isinstance(name, str) or not name:
        raise GraphError(f"node names must be non-empty strings, got {name!r}")
    if _LINE_BREAKS.search(name):
        raise GraphError(f"node name {name[:40]!r} holds a line break")
    if '"' in name and "'" in name and "”" in name:
        raise GraphError(f"node name {name[:40]!r} holds every quote character (\", ', ”): no text format can "
                         "quote it")


def bidirected_key(a: str, b: str) -> tuple[str, str]:
    """A bidirected edge as a graph keys it: its two ends in sorted order."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True, eq=False)
class CausalGraph:
    """An immutable typed graph.

    ``directed`` holds (tail, head) pairs; ``bidirected`` holds sorted (a, b) pairs. Construct
    through :meth:`build`, which validates the declared class (a DAG may not cycle or hold
    bidirected edges; an ADMG may not have a directed cycle).
    """

    nodes: tuple[str, ...]
    directed: frozenset[tuple[str, str]]
    bidirected: frozenset[tuple[str, str]]
    kind: GraphClass
    _index: dict[str, int] = field(repr=False, compare=False)
    parents_mask: tuple[int, ...] = field(repr=False, compare=False)
    children_mask: tuple[int, ...] = field(repr=False, compare=False)
    siblings_mask: tuple[int, ...] = field(repr=False, compare=False)
    acyclic: bool = field(repr=False, compare=False)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        nodes: Iterable[str] = (),
        directed: Iterable[tuple[str, str]] = (),
        bidirected: Iterable[tuple[str, str]] = (),
        kind: GraphClass | str | None = None,
        *,
        validate: bool = True,
    ) -> "CausalGraph":
        """Build a graph. ``kind=None`` infers ADMG if any bidirected edge, else DAG if acyclic,
        else directed. With ``validate`` a class violation raises :class:`GraphError`."""
        d_list = [tuple(e) for e in directed]
        b_list = [tuple(e) for e in bidirected]
        for e in d_list + b_list:
            if len(e) != 2:
                raise GraphError(f"an edge must join two nodes, got {e!r}")
        # insertion order: declared nodes, then edge endpoints as they appear
        try:
            order = list(dict.fromkeys([*nodes, *(x for e in d_list for x in e), *(x for e in b_list for x in e)]))
        except TypeError as e:  # an unhashable "name"
            raise GraphError(f"node names must be strings: {e}") from None
        for n in order:
            check_name(n)
        d_edges: set[tuple[str, str]] = {(str(a), str(b)) for a, b in d_list}
        b_edges: set[tuple[str, str]] = set()
        for a, b in b_list:
            if a == b:
                raise GraphError(f"bidirected self-loop {a}<->{a} is not allowed")
            b_edges.add(bidirected_key(a, b))

        index = {n: i for i, n in enumerate(order)}
        parents = [0] * len(order)
        children = [0] * len(order)
        siblings = [0] * len(order)
        for a, b in d_edges:
            ia, ib = index[a], index[b]
            parents[ib] |= 1 << ia
            children[ia] |= 1 << ib
        for a, b in b_edges:
            ia, ib = index[a], index[b]
            siblings[ia] |= 1 << ib
            siblings[ib] |= 1 << ia
        acyclic = _is_acyclic(children)

        if kind is None:
            kind = GraphClass.ADMG if b_edges else (GraphClass.DAG if acyclic else GraphClass.DIRECTED)
        kind = GraphClass.parse(kind)
        graph = cls(
            nodes=tuple(order),
            directed=frozenset(d_edges),
            bidirected=frozenset(b_edges),
            kind=kind,
            _index=index,
            parents_mask=tuple(parents),
            children_mask=tuple(children),
            siblings_mask=tuple(siblings),
            acyclic=acyclic,
        )
        if validate:
            graph.check_class()
        return graph

    def check_class(self) -> None:
        """Raise :class:`GraphError` if the graph violates its declared class."""
        if self.kind is GraphClass.DAG and self.bidirected:
            a, b = sorted(self.bidirected)[0]
            raise GraphError(f"a DAG cannot hold bidirected edge {a}<->{b}; declare it an ADMG")
        if self.kind in (GraphClass.DAG, GraphClass.ADMG) and not self.acyclic:
            from calver.verifier.primitives import find_directed_cycle

            cycle = find_directed_cycle(self) or []
            shown = " -> ".join(cycle + cycle[:1])
            raise GraphError(f"declared {self.kind.value} has a directed cycle: {shown}")

    # ---- views --------------------------------------------------------------------------
    def __contains__(self, node: object) -> bool:
        return node in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CausalGraph):
            return NotImplemented
        return (
            set(self.nodes) == set(other.nodes)
            and self.directed == other.directed
            and self.bidirected == other.bidirected
        )

    def __hash__(self) -> int:
        return hash((frozenset(self.nodes), self.directed, self.bidirected))

    def index(self, node: str) -> int:
        try:
            return self._index[node]
        except KeyError:
            raise GraphError(f"unknown node {node!r}; graph nodes are {', '.join(self.nodes)}") from None

    def mask(self, nodes: Iterable[str]) -> int:
        """Bitmask of a node collection (raises on unknown nodes)."""
        m = 0
        for n in nodes:
            m |= 1 << self.index(n)
        return m

    def names(self, mask: int) -> frozenset[str]:
        out = []
        nodes = self.nodes
        while mask:
            low = mask & -mask
            out.append(nodes[low.bit_length() - 1])
            mask ^= low
        return frozenset(out)

    def has_edge(self, a: str, b: str, edge_type: str = "->") -> bool:
        if edge_type == "->":
            return (a, b) in self.directed
        if edge_type == "<-":
            return (b, a) in self.directed
        if edge_type == "<->":
            return bidirected_key(a, b) in self.bidirected
        raise GraphError(f"unknown edge type {edge_type!r}")

    def parents(self, node: str) -> frozenset[str]:
        return self.names(self.parents_mask[self.index(node)])

    def children(self, node: str) -> frozenset[str]:
        return self.names(self.children_mask[self.index(node)])

    def siblings(self, node: str) -> frozenset[str]:
        return self.names(self.siblings_mask[self.index(node)])

    def edges_text(self) -> list[str]:
        """Canonical sorted edge strings (``A -> B``, ``A <-> B``), names quoted where arrow text needs it."""
        from calver.verifier.formats.arrows import render_name

        out = [f"{render_name(a)} -> {render_name(b)}" for a, b in sorted(self.directed)]
        out += [f"{render_name(a)} <-> {render_name(b)}" for a, b in sorted(self.bidirected)]
        return out

    def to_text(self, order: "RenderOrder | None" = None) -> str:
        """Canonical arrow text (``render_graph(g, "arrows", order)``): ``parse_graph`` reads back this graph
        for every legal node name (see :func:`check_name`); isolated nodes listed too. ``order``: nodes and
        edges in that order (default: node order, sorted edges)."""
        from calver.verifier.formats.arrows import render

        return render(self, order)

    def relabel(self, mapping: dict[str, str]) -> "CausalGraph":
        return CausalGraph.build(
            [mapping.get(n, n) for n in self.nodes],
            [(mapping.get(a, a), mapping.get(b, b)) for a, b in self.directed],
            [(mapping.get(a, a), mapping.get(b, b)) for a, b in self.bidirected],
            self.kind,
        )

    def with_edges(
        self,
        remove_directed: Iterable[tuple[str, str]] = (),
        add_directed: Iterable[tuple[str, str]] = (),
        remove_bidirected: Iterable[tuple[str, str]] = (),
        add_bidirected: Iterable[tuple[str, str]] = (),
        kind: GraphClass | str | None = None,
        validate: bool = False,
    ) -> "CausalGraph":
        rb = {bidirected_key(a, b) for a, b in remove_bidirected}
        return CausalGraph.build(
            self.nodes,
            (self.directed - set(remove_directed)) | set(add_directed),
            (self.bidirected - rb) | {bidirected_key(a, b) for a, b in add_bidirected},
            kind or self.kind,
            validate=validate,
        )

    def to_networkx(self):
        """A networkx DiGraph of the directed part (bidirected edges in ``graph['bidirected']``)."""
        import networkx as nx

        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from(self.directed)
        g.graph["bidirected"] = sorted(self.bidirected)
        return g


def _is_acyclic(children: list[int]) -> bool:
    """Kahn's algorithm on bitmask adjacency."""
    n = len(children)
    indeg = [0] * n
    for c in children:
        m = c
        while m:
            low = m & -m
            indeg[low.bit_length() - 1] += 1
            m ^= low
    stack = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while stack:
        i = stack.pop()
        seen += 1
        m = children[i]
        while m:
            low = m & -m
            j = low.bit_length() - 1
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
            m ^= low
    return seen == n
