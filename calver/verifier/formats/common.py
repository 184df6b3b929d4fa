"""What every graph format shares: the error type and its position message, the edge limit, edge-type
words, and quoting a node name for a text format."""

from __future__ import annotations

from dataclasses import dataclass

from calver.verifier.graph import CausalGraph, GraphError, bidirected_key

MAX_EDGES = 50_000


@dataclass(frozen=True)
class RenderOrder:
    """The order in which a renderer lists a graph's nodes and edges (a prompt need not list them sorted, and
    CLEAR's do not). ``order_of(g)`` without one: the graph's node order and sorted edges, as always."""

    nodes: tuple[str, ...]
    directed: tuple[tuple[str, str], ...]
    bidirected: tuple[tuple[str, str], ...] = ()

    def check(self, g: CausalGraph) -> "RenderOrder":
        """Itself, when it lists exactly ``g``'s nodes and edges, each once; else GraphError."""
        bi = tuple(bidirected_key(a, b) for a, b in self.bidirected)
        for what, got, want in (("nodes", self.nodes, g.nodes), ("directed edges", self.directed, g.directed),
                                ("bidirected edges", bi, g.bidirected)):
            if len(got) != len(set(got)) or set(got) != set(want):
                raise GraphError(f"render order: its {what} are not the graph's, each once")
        return RenderOrder(tuple(self.nodes), tuple((a, b) for a, b in self.directed), bi)


def order_of(g: CausalGraph, order: RenderOrder | None = None) -> RenderOrder:
    """``order`` checked against ``g``, or the default order (node order, sorted edges)."""
    if order is None:
        return RenderOrder(g.nodes, tuple(sorted(g.directed)), tuple(sorted(g.bidirected)))
    return order.check(g)


class ParseError(GraphError):
    """Malformed graph / node-set / path text."""


def where(text: str, i: int) -> str:
    return f"line {text.count(chr(10), 0, i) + 1} col {i - text.rfind(chr(10), 0, i)}"


def bad_token(tok: str, text: str, i: int, what: str, hint: str = "") -> ParseError:
    shown = repr(tok[:40]) if tok else "end of input"
    return ParseError(f"unexpected token {shown} at {where(text, i)} in {what}{hint}")


EDGE_TYPES = {"->": "->", "directed": "->", "direct": "->", "<-": "<-", "<->": "<->",
              "bidirected": "<->", "bi-directed": "<->", "bidirectional": "<->",
              "confounded": "<->", "confounding": "<->", "latent": "<->", "hidden": "<->"}


def edge_type(t) -> str:
    """An edge-type word or arrow from JSON / GraphML data (None: directed) -> ``->``/``<-``/``<->``."""
    key = "->" if t is None else str(t).strip().lower()
    if key not in EDGE_TYPES:
        raise ParseError(f"unknown edge type {str(t)[:40]!r}")
    return EDGE_TYPES[key]


def quote_name(name: str, bare_ok: bool, pairs: tuple[str, ...] = ('""', "''")) -> str:
    """``name`` as is when ``bare_ok``, else in the first quote pair (open + close) it does not hold."""
    if bare_ok:
        return name
    for q in pairs:
        if q[1] not in name and "\n" not in name:
            return q[0] + name + q[1]
    raise GraphError(f"node name {name[:60]!r} cannot be rendered (a newline or every quote character)")
