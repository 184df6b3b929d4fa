"""Parse causal-graph text in many encodings into a typed :class:`CausalGraph`, and render back.

``parse_graph(text, fmt=None, kind=None, nodes=None)``; ``fmt`` is one of ``arrows``, ``json``,
``matrix``, ``graphml``, ``dot``, ``clear``, ``prose`` or None (auto-detect in this order: JSON or a
Python-style literal (text opens with ``{``/``[``/``(``), GraphML (``<?xml``/``<graphml``), DOT
(``[strict] [di]graph [id] {``), CLEAR sentence (``Given a ... with nodes``), adjacency matrix,
arrow text (text holds an arrow), prose (a causal phrase is recognised), else arrow text).
``render_graph(g, fmt)`` writes every :data:`RENDER_FORMATS` encoding, and ``parse_graph`` reads each
back.  Each format's conventions, parser and renderer live together in its module under
:mod:`calver.verifier.formats`; node sets and paths in :mod:`calver.verifier.formats.objects`.

Decisions:
* ``kind``: an explicit ``kind`` wins over what the text declares (CLEAR header, JSON ``kind``,
  GraphML graph data ``kind``, an arrow-text label ``DAG:``); with neither, the class is inferred
  (ADMG if any bidirected edge, else DAG if acyclic, else directed).  Class violations raise the
  :class:`GraphError` of :meth:`CausalGraph.build`.  A graph with no nodes is an error.
* ``nodes``: declared nodes are added (isolated ones included, in that order); any other node in the
  text raises ``GraphError`` -- except in prose, where relations naming unknown nodes are ignored
  as filler and multi-word declared names are recognised.
* Errors are :class:`ParseError` (a :class:`GraphError`) naming the token and its position.
"""

from __future__ import annotations

from typing import Any, Iterable

from calver.verifier.formats import arrows, clear, dot, graphml, json, matrix, prose
from calver.verifier.formats.common import MAX_EDGES, ParseError, RenderOrder, order_of
from calver.verifier.formats.objects import parse_node_list, parse_node_set, parse_node_sets, parse_path
from calver.verifier.graph import CausalGraph, GraphClass, GraphError, bidirected_key
from calver.verifier.memo import memoized, text_cost

__all__ = ["GraphError", "ParseError", "parse_graph", "render_graph", "parse_node_set", "parse_node_sets",
           "parse_node_list", "parse_path", "graph_cache", "reading_order", "FORMATS", "RENDER_FORMATS"]

FORMATS = ("arrows", "json", "matrix", "graphml", "dot", "clear", "prose")
RENDER_FORMATS = ("arrows", "json", "json_parents", "matrix", "graphml", "dot", "prose", "clear")
MAX_TEXT_CHARS = 4_000_000
MAX_NODES = 2000
_CACHE_MAX_CHARS = 65_536

_PARSERS = {"arrows": arrows.parse, "json": json.parse, "matrix": matrix.parse, "graphml": graphml.parse,
            "dot": dot.parse, "clear": clear.parse, "prose": prose.parse}
_READERS = {**_PARSERS, "json_parents": json.parse}
# after JSON, in this order; JSON goes first on an opening bracket
_DETECT = (("graphml", graphml.detect), ("dot", dot.detect), ("clear", clear.detect), ("matrix", matrix.detect),
           ("arrows", arrows.detect))
# the formats that group edges by node, so a reader meets them in an order ``RenderOrder`` cannot set
_REGROUPING = frozenset({"matrix", "json_parents"})
_RENDERERS = {"arrows": arrows.render, "json": json.render, "json_parents": json.render_parents,
              "matrix": matrix.render, "graphml": graphml.render, "dot": dot.render, "prose": prose.render,
              "clear": clear.render}


def _detect(body: str):
    if body[0] in "[{(" and json.detect(body):
        return "json"
    for fmt, test in _DETECT:
        if test(body):
            return fmt
    return None


