"""Lexers and parsers behind :mod:`calver.verifier.parsers` (arrow text, matrix, GraphML, DOT; prose: ``graph_prose``).

Split out of ``parsers`` to keep each module small; import the public API from ``parsers``. The
format conventions are documented in the ``parsers`` module docstring.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from calver.verifier.graph import GraphClass, GraphError

MAX_EDGES = 50_000


class ParseError(GraphError):
    """Malformed graph / node-set / path text."""


def _where(text: str, i: int) -> str:
    return f"line {text.count(chr(10), 0, i) + 1} col {i - text.rfind(chr(10), 0, i)}"


def _bad(tok: str, text: str, i: int, what: str, hint: str = "") -> ParseError:
    shown = repr(tok[:40]) if tok else "end of input"
    return ParseError(f"unexpected token {shown} at {_where(text, i)} in {what}{hint}")


_ARROWS = {"->": "->", "-->": "->", "→": "->", "⟶": "->", "=>": "->", "⇒": "->", "—>": "->",
           "–>": "->", "<-": "<-", "<--": "<-", "←": "<-", "⟵": "<-", "<=": "<-", "⇐": "<-",
           "<->": "<->", "<-->": "<->", "↔": "<->", "⟷": "<->", "<=>": "<->", "⇔": "<->"}
_EDGE_TYPES = {"->": "->", "directed": "->", "direct": "->", "<-": "<-", "<->": "<->",
               "bidirected": "<->", "bi-directed": "<->", "bidirectional": "<->",
               "confounded": "<->", "confounding": "<->", "latent": "<->", "hidden": "<->"}
_ARROW_TOK = re.compile(r"""(?P<ws>[^\S\n]+)|(?P<sep>[,;.\n\[\](){}][\s,;.\[\](){}]*)
 |(?P<q>"[^"\n]*"|'[^'\n]*'|“[^”\n]*”)|(?P<w>\w+(?:-\w+)*)
 |(?P<arrow>[-<>=\u2010-\u2015\u2190-\u21ff\u27f5-\u27ff]+)|(?P<colon>:)|(?P<bad>.)""", re.X | re.S)
_BARE = re.compile(r"\w+(?:-\w+)*(?: \w+(?:-\w+)*)*")


def _arrow_lex(text: str, what: str) -> list[list]:
    """Items (lists of [kind, value, pos, joinable, raw]) of arrow text; separators split items."""
    items, cur, arrows = [], [], 0
    for m in _ARROW_TOK.finditer(text):
        k, v, p = m.lastgroup, m.group(), m.start()
        if k == "ws":
            continue
        if k == "arrow" and (arrows := arrows + 1) > MAX_EDGES:
            raise ParseError(f"more than {MAX_EDGES} edges in {what}")
        if k == "sep" or (k == "w" and v.lower() == "and"):
            if cur:
                items.append(cur)
                cur = []
        elif k == "w":
            if cur and cur[-1][0] == "name" and cur[-1][3]:
                cur[-1][1] += " " + v
            else:
                cur.append(["name", v, p, True, v])
        elif k == "bad" or (k == "arrow" and v not in _ARROWS) or v in ('""', "''", "“”"):
            raise _bad(v, text, p, what)
        else:
            cur.append(["name" if k == "q" else k, v[1:-1] if k == "q" else _ARROWS.get(v, v), p, False, v])
    if cur:
        items.append(cur)
    return items


def _parse_arrows(text: str, hint=None, what: str = "arrow text"):
    """-> (nodes, directed, bidirected, declared kind, bare names)."""
    nodes, d, b, bare, declared = [], [], [], [], None
    for item in _arrow_lex(text, what):
        if len(item) >= 2 and item[0][0] == "name" and item[1][0] == "colon":
            try:
                declared = GraphClass.parse(item[0][1])
            except GraphError:
                pass
            item = item[2:]
        if not item:
            continue
        for j, t in enumerate(item):
            if t[0] != ("name", "arrow")[j % 2]:
                raise _bad(t[4], text, t[2], what, f" (expected {('a node name', 'an arrow')[j % 2]})")
        if item[-1][0] == "arrow":
            raise _bad(item[-1][4], text, item[-1][2], what, " (arrow without a head node)")
        names = [t[1] for t in item[0::2]]
        nodes.extend(names)
        if len(names) == 1:
            bare.append(names[0])
        for a, arrow, c in zip(names, item[1::2], names[1:]):
            (b if arrow[1] == "<->" else d).append((c, a) if arrow[1] == "<-" else (a, c))
    return nodes, d, b, declared, bare


def _jtype(t) -> str:
    key = "->" if t is None else str(t).strip().lower()
    if key not in _EDGE_TYPES:
        raise ParseError(f"unknown edge type {str(t)[:40]!r}")
    return _EDGE_TYPES[key]


# ---- adjacency matrix -----------------------------------------------------------------------
_CELL_TOK = re.compile(r"""(?P<q>"[^"\n]*"|'[^'\n]*')|(?P<c>[^\s,;|"']+)|(?P<s>[\s,;|]+)|(?P<bad>.)""")
_NUM = re.compile(r"[0-3](?:\.0*)?")


