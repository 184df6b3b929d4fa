"""JSON (and Python-style literals): edge lists, graph objects, parents maps.

An edge list (pairs, ``[a, b, type]`` triples, ``"A->B"`` strings, ``{source,target,type}`` dicts),
an object with ``nodes``/``edges``/``bidirected``/``kind`` (or ``links``, or ``matrix`` with
``nodes``), or a parents map ``{"B": ["A"]}`` / ``{"B": {"parents": [..], "spouses": [..]}}``.
Python-style literals with quotes, tuples and sets are translated to JSON by a tokenizer (never
eval).  Rendered as a graph object (``json``) or a parents map (``json_parents``).
"""

from __future__ import annotations

import json
import re

from calver.verifier.formats import arrows, matrix
from calver.verifier.formats.common import ParseError, RenderOrder, bad_token, edge_type, order_of
from calver.verifier.graph import CausalGraph, GraphClass, GraphError

_PY_TOK = re.compile(r"""(?P<ws>\s+)|(?P<s>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|(?P<p>[\[\](){},:])
 |(?P<n>-?\d+(?:\.\d+)?)|(?P<k>None|True|False|null|true|false|set\(\)|frozenset\(\))|(?P<bad>.)""", re.X | re.S)
_D_KEYS = ("edges", "directed", "directed_edges", "links", "arcs")
_B_KEYS = ("bidirected", "bidirected_edges", "bi-directed", "bi_directed")
# a dict holding one of these keys is a graph object, else a parents map (so a map keyed so is misread)
_STRUCT_KEYS = frozenset({"nodes", "matrix", "adjacency", "kind", "graph_type", "class", *_D_KEYS, *_B_KEYS})
_OBJECT_HEAD = re.compile(r'\{\s*"[^"\n]{0,200}"\s*:')


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


def _load(text: str, strict: bool):
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
        raise bad_token(text[pos:pos + 12], text, pos, "JSON", f": {getattr(e, 'msg', e)}") from None


def detect(body: str) -> bool:
    return body[0] in "[{(" and (_load(body, False) is not None or bool(_OBJECT_HEAD.match(body)))


def _name(x) -> str:
    if isinstance(x, dict):
        x = x.get("id", x.get("name"))
    if isinstance(x, bool) or not isinstance(x, (str, int)) or x == "":
        raise ParseError(f"JSON node name must be a non-empty string, got {str(x)[:40]!r}")
    return str(x)


def _edges(items, default: str, out):
    nodes, d, b = out
    if isinstance(items, dict):  # children map {"A": ["B"]}
        items = [[k, c] for k, cs in items.items() for c in (cs if isinstance(cs, list) else [cs])]
    if not isinstance(items, list):
        raise ParseError(f"JSON edges must be a list, got {type(items).__name__}")
    for e in items:
        if isinstance(e, str):
            n, ed, eb, _, _ = arrows.parse_arrows(e, "JSON edge string")
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
        x, y = _name(e[0]), _name(e[1])
        t = edge_type(e[2]) if len(e) == 3 else default
        nodes += [x, y]
        (b if t == "<->" else d).append((y, x) if t == "<-" else (x, y))


def _from_obj(data):
    out: tuple[list, list, list] = ([], [], [])
    declared = None
    if isinstance(data, list):
        _edges(data, "->", out)
    elif isinstance(data, dict) and _STRUCT_KEYS & {str(k).lower() for k in data}:
        low = {str(k).lower(): v for k, v in data.items()}
        for key in ("kind", "graph_type", "class", "type"):
            if isinstance(low.get(key), str):
                declared = GraphClass.parse(low[key])
                break
        ns = low.get("nodes", [])
        if not isinstance(ns, list):
            raise ParseError("JSON 'nodes' must be a list")
        out[0].extend(_name(n) for n in ns)
        for key in (k for k in _D_KEYS + _B_KEYS if k in low):
            _edges(low[key], "->" if key in _D_KEYS else "<->", out)
        mat = low.get("matrix", low.get("adjacency"))
        if mat is not None:
            names = out[0][:len(ns)]
            if not isinstance(mat, list) or len(mat) != len(names) or any(
                    not isinstance(r, list) or len(r) != len(names) for r in mat):
                raise ParseError("JSON matrix must be a square list of lists matching 'nodes'")
            matrix.matrix_edges(names, [[str(c) for c in r] for r in mat], out, "JSON matrix")
    elif isinstance(data, dict):
        for node, val in data.items():
            node = _name(node)
            out[0].append(node)
            v = val if isinstance(val, dict) else {"parents": val}
            spouses = v.get("spouses", v.get("bidirected", v.get("siblings", [])))
            for group, typ in ((v.get("parents", []), "p"), (spouses, "s"), (v.get("children", []), "c")):
                group = [] if group is None else [group] if isinstance(group, (str, int)) else group
                if not isinstance(group, list):
                    raise ParseError(f"parents of {node!r} must be a list of names")
                for other in map(_name, group):
                    out[0].append(other)
                    if typ == "s":
                        out[2].append((node, other))
                    else:
                        out[1].append((other, node) if typ == "p" else (node, other))
    else:
        raise ParseError(f"a JSON graph must be a list or an object, got {type(data).__name__}")
    return out[0], out[1], out[2], declared


def parse(text: str, hint=None):
    return _from_obj(_load(text, True))


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    o = order_of(g, order)
    return json.dumps({"kind": g.kind.value, "nodes": list(o.nodes), "edges": [list(e) for e in o.directed],
                       "bidirected": [list(e) for e in o.bidirected]}, ensure_ascii=False)


def render_parents(g: CausalGraph, order: RenderOrder | None = None) -> str:
    clash = next((n for n in g.nodes if n.lower() in _STRUCT_KEYS), None)
    if clash is not None:  # the reader would take the map for an object with nodes/edges keys
        raise GraphError(f"node name {clash!r} cannot be rendered as json_parents (a reserved key); use json")
    mixed = bool(g.bidirected) or g.kind is GraphClass.ADMG
    o = order_of(g, order)
    if order is None:
        parents = {n: sorted(g.parents(n)) for n in g.nodes}
        spouses = {n: sorted(g.siblings(n)) for n in g.nodes}
    else:  # each list in the order its edges come
        parents = {n: [a for a, c in o.directed if c == n] for n in g.nodes}
        spouses = {n: [a if c == n else c for a, c in o.bidirected if n in (a, c)] for n in g.nodes}
    return json.dumps({n: {"parents": parents[n], **({"spouses": spouses[n]} if mixed else {})}
                       for n in o.nodes}, ensure_ascii=False)
