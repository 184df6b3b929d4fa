"""Parse causal-graph text in many encodings into a typed :class:`CausalGraph`, and render back.

``parse_graph(text, fmt=None, kind=None, nodes=None)``; ``fmt`` is one of ``arrows``, ``json``,
``matrix``, ``graphml``, ``dot``, ``clear``, ``prose`` or None (auto-detect in this order: JSON or a
Python-style literal (text opens with ``{``/``[``/``(``), GraphML (``<?xml``/``<graphml``), DOT
(``[strict] [di]graph [id] {``), CLEAR sentence (``Given a ... with nodes``), adjacency matrix,
arrow text (text holds an arrow), prose (a causal phrase is recognised), else arrow text).

Decisions:
* ``kind``: an explicit ``kind`` wins over what the text declares (CLEAR header, JSON ``kind``,
  GraphML graph data ``kind``, an arrow-text label ``DAG:``); with neither, the class is inferred
  (ADMG if any bidirected edge, else DAG if acyclic, else directed).  Class violations raise the
  :class:`GraphError` of :meth:`CausalGraph.build`.  A graph with no nodes is an error.
* ``nodes``: declared nodes are added (isolated ones included, in that order); any other node in the
  text raises ``GraphError`` -- except in prose, where relations naming unknown nodes are ignored
  as filler and multi-word declared names are recognised.
* Arrow text: ``->``/``-->``/``→``/``=>`` directed, ``<-``/``<--``/``←``/``<=`` reversed,
  ``<->``/``<-->``/``↔``/``<=>`` bidirected; chains allowed; items separated by ``,`` ``;`` ``.``
  newlines, brackets or the word ``and``; a leading ``label:`` is dropped (``DAG:``/``ADMG:`` also
  declare the class).  Names are ``\\w`` words (hyphens inside allowed); consecutive unquoted words
  form one multi-word name; quoted names (``"..."``/``'...'``) may hold anything but newlines.
  A bare name is an isolated node.  ``and`` as a name must be quoted.
* JSON: an edge list (pairs, ``[a, b, type]`` triples, ``"A->B"`` strings, ``{source,target,type}``
  dicts), an object with ``nodes``/``edges``/``bidirected``/``kind`` (or ``links``, or ``matrix``
  with ``nodes``), or a parents map ``{"B": ["A"]}`` / ``{"B": {"parents": [..], "spouses": [..]}}``.
  Python-style literals with quotes, tuples and sets are translated to JSON by a tokenizer (never
  eval).
* Matrix: optional header row of names (an extra leading corner cell is dropped), rows optionally
  led by their name; cells separated by spaces/tabs/commas/semicolons/pipes.  Each entry is a bit
  field: 1 = row -> column, 2 = row <-> column (must be mirrored), 3 = both.  Mutual 1s are two
  directed edges (a cycle).  Without a header the ``nodes`` argument names the rows.
* GraphML: DOCTYPE/ENTITY declarations are rejected; an edge is bidirected if a data key named
  ``type``/``edge_type``/``kind`` says so (``bidirected``, ``<->``, ``confounded`` ...); an
  undirected edge without such data is an error.
* DOT: ``dir=both``, an ``arrowtail`` other than none (dir unset), ``<->`` make a bidirected edge;
  ``dir=back`` reverses; ``dir=none`` or a bare ``--`` is an error; ``style=dashed`` alone does not
  change the type; subgraphs are flattened (``A -> {B C}`` gives both edges); comments ignored.
* Prose: sentence-level phrases (causes/affects/leads to/is caused by/share a hidden common cause/
  are confounded/there is an edge from A to B/the variables are ...); unrecognised sentences are
  ignored; nothing recognised at all is an error.  A lone capital letter (``A``, ``I``) is a name.
* Errors are :class:`ParseError` (a :class:`GraphError`) naming the token and its position.
"""

from __future__ import annotations

import functools
import json
import re
import xml.etree.ElementTree as ET
from itertools import combinations
from typing import Iterable, Sequence
from xml.sax.saxutils import escape, quoteattr

from calver.verifier.graph import CausalGraph, GraphClass, GraphError

__all__ = ["ParseError", "parse_graph", "render_graph", "parse_node_set", "parse_node_sets",
           "parse_node_list", "parse_path", "graph_cache", "FORMATS", "RENDER_FORMATS"]

FORMATS = ("arrows", "json", "matrix", "graphml", "dot", "clear", "prose")
RENDER_FORMATS = ("arrows", "json", "json_parents", "matrix", "graphml", "dot", "prose", "clear")
MAX_TEXT_CHARS = 4_000_000
MAX_NODES = 2000
MAX_EDGES = 50_000
_CACHE_MAX_CHARS = 65_536


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
_ARROW_TOK = re.compile(r"""(?P<ws>[^\S\n]+)|(?P<sep>[,;.\n\[\](){}])
 |(?P<q>"[^"\n]*"|'[^'\n]*'|“[^”\n]*”)|(?P<w>\w+(?:-\w+)*)
 |(?P<arrow>[-<>=\u2010-\u2015\u2190-\u21ff\u27f5-\u27ff]+)|(?P<colon>:)|(?P<bad>.)""", re.X | re.S)