def _matrix_edges(names, rows, out, what, lines=None):
    n = len(names)
    cells = [[int(float(c)) if _NUM.fullmatch(c) else None for c in r] for r in rows]
    for i in range(n):
        for j in range(n):
            v = cells[i][j]
            if v is None:
                where = f"line {lines[i]}" if lines else f"row {i + 1}"
                raise ParseError(f"unexpected token {rows[i][j][:20]!r} at {where} cell {j + 1} in {what} (entries are 0-3)")
            if v & 1:
                out[1].append((names[i], names[j]))
            if (v & 2) != ((cells[j][i] or 0) & 2):
                raise ParseError(f"bidirected entry at row {i + 1} col {j + 1} of {what} is not mirrored")
            if v & 2 and i <= j:
                out[2].append((names[i], names[j]))


def _matrix_rows(text: str):
    rows, off = [], 0
    for ln, line in enumerate(text.split("\n"), 1):
        cells = []
        for m in _CELL_TOK.finditer(line):
            if m.lastgroup == "bad":
                raise _bad(m.group(), text, off + m.start(), "adjacency matrix")
            if m.lastgroup != "s":
                cells.append((m.group()[1:-1] if m.lastgroup == "q" else m.group(), m.lastgroup == "q"))
        if cells:
            rows.append((ln, cells))
        off += len(line) + 1
    return rows


def _isnum(cell) -> bool:
    return not cell[1] and bool(_NUM.fullmatch(cell[0]))


def _looks_like_matrix(text: str) -> bool:
    try:
        rows = _matrix_rows("\n".join(ln[:4096] for ln in text.split("\n", 3)[:3]))
    except ParseError:
        return False
    last = rows[-1][1] if rows else [("x", False)]
    if len(rows) < 2:
        return all(map(_isnum, last))
    return all(map(_isnum, last[1:])) and (len(last) > 1 or _isnum(last[0]))


def _parse_matrix(text: str, hint=None):
    rows = _matrix_rows(text)
    if not rows:
        raise ParseError("empty adjacency matrix")
    if all(_isnum(c) for c in rows[0][1]):
        body, names = rows, list(hint or [])
        if len(names) != len(body):
            raise ParseError("an adjacency matrix without a header row needs the node names (nodes=...)")
    else:
        body, names = rows[1:], [c[0] for c in rows[0][1]]
        if len(names) == len(body) + 1:
            names = names[1:]
    n = len(body)
    if len(names) != n or len(set(names)) != n or n == 0:
        raise ParseError(f"adjacency matrix has {n} rows but its header names {len(names)} distinct nodes")
    grid: list = [None] * n
    lines: list = [0] * n
    for i, (ln, cells) in enumerate(body):
        if len(cells) == n + 1 and not _isnum(cells[0]):
            if cells[0][0] not in names:
                raise ParseError(f"unexpected token {cells[0][0]!r} at line {ln} in adjacency matrix (unknown row name)")
            r = names.index(cells[0][0])
            cells = cells[1:]
        elif len(cells) == n:
            r = i
        else:
            raise ParseError(f"adjacency matrix row at line {ln} has {len(cells)} cells, expected {n}")
        if grid[r] is not None:
            raise ParseError(f"duplicate row for {names[r]!r} at line {ln} in adjacency matrix")
        grid[r], lines[r] = [c[0] if not c[1] else "?" + c[0] for c in cells], ln
    out: tuple[list, list, list] = (list(names), [], [])
    _matrix_edges(names, grid, out, "adjacency matrix", lines)
    return out[0], out[1], out[2], None


