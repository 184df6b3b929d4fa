"""What every graph format shares: the error type and its position message, the edge limit, edge-type
words, and quoting a node name for a text format."""

from __future__ import annotations

from calver.verifier.graph import GraphError

MAX_EDGES = 50_000


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