_BARE = re.compile(r"\w+(?:-\w+)*(?: \w+(?:-\w+)*)*")


def _arrow_lex(text: str, what: str) -> list[list]:
    """Items (lists of [kind, value, pos, joinable, raw]) of arrow text; separators split items."""
    items: list[list] = []
    cur: list[list] = []
    for m in _ARROW_TOK.finditer(text):
        k, v, p = m.lastgroup, m.group(), m.start()
        if k == "ws":
            continue
        if k == "sep" or (k == "w" and v.lower() == "and"):
            if cur:
                items.append(cur)
                cur = []
        elif k == "w":
            if cur and cur[-1][0] == "name" and cur[-1][3]:
                cur[-1][1] += " " + v
            else:
                cur.append(["name", v, p, True, v])
        elif k == "q":
            if len(v) == 2:
                raise _bad(v, text, p, what, " (empty name)")
            cur.append(["name", v[1:-1], p, False, v])
        elif k == "arrow":
            if v not in _ARROWS:
                raise _bad(v, text, p, what)
            cur.append(["arrow", _ARROWS[v], p, False, v])
        elif k == "colon":
            cur.append(["colon", v, p, False, v])
        else:
            raise _bad(v, text, p, what)
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
            want = "name" if j % 2 == 0 else "arrow"
            if t[0] != want:
                raise _bad(t[4], text, t[2], what, f" (expected {'a node name' if want == 'name' else 'an arrow'})")
        if item[-1][0] == "arrow":
            raise _bad(item[-1][4], text, item[-1][2], what, " (arrow without a head node)")
        names = [t[1] for t in item[0::2]]
        nodes.extend(names)
        if len(names) == 1:
            bare.append(names[0])
        for a, arrow, c in zip(names, item[1::2], names[1:]):
            if arrow[1] == "->":
                d.append((a, c))
            elif arrow[1] == "<-":
                d.append((c, a))
            else:
                b.append((a, c))
    return nodes, d, b, declared, bare


# ---- CLEAR sentence -------------------------------------------------------------------------
_CLEAR_HEAD = re.compile(r"\s*given\s+(?:an?\s+)?(?P<what>[^\n]{0,120}?)\s+with\s+(?:the\s+)?"
                         r"(?:nodes|vertices|variables)\b\s*:?", re.I)
_CLEAR_KEY = re.compile(r"(?: ?, ?| )(?:and )?(?:(?P<no>no )?(?P<t>bi-?directed|directed) edges?\b"
                        r"|(?P<none>no edges?)\b)(?: ?:)?", re.I)


def _clear_kind(what: str):
    w = what.lower()
    if "admg" in w or "mixed" in w:
        return GraphClass.ADMG
    if "dag" in w or "acyclic" in w:
        return GraphClass.DAG
    if "direct" in w or "digraph" in w or "cycl" in w:
        return GraphClass.DIRECTED
    return None


def _parse_clear(text: str, hint=None):
    head = _CLEAR_HEAD.match(text)
    if not head:
        raise ParseError("CLEAR description must start 'Given a ... with nodes'")
    declared = _clear_kind(head.group("what"))
    rest = re.sub(r"\s+", " ", text[head.end():]).split(".", 1)[0]
    keys = list(_CLEAR_KEY.finditer(rest))
    what = "CLEAR description"
    nodes, d, b, _, bare = _parse_arrows(rest[:keys[0].start()] if keys else rest, None, what)
    if d or b or not nodes:
        raise ParseError(f"CLEAR node list {rest[:60]!r} must list node names only")
    known = set(nodes)
    for i, k in enumerate(keys):
        body = rest[k.end():keys[i + 1].start() if i + 1 < len(keys) else len(rest)]
        if k.group("no") or k.group("none"):
            if body.strip(" ,"):
                raise ParseError(f"unexpected text {body.strip()[:40]!r} after {k.group().strip()!r} in {what}")
            continue
        _, sd, sb, _, sbare = _parse_arrows(body, None, what)
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


# ---- JSON / Python-style literals -----------------------------------------------------------
_PY_TOK = re.compile(r"""(?P<ws>\s+)|(?P<s>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(?P<p>[\[\](){},:])
 |(?P<n>-?\d+(?:\.\d+)?)|(?P<k>None|True|False|null|true|false|set\(\)|frozenset\(\))|(?P<bad>.)""", re.X | re.S)


