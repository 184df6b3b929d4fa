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
  change the type; subgraphs are flattened (``A -> {B C}`` gives both edges); comments ignored.  In a
  quoted id ``\\"`` and ``\\\\`` are escapes and any other backslash is literal; a quoted id is never a
  keyword (``"subgraph"`` names a node).
* Prose: sentence-level phrases (causes/affects/leads to/is caused by/share a hidden common cause/
  are confounded/there is an edge from A to B/the variables are ...); unrecognised sentences are
  ignored; nothing recognised at all is an error.  A lone capital letter (``A``, ``I``) is a name.
* Errors are :class:`ParseError` (a :class:`GraphError`) naming the token and its position.
Lexers and the matrix/GraphML/DOT/prose parsers live in :mod:`calver.verifier.graph_text`.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Iterable

from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.graph_text import (
    _DOT_HEAD, MAX_EDGES, ParseError, _arrow_lex, _bad,
    _jtype, _looks_like_matrix, _matrix_edges, _parse_arrows, _parse_dot, _parse_graphml,
    _parse_matrix,
)
from calver.verifier.graph_prose import _parse_prose

__all__ = ["GraphError", "ParseError", "parse_graph", "render_graph", "parse_node_set", "parse_node_sets",
           "parse_node_list", "parse_path", "graph_cache", "FORMATS", "RENDER_FORMATS"]

FORMATS = ("arrows", "json", "matrix", "graphml", "dot", "clear", "prose")
MAX_TEXT_CHARS = 4_000_000
MAX_NODES = 2000
_CACHE_MAX_CHARS = 65_536


# ---- CLEAR sentence -------------------------------------------------------------------------
# ``what`` starts and ends on a non-blank, so no run of blanks splits two ways between it and the
# ``\s+`` around it (the old ``\s+[^\n]{0,120}?\s+`` was cubic on "given" + 20k spaces).
_CLEAR_HEAD = re.compile(r"\s*given\s+(?:an?\s+)?(?P<what>\S(?:[^\n]{0,118}?\S)?)\s+with\s+(?:the\s+)?"
                         r"(?:nodes|vertices|variables)\b\s*:?", re.I)
_CLEAR_KEY = re.compile(r"(?: ?, ?| )(?:and )?(?:(?P<no>no )?(?P<t>bi-?directed|directed) edges?\b"
                        r"|(?P<none>no edges?)\b)(?: ?:)?", re.I)


def _clear_kind(what: str):
    w = what.lower()
    for kind, marks in ((GraphClass.ADMG, ("admg", "mixed")), (GraphClass.DAG, ("dag", "acyclic")),
                        (GraphClass.DIRECTED, ("direct", "digraph", "cycl"))):
        if any(x in w for x in marks):
            return kind
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
        if k == "bad" or len(stack) > 64:  # graphs nest a few levels; deeper is hostile
            return None
        if k in ("s", "n", "k"):
            if k == "s" and v[0] == "'":
                v = json.dumps(v[1:-1].replace("\\'", "'").replace('\\\\', '\\'))
            out.append({"None": "null", "True": "true", "False": "false"}.get(v, "[]" if "set(" in v else v))
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
    return "".join(out) if not stack else None


def _load_json(text: str, strict: bool):
    try:
        return json.loads(text)
    except RecursionError:
        raise ParseError("JSON nested too deeply") from None
    except ValueError as e:
        try:
            if len(text) < 1_000_000:
                return json.loads(_pyish_to_json(text) or "?")
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


_D_KEYS = ("edges", "directed", "directed_edges", "links", "arcs")
_B_KEYS = ("bidirected", "bidirected_edges", "bi-directed", "bi_directed")
_STRUCT_KEYS = {"nodes", "matrix", "adjacency", "kind", "graph_type", "class", *_D_KEYS, *_B_KEYS}


def _from_obj(data):
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
        for key in (k for k in _D_KEYS + _B_KEYS if k in low):
            _jedges(low[key], "->" if key in _D_KEYS else "<->", out)
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
            v = val if isinstance(val, dict) else {"parents": val}
            spouses = v.get("spouses", v.get("bidirected", v.get("siblings", [])))
            for group, typ in ((v.get("parents", []), "p"), (spouses, "s"), (v.get("children", []), "c")):
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


# ---- entry points ---------------------------------------------------------------------------
_PARSERS = {"arrows": lambda t, h: _parse_arrows(t, h)[:4], "json": lambda t, h: _from_obj(_load_json(t, True)),
            "matrix": _parse_matrix, "graphml": _parse_graphml, "dot": _parse_dot, "clear": _parse_clear, "prose": _parse_prose}
_HAS_ARROW = re.compile(r"<->|->|<-|[→←↔⟶⟵⟷⇒⇐⇔]|-->|<=>|=>")


def _detect(body: str):
    if body[0] in "[{(" and (_load_json(body, False) is not None or re.match(r'\{\s*"[^"\n]{0,200}"\s*:', body)):
        return "json"
    for fmt, test in (("graphml", re.compile(r"<(?:\?xml|graphml\b|!--)", re.I).match), ("dot", _DOT_HEAD.match),
                      ("clear", _CLEAR_HEAD.match), ("matrix", _looks_like_matrix), ("arrows", _HAS_ARROW.search)):
        if test(body):
            return fmt
    return None