# ---- GraphML --------------------------------------------------------------------------------
def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _parse_graphml(text: str, hint=None):
    if re.search(r"<!\s*(?:DOCTYPE|ENTITY)", text, re.I):
        raise ParseError("GraphML with DOCTYPE/ENTITY declarations is rejected")
    try:
        root = ET.fromstring(text)
    except Exception as e:  # noqa: BLE001 - ET.ParseError names line and column; any failure is a parse error
        raise ParseError(f"invalid GraphML: {e}") from None
    keys = {el.get("id"): (el.get("attr.name") or el.get("id") or "") for el in root.iter() if _local(el.tag) == "key"}
    graph = next((el for el in root.iter() if _local(el.tag) == "graph"), None)
    if graph is None:
        raise ParseError("GraphML has no <graph> element")
    default_directed = graph.get("edgedefault", "directed") != "undirected"
    declared, nodes, d, b = None, [], [], []

    def dtype(el, names):
        for data in el:
            if _local(data.tag) == "data" and keys.get(data.get("key"), data.get("key") or "").lower() in names:
                return (data.text or "").strip()
        return None

    k = dtype(graph, ("kind", "class", "graph_type"))
    if k:
        declared = GraphClass.parse(k)
    for el in graph.iter():
        tag = _local(el.tag)
        if tag == "node":
            if not el.get("id"):
                raise ParseError("GraphML <node> without an id")
            nodes.append(el.get("id"))
        elif tag == "hyperedge":
            raise ParseError("GraphML hyperedges are not supported")
        elif tag == "edge":
            s, t = el.get("source"), el.get("target")
            if not s or not t:
                raise ParseError("GraphML <edge> needs source and target")
            typ = dtype(el, ("type", "edge_type", "kind", "edgetype"))
            typ = _jtype(typ) if typ else None
            directed = el.get("directed", "true" if default_directed else "false").lower() == "true"
            if typ == "<->":
                b.append((s, t))
            elif not directed:
                raise ParseError(f"undirected GraphML edge {s} -- {t} has no bidirected type")
            else:
                d.append((t, s) if typ == "<-" else (s, t))
            nodes += [s, t]
    return nodes, d, b, declared


# ---- Graphviz DOT ---------------------------------------------------------------------------
_DOT_TOK = re.compile(r"""(?P<ws>\s+)|(?P<com>//[^\n]*|\#[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)
 |(?P<str>"(?:[^"\\]|\\.)*")|(?P<op><->|->|--)|(?P<id>[^\W\d]\w*|-?(?:\.\d+|\d+(?:\.\d*)?))
 |(?P<p>[{}\[\];,=:])|(?P<bad>.)""", re.X | re.S)
# Linear on hostile input (no possessive quantifiers before 3.11): a line comment must run to the end
# of its line, so ``####`` has one reading, not 2^n; the optional id owns its trailing blanks.
_DOT_HEAD = re.compile(r"(?:\s|//[^\n]*(?![^\n])|\#[^\n]*(?![^\n])|/\*(?:[^*]|\*(?!/))*\*/)*"
                       r"(?:strict\s+)?(?:di)?graph\b\s*(?:(?:\w+|\"[^\"\n]*\")\s*)?\{", re.I)
_DOT_ESC = re.compile(r'\\(["\\\n])')


def _parse_dot(text: str, hint=None):
    toks = []
    for m in _DOT_TOK.finditer(text):
        k, v = m.lastgroup, m.group()
        if k in ("ws", "com"):
            continue
        if k == "bad":
            raise _bad(v, text, m.start(), "DOT", " (unterminated comment?)" if v == "/" else "")
        # quoted ids: \" and \\ are escapes, backslash-newline continues the line, any other
        # backslash is literal; a quoted id is never a keyword ("subgraph" may name a node)
        quoted = k == "str"
        k, v = ("id", _DOT_ESC.sub(lambda e: e[1].strip("\n"), v[1:-1])) if quoted else (k, v)
        toks.append((k, v, m.start(), quoted))
        if len(toks) > 8 * MAX_EDGES:
            raise ParseError("DOT text too long")
    toks.append(("eof", "", len(text), False))
    nodes, d, b = [], [], []
    pos = [0]

    def at(kind, val=None, off=0):
        t = toks[min(pos[0] + off, len(toks) - 1)]
        return t[0] == kind and (val is None or (not t[3] and t[1].lower() == val))

    def take(kind, val=None):
        t = toks[pos[0]]
        if not at(kind, val):
            raise _bad(t[1], text, t[2], "DOT", f" (expected {val or kind})")
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
                            _dot_edge(x, y, op, a, text, d, b)
            if at("p", ";") or at("p", ","):
                pos[0] += 1
        return seen

    if at("id", "strict"):
        pos[0] += 1
    if not (at("id", "digraph") or at("id", "graph")):
        raise _bad(toks[0][1], text, toks[0][2], "DOT", " (expected digraph)")
    pos[0] += 2 if at("id", None, 1) else 1
    take("p", "{")
    stmts({}, 0)
    take("p", "}")
    take("eof")
    return nodes, d, b, None


def _dot_edge(x, y, op, a, text, d, b):
    dirv = a.get("dir")
    if op[1] == "<->" or dirv == "both" or (dirv is None and a.get("arrowtail", "none") != "none"):
        b.append((x, y))
    elif dirv == "back":
        d.append((y, x))
    elif dirv == "none" or (op[1] == "--" and dirv != "forward"):
        raise ParseError(f"undirected DOT edge {x} -- {y} at {_where(text, op[2])}; use dir=both for a bidirected edge")
    else:
        d.append((x, y))