def _pyish_to_json(text: str) -> str | None:
    """Translate a Python literal of strings/numbers/lists/tuples/sets/dicts to JSON, else None."""
    out: list[str] = []
    stack: list[list] = []  # [open index, is_dict, closer]
    for m in _PY_TOK.finditer(text):
        k, v = m.lastgroup, m.group()
        if k == "bad":
            return None
        if k == "s":
            if v[0] == "'":
                v = json.dumps(v[1:-1].replace("\\'", "'").replace('\\\\', '\\'))
            out.append(v)
        elif k == "k":
            out.append({"None": "null", "True": "true", "False": "false"}.get(v, "[]" if "set" in v else v))
        elif k == "p":
            if v in "[({":
                stack.append([len(out), False, {"[": "]", "(": ")", "{": "}"}[v]])
                out.append("[" if v != "{" else "{")
            elif v in "])}":
                if not stack or stack[-1][2] != v:
                    return None
                start, is_dict, _ = stack.pop()
                if out[start] == "{" and not is_dict:
                    out[start] = "["
                    v = "]"
                out.append("]" if v == ")" else v)
            else:
                if v == ":" and stack:
                    stack[-1][1] = True
                out.append(v)
        elif k == "n":
            out.append(v)
    return "".join(out) if not stack else None


def _load_json(text: str, strict: bool):
    try:
        return json.loads(text)
    except RecursionError:
        raise ParseError("JSON nested too deeply") from None
    except ValueError as e:
        conv = _pyish_to_json(text) if len(text) < 1_000_000 else None
        if conv is not None:
            try:
                return json.loads(conv)
            except (ValueError, RecursionError):
                pass
        if not strict:
            return None
        pos = getattr(e, "pos", 0)
        raise _bad(text[pos:pos + 12], text, pos, "JSON", f": {getattr(e, 'msg', e)}") from None


def _jname(x) -> str:
    if isinstance(x, dict):
        x = x.get("id", x.get("name"))
    if isinstance(x, bool) or not isinstance(x, (str, int)) or x == "":
        raise ParseError(f"JSON node name must be a non-empty string, got {str(x)[:40]!r}")
    return str(x)


def _jtype(t) -> str:
    if t is None:
        return "->"
    key = str(t).strip().lower()
    if key not in _EDGE_TYPES:
        raise ParseError(f"unknown JSON edge type {str(t)[:40]!r}")
    return _EDGE_TYPES[key]


def _jedges(items, default: str, out):
    nodes, d, b = out
    if isinstance(items, dict):  # children map {"A": ["B"]}
        items = [[k, c] for k, cs in items.items() for c in (cs if isinstance(cs, list) else [cs])]
    if not isinstance(items, list):
        raise ParseError(f"JSON edges must be a list, got {type(items).__name__}")
    for e in items:
        if isinstance(e, str):
            n, ed, eb, _, _ = _parse_arrows(e, None, "JSON edge string")
            if default == "<->" and ed:
                raise ParseError(f"directed edge {e!r} listed among bidirected edges")
            nodes += n
            d += ed
            b += eb
            continue
        if isinstance(e, dict):
            src = next((e[k] for k in ("source", "from", "tail", "u") if k in e), None)
            tgt = next((e[k] for k in ("target", "to", "head", "v") if k in e), None)
            typ = next((e[k] for k in ("type", "edge_type", "kind") if k in e), None)
            if src is None or tgt is None:
                raise ParseError(f"JSON edge object needs source and target: {str(e)[:60]}")
            e = [src, tgt] + ([typ] if typ is not None else [])
        if not isinstance(e, list) or len(e) not in (2, 3):
            raise ParseError(f"JSON edge must be a pair, triple, string or object: {str(e)[:60]}")
        x, y = _jname(e[0]), _jname(e[1])
        t = _jtype(e[2]) if len(e) == 3 else default
        nodes += [x, y]
        (b if t == "<->" else d).append((y, x) if t == "<-" else (x, y))


_STRUCT_KEYS = {"nodes", "edges", "directed", "directed_edges", "bidirected", "bidirected_edges",
                "bi-directed", "bi_directed", "links", "arcs", "matrix", "adjacency", "kind",
                "graph_type", "class"}