# Fast path for the canonical arrow text that traces and prompts use ("A -> B, C <-> D, E"):
# one regex pass instead of the general lexer. Anything else (chains, quotes, "and", labels)
# takes the general path; tests/test_parsers.py checks both agree.
_FN = r"[A-Za-z_][A-Za-z0-9_]*"
_FAST_ITEM = rf"{_FN}(?:[ \t]*(?:<->|->|<-)[ \t]*{_FN})?"
_FAST_TEXT = re.compile(rf"{_FAST_ITEM}(?:[ \t]*[,;\n][ \t]*{_FAST_ITEM})*")
_FAST_EDGE = re.compile(rf"({_FN})(?:[ \t]*(<->|->|<-)[ \t]*({_FN}))?")
_FAST_AND = re.compile(r"\band\b", re.I)


def _parse_fast_arrows(body: str):
    if not _FAST_TEXT.fullmatch(body) or _FAST_AND.search(body):
        return None
    found: list[str] = []
    d: list[tuple[str, str]] = []
    b: list[tuple[str, str]] = []
    for a, op, c in _FAST_EDGE.findall(body):
        found.append(a)
        if op:
            found.append(c)
            if op == "->":
                d.append((a, c))
            elif op == "<-":
                d.append((c, a))
            else:
                b.append((a, c))
    return found, d, b, None


def _parse(text: str, fmt, kind, nodes) -> CausalGraph:
    if len(text) > MAX_TEXT_CHARS:
        raise ParseError(f"graph text of {len(text)} characters exceeds the {MAX_TEXT_CHARS} limit")
    body = text.lstrip("\ufeff").strip()
    if not body:
        raise ParseError("empty graph text")
    if fmt in (None, "arrows") and len(body) < 1_000_000:
        raw = _parse_fast_arrows(body)
        if raw is not None:
            return _assemble(*raw, kind, nodes)
    if fmt is None:
        fmt = _detect(body)
        if fmt is None:
            try:
                raw = _parse_prose(body, nodes)
            except ParseError as e:  # a bare node list, unless it reads like unparsed prose
                raw = _PARSERS["arrows"](body, nodes)
                if any(n.count(" ") > 2 for n in raw[0]):
                    raise e
            return _assemble(*raw, kind, nodes)
    fmt = str(fmt).lower()
    if fmt not in _PARSERS:
        raise ParseError(f"unknown graph format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return _assemble(*_PARSERS[fmt](body, nodes), kind, nodes)


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


from calver.verifier.render import RENDER_FORMATS, render_graph  # noqa: E402,F401  (re-exported)


# ---- node sets and paths --------------------------------------------------------------------
_EMPTY = {"set()", "frozenset()", "∅", "{}", "[]", "()", "none", "empty", "empty set",
          "the empty set", "no nodes", "nothing", "{∅}", "null"}


def _strip_wrapper(s: str) -> str:
    s = s.strip().rstrip(".").strip()
    m = re.fullmatch(r"(?:frozenset|set)\((.*)\)", s, re.S)
    s = m.group(1).strip() if m else s
    if len(s) >= 2 and s[0] + s[-1] in ("{}", "[]", "()"):
        s = s[1:-1].strip()
    return s


def parse_node_set(text: str) -> frozenset[str]:
    """``{A, B}``, ``[A, B]``, ``{'P', 'X'}``, ``set()``, ``∅``, ``none``, ``A, B``, ``A and B``."""
    if not isinstance(text, str):
        raise ParseError(f"node set must be text, got {type(text).__name__}")
    s, bare = _strip_wrapper(text), text.strip().rstrip(".").strip()
    if not bare:
        raise ParseError("empty node-set text (write set() or {} for the empty set)")
    if bare.lower() in _EMPTY or not s or s.lower() in _EMPTY:
        return frozenset()
    m = re.search(r"[\[\](){}]", s)
    if m:
        raise _bad(m.group(), s, m.start(), "node set")
    names = []
    for item in _arrow_lex(s, "node set"):
        if len(item) != 1 or item[0][0] != "name":
            t = next((t for t in item if t[0] != "name"), item[-1])
            raise _bad(t[4], s, t[2], "node set")
        names.append(item[0][1])
    return frozenset(names)


def parse_node_sets(text: str) -> list[frozenset[str]]:
    """A list of node sets such as CLEAR's ``[set(), {'A'}, {'P', 'A'}]``; one bare set gives one."""
    if not isinstance(text, str):
        raise ParseError(f"node sets must be text, got {type(text).__name__}")
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
        for j, t in enumerate(item + [["end", "", len(s), 0, ""]] if item[-1][0] == "arrow" else item):
            if t[0] != ("name" if j % 2 == 0 else "arrow"):
                raise _bad(t[4], s, t[2], "path")
        return [t[1] for t in item[0::2]], [t[1] for t in item[1::2]]
    for item in items:
        if len(item) != 1 or item[0][0] != "name":
            raise _bad(item[-1][4], s, item[-1][2], "path")
    return [item[0][1] for item in items], None


def parse_node_list(text: str) -> list[str]:
    """The node sequence of a path or list (``X -> M -> Y``, ``[X, M, Y]``, ``X, M, Y``)."""
    return parse_path(text)[0]
