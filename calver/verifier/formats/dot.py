"""Graphviz DOT.

``dir=both``, an ``arrowtail`` other than none (dir unset), ``<->`` make a bidirected edge;
``dir=back`` reverses; ``dir=none`` or a bare ``--`` is an error; ``style=dashed`` alone does not
change the type; subgraphs are flattened (``A -> {B C}`` gives both edges); comments ignored.  In a
quoted id ``\\"`` and ``\\\\`` are escapes and any other backslash is literal; a quoted id is never a
keyword (``"subgraph"`` names a node).
"""

from __future__ import annotations

import re

from calver.verifier.formats.common import MAX_EDGES, ParseError, RenderOrder, bad_token, order_of, where
from calver.verifier.graph import CausalGraph

_TOK = re.compile(r"""(?P<ws>\s+)|(?P<com>//[^\n]*|\#[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)
 |(?P<str>"(?:[^"\\]|\\.)*")|(?P<op><->|->|--)|(?P<id>[^\W\d]\w*|-?(?:\.\d+|\d+(?:\.\d*)?))
 |(?P<p>[{}\[\];,=:])|(?P<bad>.)""", re.X | re.S)
# Linear on hostile input (no possessive quantifiers before 3.11): a line comment must run to the end
# of its line, so ``####`` has one reading, not 2^n; the optional id owns its trailing blanks.
_HEAD = re.compile(r"(?:\s|//[^\n]*(?![^\n])|\#[^\n]*(?![^\n])|/\*(?:[^*]|\*(?!/))*\*/)*"
                   r"(?:strict\s+)?(?:di)?graph\b\s*(?:(?:\w+|\"[^\"\n]*\")\s*)?\{", re.I)
_ESC = re.compile(r'\\(["\\\n])')


def detect(body: str) -> bool:
    return bool(_HEAD.match(body))


def parse(text: str, hint=None):
    toks = []
    for m in _TOK.finditer(text):
        k, v = m.lastgroup, m.group()
        if k in ("ws", "com"):
            continue
        if k == "bad":
            raise bad_token(v, text, m.start(), "DOT", " (unterminated comment?)" if v == "/" else "")
        # quoted ids: \" and \\ are escapes, backslash-newline continues the line, any other
        # backslash is literal; a quoted id is never a keyword ("subgraph" may name a node)
        quoted = k == "str"
        k, v = ("id", _ESC.sub(lambda e: e[1].strip("\n"), v[1:-1])) if quoted else (k, v)
        toks.append((k, v, m.start(), quoted))
        if len(toks) > 8 * MAX_EDGES:
            raise ParseError("DOT text too long")
    toks.append(("eof", "", len(text), False))
    nodes: list[str] = []
    d: list[tuple[str, str]] = []
    b: list[tuple[str, str]] = []
    pos = [0]

    def at(kind, val=None, off=0):
        t = toks[min(pos[0] + off, len(toks) - 1)]
        return t[0] == kind and (val is None or (not t[3] and t[1].lower() == val))

    def take(kind, val=None):
        t = toks[pos[0]]
        if not at(kind, val):
            raise bad_token(t[1], text, t[2], "DOT", f" (expected {val or kind})")
        pos[0] += 1
        return t[1]

    def attrs():
        out = {}
        while at("p", "["):
            pos[0] += 1
            while not at("p", "]"):
                key = take("id").lower()
                out[key] = take("id").lower() if at("p", "=") and take("p", "=") else "true"
                if at("p", ",") or at("p", ";"):
                    pos[0] += 1
            take("p", "]")
        return out

    def operand(dflt, depth, seen):
        if at("id", "subgraph"):
            pos[0] += 2 if at("id", None, 1) else 1
        if at("p", "{"):
            pos[0] += 1
            members = stmts(dflt, depth + 1)
            take("p", "}")
            seen += members
            return members
        name = take("id")
        while at("p", ":"):  # ports are ignored
            pos[0] += 1
            take("id")
        nodes.append(name)
        seen.append(name)
        return [name]

    def stmts(dflt, depth):
        if depth > 50:
            raise ParseError("DOT subgraphs nested too deeply")
        dflt, seen = dict(dflt), []
        while not at("p", "}") and not at("eof"):
            t = toks[pos[0]]
            if t[0] == "id" and not t[3] and t[1].lower() in ("graph", "node", "edge") and at("p", "[", 1):
                which, a = take("id").lower(), attrs()
                dflt.update(a if which == "edge" else {})
            elif at("id") and at("p", "=", 1):
                pos[0] += 2
                take("id")
            else:
                ops, operands = [], [operand(dflt, depth, seen)]
                while at("op"):
                    ops.append(toks[pos[0]])
                    pos[0] += 1
                    operands.append(operand(dflt, depth, seen))
                a = {**dflt, **attrs()}
                for op, left, right in zip(ops, operands, operands[1:]):
                    if len(left) * len(right) + len(d) + len(b) > MAX_EDGES:
                        raise ParseError("too many edges in DOT graph")
                    for x in left:
                        for y in right:
                            _edge(x, y, op, a, text, d, b)
            if at("p", ";") or at("p", ","):
                pos[0] += 1
        return seen

    if at("id", "strict"):
        pos[0] += 1
    if not (at("id", "digraph") or at("id", "graph")):
        raise bad_token(toks[0][1], text, toks[0][2], "DOT", " (expected digraph)")
    pos[0] += 2 if at("id", None, 1) else 1
    take("p", "{")
    stmts({}, 0)
    take("p", "}")
    take("eof")
    return nodes, d, b, None


def _edge(x, y, op, a, text, d, b):
    dirv = a.get("dir")
    if op[1] == "<->" or dirv == "both" or (dirv is None and a.get("arrowtail", "none") != "none"):
        b.append((x, y))
    elif dirv == "back":
        d.append((y, x))
    elif dirv == "none" or (op[1] == "--" and dirv != "forward"):
        raise ParseError(f"undirected DOT edge {x} -- {y} at {where(text, op[2])}; use dir=both for a bidirected edge")
    else:
        d.append((x, y))


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    o = order_of(g, order)
    q = {n: '"' + n.replace("\\", "\\\\").replace('"', '\\"') + '"' for n in g.nodes}.__getitem__
    lines = ["digraph G {"] + [f"  {q(n)};" for n in o.nodes]
    lines += [f"  {q(a)} -> {q(c)};" for a, c in o.directed]
    lines += [f"  {q(a)} -> {q(c)} [dir=both, style=dashed];" for a, c in o.bidirected]
    return "\n".join(lines + ["}"])