def _from_obj(data, hint=None):
    out: tuple[list, list, list] = ([], [], [])
    declared = None
    if isinstance(data, list):
        _jedges(data, "->", out)
    elif isinstance(data, dict) and _STRUCT_KEYS & {str(k).lower() for k in data}:
        low = {str(k).lower(): v for k, v in data.items()}
        for key in ("kind", "graph_type", "class", "type"):
            if isinstance(low.get(key), str):
                declared = GraphClass.parse(low[key])
                break
        ns = low.get("nodes", [])
        if not isinstance(ns, list):
            raise ParseError("JSON 'nodes' must be a list")
        out[0].extend(_jname(n) for n in ns)
        for key in ("edges", "directed", "directed_edges", "links", "arcs"):
            if key in low:
                _jedges(low[key], "->", out)
        for key in ("bidirected", "bidirected_edges", "bi-directed", "bi_directed"):
            if key in low:
                _jedges(low[key], "<->", out)
        mat = low.get("matrix", low.get("adjacency"))
        if mat is not None:
            names = out[0][:len(ns)]
            if not isinstance(mat, list) or len(mat) != len(names) or any(
                    not isinstance(r, list) or len(r) != len(names) for r in mat):
                raise ParseError("JSON matrix must be a square list of lists matching 'nodes'")
            _matrix_edges(names, [[str(c) for c in r] for r in mat], out, "JSON matrix")
    elif isinstance(data, dict):
        for node, val in data.items():
            node = _jname(node)
            out[0].append(node)
            spouses, children = [], []
            if isinstance(val, dict):
                parents = val.get("parents", [])
                spouses = val.get("spouses", val.get("bidirected", val.get("siblings", [])))
                children = val.get("children", [])
            else:
                parents = val
            for group, typ in ((parents, "p"), (spouses, "s"), (children, "c")):
                group = [] if group is None else [group] if isinstance(group, (str, int)) else group
                if not isinstance(group, list):
                    raise ParseError(f"parents of {node!r} must be a list of names")
                for other in map(_jname, group):
                    out[0].append(other)
                    if typ == "s":
                        out[2].append((node, other))
                    else:
                        out[1].append((other, node) if typ == "p" else (node, other))
    else:
        raise ParseError(f"a JSON graph must be a list or an object, got {type(data).__name__}")
    return out[0], out[1], out[2], declared


def _parse_json(text: str, hint=None):
    return _from_obj(_load_json(text, True), hint)


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
                cells.append((m.group().strip("\"'") if m.lastgroup == "q" else m.group(), m.lastgroup == "q"))
        if cells:
            rows.append((ln, cells))
        off += len(line) + 1
    return rows


def _isnum(cell) -> bool:
    return not cell[1] and bool(_NUM.fullmatch(cell[0]))


def _looks_like_matrix(text: str) -> bool:
    try:
        rows = _matrix_rows("\n".join(text.split("\n", 3)[:3]))
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
    except ET.ParseError as e:
        line, col = e.position
        raise ParseError(f"invalid GraphML at line {line} col {col + 1}: {e}") from None
    except Exception as e:  # noqa: BLE001 - any XML failure is a parse error
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
_DOT_HEAD = re.compile(r"(?:\s|//[^\n]*|\#[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*(?:strict\s+)?(?:di)?graph\b\s*(?:\w+|\"[^\"\n]*\")?\s*\{", re.I)


def _parse_dot(text: str, hint=None):
    toks = []
    for m in _DOT_TOK.finditer(text):
        k, v = m.lastgroup, m.group()
        if k in ("ws", "com"):
            continue
        if k == "bad":
            raise _bad(v, text, m.start(), "DOT", " (unterminated comment?)" if v == "/" else "")
        if k == "str":
            v = v[1:-1].replace('\\"', '"').replace("\\\n", "")
            k = "id"
        toks.append((k, v, m.start()))
    toks.append(("eof", "", len(text)))
    nodes, d, b = [], [], []
    pos = [0]

    def at(kind, val=None, off=0):
        t = toks[min(pos[0] + off, len(toks) - 1)]
        return t[0] == kind and (val is None or t[1].lower() == val)

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
            pos[0] += 1
            if at("id"):
                pos[0] += 1
        if at("p", "{"):
            pos[0] += 1
            members = stmts(dflt, depth + 1)
            take("p", "}")
            seen += members
            return members
        name = take("id")
        if at("p", ":"):
            pos[0] += 1
            take("id")
            if at("p", ":"):
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
            if at("id") and toks[pos[0]][1].lower() in ("graph", "node", "edge") and at("p", "[", 1):
                which = take("id").lower()
                a = attrs()
                if which == "edge":
                    dflt.update(a)
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
    pos[0] += 1
    if at("id"):
        pos[0] += 1
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


