"""CLEAR sentence: "Given a DAG with nodes A, B, C and directed edges A->B, B->C."

The header names the class (ADMG/mixed, DAG/acyclic, directed/cyclic); then the node list, then
``directed edges ...`` / ``bi-directed edges ...`` / ``no edges`` sections in arrow text, up to the
first ``.``.  Every edge endpoint must be a listed node.
"""

from __future__ import annotations

import re

from calver.verifier.formats import arrows
from calver.verifier.formats.common import ParseError, RenderOrder, order_of
from calver.verifier.graph import CausalGraph, GraphClass, GraphError

# ``what`` starts and ends on a non-blank, so no run of blanks splits two ways between it and the
# ``\s+`` around it (the old ``\s+[^\n]{0,120}?\s+`` was cubic on "given" + 20k spaces).
_HEAD = re.compile(r"\s*given\s+(?:an?\s+)?(?P<what>\S(?:[^\n]{0,118}?\S)?)\s+with\s+(?:the\s+)?"
                   r"(?:nodes|vertices|variables)\b\s*:?", re.I)
_KEY = re.compile(r"(?: ?, ?| )(?:and )?(?:(?P<no>no )?(?P<t>bi-?directed|directed) edges?\b"
                  r"|(?P<none>no edges?)\b)(?: ?:)?", re.I)
_NAME_KEYS = re.compile(r"(?:\bno\s+|\bbi-?directed\s+|\bdirected\s+)edges?\b", re.I)


def detect(body: str) -> bool:
    return bool(_HEAD.match(body))


def _kind(what: str):
    w = what.lower()
    for kind, marks in ((GraphClass.ADMG, ("admg", "mixed")), (GraphClass.DAG, ("dag", "acyclic")),
                        (GraphClass.DIRECTED, ("direct", "digraph", "cycl"))):
        if any(x in w for x in marks):
            return kind
    return None


def parse(text: str, hint=None):
    head = _HEAD.match(text)
    if not head:
        raise ParseError("CLEAR description must start 'Given a ... with nodes'")
    declared = _kind(head.group("what"))
    rest = re.sub(r"\s+", " ", text[head.end():]).split(".", 1)[0]
    keys = list(_KEY.finditer(rest))
    what = "CLEAR description"
    nodes, d, b, _, bare = arrows.parse_arrows(rest[:keys[0].start()] if keys else rest, what)
    if d or b or not nodes:
        raise ParseError(f"CLEAR node list {rest[:60]!r} must list node names only")
    known = set(nodes)
    for i, k in enumerate(keys):
        body = rest[k.end():keys[i + 1].start() if i + 1 < len(keys) else len(rest)]
        if k.group("no") or k.group("none"):
            if body.strip(" ,"):
                raise ParseError(f"unexpected text {body.strip()[:40]!r} after {k.group().strip()!r} in {what}")
            continue
        _, sd, sb, _, sbare = arrows.parse_arrows(body, what)
        bi = k.group("t").lower() != "directed"
        if sbare or not (sd or sb) or (sd if bi else sb):
            tok = (sbare or [f"{x}->{y}" for x, y in sd] if bi else sbare or [f"{x}<->{y}" for x, y in sb]) or [body]
            raise ParseError(f"unexpected token {tok[0]!r} in the {k.group('t')} edges of {what}")
        for x, y in sd + sb:
            for n in (x, y):
                if n not in known:
                    raise ParseError(f"edge endpoint {n!r} is not a declared node in {what}")
        d += sd
        b += sb
    return nodes, d, b, declared


def _name(n: str) -> str:
    # the reader collapses whitespace, stops at the first '.' and splits at "... edges" keywords
    if "." in n or re.search(r"[^\S ]| {2}", n) or _NAME_KEYS.search(n):
        raise GraphError(f"node name {n[:60]!r} cannot be rendered in CLEAR form ('.', a tab/newline/double "
                         "space, or an 'edges' keyword)")
    return arrows.render_name(n)


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    o = order_of(g, order)
    names = ", ".join(_name(n) for n in o.nodes)
    de = ", ".join(f"{_name(a)}->{_name(c)}" for a, c in o.directed)
    be = ", ".join(f"{_name(a)}<->{_name(c)}" for a, c in o.bidirected)
    if g.kind is GraphClass.ADMG:
        return (f"Given an ADMG (acyclic directed mixed graph) with nodes {names}, "
                f"{'directed edges ' + de if de else 'no directed edges'} and "
                f"{'bi-directed edges ' + be if be else 'no bi-directed edges'}.")
    if g.bidirected:
        raise GraphError("only an ADMG can be rendered with bidirected edges in CLEAR form")
    head = "a DAG (directed acyclic graph)" if g.kind is GraphClass.DAG else "a directed graph"
    return f"Given {head} with nodes {names} and {'directed edges ' + de if de else 'no edges'}."