def _parse(text: str, fmt, kind, nodes) -> CausalGraph:
    if len(text) > MAX_TEXT_CHARS:
        raise ParseError(f"graph text of {len(text)} characters exceeds the {MAX_TEXT_CHARS} limit")
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise ParseError("empty graph text")
    if fmt in (None, "arrows") and len(body) < 1_000_000:
        raw = arrows.parse_fast(body)  # the canonical arrow text of prompts and traces, one regex pass
        if raw is not None:
            return _assemble(*_four(raw), kind, nodes)
    if fmt is None:
        fmt = _detect(body)
        if fmt is None and body[0] in "\"'“":
            try:  # only quoted names and separators: a node list (prose always has a bare word)
                return _assemble(*_four(arrows.parse_arrows(body, max_words=0)), kind, nodes)
            except arrows.ProseLike:
                pass
        if fmt is None:
            try:
                raw = prose.parse(body, nodes)
            except ParseError as e:  # a bare node list, unless it reads like unparsed prose
                try:
                    raw = arrows.parse_arrows(body, max_words=3)[:4]
                except arrows.ProseLike:
                    raise e from None
            return _assemble(*_four(raw), kind, nodes)
    fmt = str(fmt).lower()
    if fmt not in _PARSERS:
        raise ParseError(f"unknown graph format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _assemble(*_four(_PARSERS[fmt](body, nodes)), kind, nodes)


def _four(raw: Any) -> tuple[Any, Any, Any, Any]:
    """A format parser's ``(nodes, directed, bidirected, declared kind)`` (arrow parsers add bare names)."""
    return raw[0], raw[1], raw[2], raw[3]


def _assemble(found, d, b, declared, kind, nodes) -> CausalGraph:
    if nodes is not None:
        allowed = set(nodes)
        stray = next((n for n in [*found, *(x for e in d + b for x in e)] if n not in allowed), None)
        if stray is not None:
            raise ParseError(f"node {stray!r} is not among the declared nodes")
        found = [*nodes, *found]
    distinct = set(found)
    if not distinct:
        raise ParseError("graph has no nodes")
    if len(distinct) > MAX_NODES or len(d) + len(b) > MAX_EDGES:
        raise ParseError(f"graph too large ({len(distinct)} nodes, {len(d) + len(b)} edges)")
    return CausalGraph.build(found, d, b, kind if kind is not None else declared)


# A parsed graph costs ~30 bytes per character of its text (index dicts, masks, frozensets).
graph_cache = memoized("graph", lambda text, *_: text_cost(text, 32, 1024))(_parse)


def parse_graph(text: str | bytes, fmt: str | None = None, kind: GraphClass | str | None = None,
                nodes: Iterable[str] | None = None) -> CausalGraph:
    """Parse ``text`` (see the module docstring) into a validated :class:`CausalGraph`."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ParseError(f"graph bytes are not UTF-8 (byte {e.start})") from None
    if not isinstance(text, str):
        raise ParseError(f"graph text must be str, got {type(text).__name__}")
    kind = GraphClass.parse(kind) if kind is not None else None
    if nodes is not None:
        nodes = tuple(nodes)
        if not all(isinstance(n, str) and n for n in nodes):
            raise ParseError("declared nodes must be non-empty strings")
    if len(text) <= _CACHE_MAX_CHARS:
        return graph_cache(text, fmt, kind, nodes)
    return _parse(text, fmt, kind, nodes)


def render_graph(g: CausalGraph, fmt: str = "arrows", order: RenderOrder | None = None) -> str:
    """Render ``g`` in one of :data:`RENDER_FORMATS`; ``parse_graph`` reads every one back. ``order``: list the
    nodes and edges in that order (:class:`~calver.verifier.formats.common.RenderOrder`; default: the graph's
    node order and sorted edges)."""
    fmt = fmt.lower()
    render = _RENDERERS.get(fmt)
    if render is None:
        raise GraphError(f"unknown render format {fmt!r}; expected one of {', '.join(RENDER_FORMATS)}")
    return render(g, order)


def reading_order(g: CausalGraph, fmt: str = "arrows", order: RenderOrder | None = None) -> RenderOrder:
    """The order in which a reader of ``render_graph(g, fmt, order)`` meets ``g``'s nodes and edges, each at its
    first mention: ``order`` itself for the list formats, but row by row for a matrix and node by node for a
    parents map (whose edge order ``order`` cannot set). A trace that copies the graph in this order copies
    it as it reads it, instead of in an order the prompt does not show."""
    o = order_of(g, order)
    fmt = fmt.lower()
    if fmt not in _READERS:
        raise GraphError(f"unknown render format {fmt!r}; expected one of {', '.join(RENDER_FORMATS)}")
    if fmt not in _REGROUPING:
        return o
    _, directed, bidirected, _ = _READERS[fmt](render_graph(g, fmt, o), list(o.nodes))
    bi = (bidirected_key(a, b) for a, b in bidirected)  # a parents map names each spouse pair twice
    return RenderOrder(o.nodes, tuple(dict.fromkeys(directed)), tuple(dict.fromkeys(bi))).check(g)