# ---- prose ----------------------------------------------------------------------------------
_STOP = frozenset("""a an the it its this that these those which who whom what there they them he she we
you i not never no cannot can't doesn't don't didn't won't does do did may might could would should will
can must also directly indirectly only still longer often both either neither each every all some any is
are was were be been being has have had of to from by in on at for with as or and but if then than so
node nodes variable variables vertex vertices common hidden latent edge edges graph model""".split())
_FILLER = frozenset("the a an node nodes variable variables vertex both".split())
_ADJ = r"(?:hidden|latent|unobserved|unmeasured|unobservable|common|shared)"
_PHRASES = re.compile(r"(?<![^ ])(?:" + "|".join(f"(?P<{name}>{pat})" for name, pat in (
    ("decl", r"(?:variables|nodes|vertices)(?: (?:in|of) (?:the|this) (?:graph|model|system|dag|admg))?"
             r"(?: (?:are|include|includes))?(?: :)?"),
    ("frm", r"(?:an? |the )?(?:directed )?(?:edge|arrow|arc|link) (?:going )?from"),
    ("btw", r"an? (?:(?:bi-?directed|bidirectional) (?:edge|arrow|arc|link)|(?:common )?confounder"
            r"|(?:(?:hidden|latent|unobserved|unmeasured|unobservable) )+(?:common )?(?:causes?|confounders?|variables?|parents?|confounding))"
            r" (?:between|of|affecting|influencing|for|behind)|(?:hidden |latent |unobserved )?confounding (?:between|of)"),
    ("biw", r"(?:is|are) (?:hidden |latently )?confounded with|(?:share|shares|has|have) an? (?:" + _ADJ + r" ){0,3}"
            r"(?:causes?|confounders?|parents?) with|(?:has|have) an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link) (?:to|with)"),
    ("bi", r"(?:share|shares|have|has) an? (?:" + _ADJ + r" ){0,3}(?:causes?|confounders?|parents?|confounding)"
           r"|(?:are|is) (?:(?:hidden |latently )?confounded|(?:connected|linked|joined) by an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link))"
           r"|(?:have|has) an? (?:bi-?directed|bidirectional) (?:edge|arrow|arc|link)(?: between them)?"),
    ("rev", r"(?:is|are) (?:directly |causally )?(?:caused|affected|influenced|determined|driven|produced|impacted) by"
            r"|(?:is|are) (?:a |an |the )?(?:direct )?(?:child|children|effects?|consequences?|results?|outcomes?) of"
            r"|depends? (?:directly |causally )?on|(?:has|have) (?:the )?(?:direct )?(?:parents?|causes?)"),
    ("fwd", r"(?:directly |also |causally )?(?:causes|cause|affects|affect|influences|influence|determines|determine"
            r"|drives|drive|produces|produce|impacts|impact|leads to|lead to|results in|result in|points to|point to"
            r"|(?:has|have) an? (?:direct )?(?:causal )?(?:effect|influence|impact) (?:on|upon)"
            r"|(?:has|have) an? (?:directed )?(?:edge|arrow|arc|link) (?:pointing )?(?:to|into)"
            r"|(?:is|are) (?:a |an |the )?(?:common )?(?:direct )?(?:causes?|parents?) of)"),
)) + r")(?![^ ])")
_PROSE_TOK = r"(?P<q>\"[^\"\n]{1,200}\"|“[^”\n]{1,200}”)|(?P<w>\w+(?:['’-]\w+)*)|(?P<p>[,:])|(?P<s>[.!?;\n]+)"


@functools.lru_cache(maxsize=256)
def _prose_lexer(known: tuple[str, ...]):
    multi = sorted((n for n in known if not re.fullmatch(r"\w+", n)), key=len, reverse=True)
    alt = "|".join(map(re.escape, multi))
    return re.compile((rf"(?P<k>(?<!\w)(?:{alt})(?!\w))|" if alt else "") + _PROSE_TOK)


def _parse_prose(text: str, hint=None):
    known = set(hint) if hint else None
    nodes, d, b = [], [], []
    sent: list[tuple[str, str]] = []
    for m in _prose_lexer(tuple(hint or ())).finditer(text + "\n"):
        k, v = m.lastgroup, m.group()
        if k != "s":
            sent.append((k, v.strip('"“”') if k == "q" else v))
            continue
        _prose_sentence(sent, known, nodes, d, b)
        sent = []
        if len(d) + len(b) > MAX_EDGES:
            raise ParseError("too many edges in prose")
    if not nodes:
        raise ParseError("no causal relation or node declaration recognised in prose")
    return nodes, d, b, None


def _prose_sentence(toks, known, nodes, d, b):
    low = [v.lower() if k in ("w", "p") else "\x00" for k, v in toks]
    joined, starts, acc = " ".join(low), [], 0
    for w in low:
        starts.append(acc)
        acc += len(w) + 1
    index = {p: i for i, p in enumerate(starts)}
    matches = [(m.lastgroup, index[m.start()], index[m.start()] + m.group().count(" ") + 1)
               for m in _PHRASES.finditer(joined) if m.start() in index]
    phrase_at = {i for _, i, _ in matches}

    def is_name(i):
        if not 0 <= i < len(toks):
            return False
        k, v = toks[i]
        return k in ("q", "k") or (k == "w" and ((len(v) == 1 and v.isupper()) or v.lower() not in _STOP))

    def fwd_list(j):  # -> (names, index of the next unread token, index after the last name)
        out, end = [], j
        while True:
            while j < len(toks) and toks[j][0] == "w" and toks[j][1].lower() in _FILLER and not (
                    len(toks[j][1]) == 1 and toks[j][1].isupper()):
                j += 1
            if not is_name(j) or (out and j + 1 in phrase_at):
                return out, j, end
            out.append(toks[j][1])
            end = k = j + 1
            if k < len(low) and low[k] == ",":
                k += 1
            if k < len(low) and low[k] == "and":
                k += 1
            if k == j + 1:
                return out, k, end
            j = k

    def back_list(i, floor):
        out = []
        while i >= floor and is_name(i):
            out.append(toks[i][1])
            k = i - 1
            if k >= 0 and low[k] == "and":
                k -= 1
            if k >= 0 and low[k] == ",":
                k -= 1
            if k == i - 1:
                break
            i = k
        return out[::-1]

    last_obj, floor = None, 0
    for kind, i, j in matches:
        i0 = i - 1
        while i0 > floor and low[i0] in ("both", "also", "each", "jointly", "together", "all"):
            i0 -= 1
        subs = back_list(i0, floor)
        if not subs and i > 0 and low[i - 1] in ("which", "that", "who") and last_obj:
            subs = [last_obj]
        if kind == "frm":
            src, j2, _ = fwd_list(j)
            if len(src) != 1 or j2 >= len(low) or low[j2] != "to":
                continue
            subs, kind, j = src, "fwd", j2 + 1
        objs, _, end = fwd_list(j) if kind != "bi" else ([], 0, j)
        floor = max(floor, end) if kind != "decl" else floor
        if kind == "decl":
            pairs = [(o, o, "n") for o in objs]
        elif kind in ("fwd", "rev"):
            pairs = [(s, o, kind) for s in subs for o in objs]
        elif kind == "biw":
            pairs = [(s, o, "bi") for s in subs for o in objs]
        else:
            pairs = [(x, y, "bi") for x, y in combinations(subs if kind == "bi" else objs, 2)]
        if len(pairs) > MAX_EDGES:
            raise ParseError("too many edges in prose")
        for s, o, t in pairs:
            if known is not None and (s not in known or o not in known):
                continue
            nodes.extend((s, o) if s != o else (s,))
            if t == "fwd":
                d.append((s, o))
            elif t == "rev":
                d.append((o, s))
            elif t == "bi" and s != o:
                b.append((s, o))
        if objs:
            last_obj = objs[-1]


# ---- entry points ---------------------------------------------------------------------------
_PARSERS = {"arrows": lambda t, h: _parse_arrows(t, h)[:4], "json": _parse_json, "matrix": _parse_matrix,
            "graphml": _parse_graphml, "dot": _parse_dot, "clear": _parse_clear, "prose": _parse_prose}
_HAS_ARROW = re.compile(r"<->|->|<-|[→←↔⟶⟵⟷⇒⇐⇔]|-->|<=>|=>")


def _detect(body: str):
    c = body[0]
    if c in "[{(":
        if _load_json(body, False) is not None or re.match(r"\{\s*\"[^\"\n]{0,200}\"\s*:", body):
            return "json"
    if re.match(r"<(?:\?xml|graphml\b|!--)", body, re.I):
        return "graphml"
    if _DOT_HEAD.match(body):
        return "dot"
    if _CLEAR_HEAD.match(body):
        return "clear"
    if _looks_like_matrix(body):
        return "matrix"
    if _HAS_ARROW.search(body):
        return "arrows"
    return None


def _parse(text: str, fmt, kind, nodes) -> CausalGraph:
    if len(text) > MAX_TEXT_CHARS:
        raise ParseError(f"graph text of {len(text)} characters exceeds the {MAX_TEXT_CHARS} limit")
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise ParseError("empty graph text")
    if fmt is None:
        fmt = _detect(body)
        if fmt is None:
            try:
                raw = _parse_prose(body, nodes)
            except ParseError:
                raw = _PARSERS["arrows"](body, nodes)
            return _assemble(*raw, kind, nodes)
    fmt = str(fmt).lower()
    if fmt not in _PARSERS:
        raise ParseError(f"unknown graph format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _assemble(*_PARSERS[fmt](body, nodes), kind, nodes)


def _assemble(found, d, b, declared, kind, nodes) -> CausalGraph:
    if nodes is not None:
        allowed = set(nodes)
        for n in [*found, *(x for e in d for x in e), *(x for e in b for x in e)]:
            if n not in allowed:
                raise ParseError(f"node {n!r} is not among the declared nodes")
        found = [*nodes, *found]
    distinct = set(found)
    if not distinct:
        raise ParseError("graph has no nodes")
    if len(distinct) > MAX_NODES or len(d) + len(b) > MAX_EDGES:
        raise ParseError(f"graph too large ({len(distinct)} nodes, {len(d) + len(b)} edges)")
    return CausalGraph.build(found, d, b, kind if kind is not None else declared)


graph_cache = functools.lru_cache(maxsize=4096)(_parse)


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


# ---- renderers ------------------------------------------------------------------------------
def _quote(name: str, bare_ok: bool) -> str:
    if bare_ok:
        return name
    if "\n" in name:
        raise GraphError(f"node name {name!r} cannot be rendered (newline)")
    if '"' not in name:
        return f'"{name}"'
    if "'" not in name:
        return f"'{name}'"
    raise GraphError(f"node name {name!r} holds both quote characters and cannot be rendered")


def _arrow_name(n: str) -> str:
    return _quote(n, bool(_BARE.fullmatch(n)) and "and" not in n.lower().split())


def _prose_name(n: str) -> str:
    return _quote(n, bool(re.fullmatch(r"\w+", n)) and ((len(n) == 1 and n.isupper()) or (
        n.lower() not in _STOP and not _PHRASES.search(n.lower()))))


def _listing(names: Sequence[str], last: str = " and ") -> str:
    return ", ".join(names[:-1]) + last + names[-1] if len(names) > 1 else "".join(names)


def render_graph(g: CausalGraph, fmt: str = "arrows") -> str:
    """Render ``g`` in one of :data:`RENDER_FORMATS`; ``parse_graph`` reads every one back."""
    fmt = fmt.lower()
    dir_, bi = sorted(g.directed), sorted(g.bidirected)
    touched = {n for e in g.directed | g.bidirected for n in e}
    if fmt == "arrows":
        parts = [f"{_arrow_name(a)} -> {_arrow_name(c)}" for a, c in dir_]
        parts += [f"{_arrow_name(a)} <-> {_arrow_name(c)}" for a, c in bi]
        return ", ".join(parts + [_arrow_name(n) for n in g.nodes if n not in touched])
    if fmt == "json":
        return json.dumps({"kind": g.kind.value, "nodes": list(g.nodes), "edges": [list(e) for e in dir_],
                           "bidirected": [list(e) for e in bi]}, ensure_ascii=False)
    if fmt == "json_parents":
        out = {}
        for n in g.nodes:
            out[n] = {"parents": sorted(g.parents(n))}
            if g.bidirected or g.kind is GraphClass.ADMG:
                out[n]["spouses"] = sorted(g.siblings(n))
        return json.dumps(out, ensure_ascii=False)
    if fmt == "matrix":
        def cell(n):
            return _quote(n, bool(re.fullmatch(r"[^\s,;|\"']+", n)) and not _NUM.fullmatch(n))
        rows = [" ".join(cell(n) for n in g.nodes)]
        for a in g.nodes:
            vals = [((a, c) in g.directed) | (2 if g.has_edge(a, c, "<->") else 0) for c in g.nodes]
            rows.append(" ".join([cell(a)] + [str(int(v)) for v in vals]))
        return "\n".join(rows)
    if fmt == "graphml":
        lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                 '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
                 '  <key id="kind" for="graph" attr.name="kind" attr.type="string"/>',
                 '  <key id="type" for="edge" attr.name="type" attr.type="string"/>',
                 '  <graph id="G" edgedefault="directed">',
                 f'    <data key="kind">{g.kind.value}</data>']
        lines += [f"    <node id={quoteattr(n)}/>" for n in g.nodes]
        for edges, t in ((dir_, "directed"), (bi, "bidirected")):
            lines += [f'    <edge source={quoteattr(a)} target={quoteattr(c)}><data key="type">{t}</data></edge>'
                      for a, c in edges]
        return "\n".join(lines + ["  </graph>", "</graphml>"])
    if fmt == "dot":
        def q(n):
            return '"' + n.replace("\\", "\\\\").replace('"', '\\"') + '"' if "\\" not in n else _quote(n, False)
        lines = ["digraph G {"] + [f"  {q(n)};" for n in g.nodes]
        lines += [f"  {q(a)} -> {q(c)};" for a, c in dir_]
        lines += [f"  {q(a)} -> {q(c)} [dir=both, style=dashed];" for a, c in bi]
        return "\n".join(lines + ["}"])
    if fmt == "prose":
        sents = [f"The variables are {_listing([_prose_name(n) for n in g.nodes])}."]
        sents += [f"{_prose_name(a)} causes {_prose_name(c)}." for a, c in dir_]
        sents += [f"{_prose_name(a)} and {_prose_name(c)} share a hidden common cause." for a, c in bi]
        return " ".join(sents)
    if fmt == "clear":
        names = ", ".join(_arrow_name(n) for n in g.nodes)
        de = ", ".join(f"{_arrow_name(a)}->{_arrow_name(c)}" for a, c in dir_)
        be = ", ".join(f"{_arrow_name(a)}<->{_arrow_name(c)}" for a, c in bi)
        if g.kind is GraphClass.ADMG:
            return (f"Given an ADMG (acyclic directed mixed graph) with nodes {names}, "
                    f"{'directed edges ' + de if de else 'no directed edges'} and "
                    f"{'bi-directed edges ' + be if be else 'no bi-directed edges'}.")
        if bi:
            raise GraphError("only an ADMG can be rendered with bidirected edges in CLEAR form")
        head = "a DAG (directed acyclic graph)" if g.kind is GraphClass.DAG else "a directed graph"
        return f"Given {head} with nodes {names} and {'directed edges ' + de if de else 'no edges'}."
    raise GraphError(f"unknown render format {fmt!r}; expected one of {', '.join(RENDER_FORMATS)}")


# ---- node sets and paths --------------------------------------------------------------------
_EMPTY = {"", "set()", "frozenset()", "∅", "{}", "[]", "()", "none", "empty", "empty set",
          "the empty set", "no nodes", "nothing", "{∅}", "null"}


def _strip_wrapper(s: str) -> str:
    s = s.strip().rstrip(".").strip()
    m = re.fullmatch(r"(?:frozenset|set)\((.*)\)", s, re.S)
    if m:
        s = m.group(1).strip()
    if len(s) >= 2 and s[0] + s[-1] in ("{}", "[]", "()"):
        s = s[1:-1].strip()
    return s


def parse_node_set(text: str) -> frozenset[str]:
    """``{A, B}``, ``[A, B]``, ``{'P', 'X'}``, ``set()``, ``∅``, ``none``, ``A, B``, ``A and B``."""
    if not isinstance(text, str):
        raise ParseError(f"node set must be text, got {type(text).__name__}")
    if text.strip().rstrip(".").strip().lower() in _EMPTY:
        return frozenset()
    s = _strip_wrapper(text)
    if s.lower() in _EMPTY:
        return frozenset()
    names = []
    for item in _arrow_lex(s, "node set"):
        for t in item:
            if t[0] != "name":
                raise _bad(t[4], s, t[2], "node set")
        if len(item) != 1:
            raise _bad(item[1][4], s, item[1][2], "node set")
        names.append(item[0][1])
    if not names or re.search(r"[\[\](){}]", s):
        m = re.search(r"[\[\](){}]", s)
        raise _bad(m.group() if m else s, s, m.start() if m else 0, "node set")
    return frozenset(names)


def parse_node_sets(text: str) -> list[frozenset[str]]:
    """A list of node sets such as CLEAR's ``[set(), {'A'}, {'P', 'A'}]``; one bare set gives one."""
    s = text.strip()
    if len(s) >= 2 and s[0] == "[" and s[-1] == "]" and re.search(r"[{(]|set\(|∅", s):
        s = s[1:-1]
    out = []
    for m in re.finditer(r"(?:frozenset|set)\(\)|∅|\{[^{}]*\}|(?P<sep>[\s,]+)|(?P<bad>.)", s):
        if m.group("bad"):
            if out or m.start():
                raise _bad(m.group(), s, m.start(), "node-set list")
            return [parse_node_set(s)]
        if not m.group("sep"):
            out.append(parse_node_set(m.group()))
    if not out:
        raise ParseError(f"no node set found in {text[:40]!r}")
    return out


def parse_path(text: str) -> tuple[list[str], list[str] | None]:
    """``X <- C -> Y`` -> (nodes, edge types); ``[X, M, Y]`` / ``X, M, Y`` -> (nodes, None)."""
    if not isinstance(text, str):
        raise ParseError(f"path must be text, got {type(text).__name__}")
    s = _strip_wrapper(text)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"" and s[0] not in s[1:-1]:
        s = s[1:-1].strip()
    m = re.search(r"[\[\](){}]", s)
    if m:
        raise _bad(m.group(), s, m.start(), "path")
    items = _arrow_lex(s, "path")
    if not items:
        raise ParseError("empty path")
    if any(t[0] == "arrow" for item in items for t in item):
        if len(items) != 1:
            raise ParseError(f"a path with arrows must not contain separators: {text[:60]!r}")
        item = items[0]
        for j, t in enumerate(item):
            if t[0] != ("name" if j % 2 == 0 else "arrow"):
                raise _bad(t[4], s, t[2], "path")
        if item[-1][0] != "name":
            raise _bad(item[-1][4], s, item[-1][2], "path", " (arrow without a head node)")
        return [t[1] for t in item[0::2]], [t[1] for t in item[1::2]]
    for item in items:
        if len(item) != 1 or item[0][0] != "name":
            raise _bad(item[-1][4], s, item[-1][2], "path")
    return [item[0][1] for item in items], None


def parse_node_list(text: str) -> list[str]:
    """The node sequence of a path or list (``X -> M -> Y``, ``[X, M, Y]``, ``X, M, Y``)."""
    return parse_path(text)[0]
