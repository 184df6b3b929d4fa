"""Graph renderers: every encoding ``parse_graph`` reads, written back (the CausalGraph2LLM encodings)."""

from __future__ import annotations

import json
import re

from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.graph_prose import _PHRASES, _STOP
from calver.verifier.graph_text import _BARE, _NUM

RENDER_FORMATS = ("arrows", "json", "json_parents", "matrix", "graphml", "dot", "prose", "clear")
_XML_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\t": "&#9;",
                           "\r": "&#13;"})
_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # not even a char ref in XML 1.0
# A bare prose name must not read as part of a causal phrase ("Causally causes B" would lose the
# edge): every word of the phrase grammar, with and without a plural s, plus the list-skip words.
_PHRASE_WORDS = frozenset(w for x in re.findall(r"[a-z]+", _PHRASES.pattern) for w in (x, x.rstrip("s"))) | {
    "jointly", "together"}
_CLEAR_KEYS = re.compile(r"(?:\bno\s+|\bbi-?directed\s+|\bdirected\s+)edges?\b", re.I)
# = parsers._STRUCT_KEYS (not imported: parsers imports this module); a parents map keyed so is misread
_JSON_STRUCT = frozenset({"nodes", "matrix", "adjacency", "kind", "graph_type", "class", "edges", "directed",
                          "directed_edges", "links", "arcs", "bidirected", "bidirected_edges", "bi-directed",
                          "bi_directed"})


# ---- renderers ------------------------------------------------------------------------------
def _quote(name: str, bare_ok: bool) -> str:
    if bare_ok:
        return name
    for q in "\"'":
        if q not in name and "\n" not in name:
            return q + name + q
    raise GraphError(f"node name {name!r} cannot be rendered (newline or both quote characters)")


def _arrow_name(n: str) -> str:
    return _quote(n, bool(_BARE.fullmatch(n)) and "and" not in n.lower().split())


def _prose_name(n: str) -> str:
    if re.fullmatch(r"\w+", n) and ((len(n) == 1 and n.isupper()) or (
            n.lower() not in _STOP and n.lower() not in _PHRASE_WORDS and not _PHRASES.search(n.lower()))):
        return n
    if "\n" not in n and len(n) <= 200:  # the prose lexer reads "..." and “...” only, up to 200 chars
        if '"' not in n:
            return f'"{n}"'
        if "”" not in n:
            return f"“{n}”"
    raise GraphError(f"node name {n[:60]!r} cannot be rendered as prose (newline, over 200 characters, or both \" and ”)")


def _clear_name(n: str) -> str:
    # the CLEAR reader collapses whitespace, stops at the first '.' and splits at "... edges" keywords
    if "." in n or re.search(r"[^\S ]| {2}", n) or _CLEAR_KEYS.search(n):
        raise GraphError(f"node name {n[:60]!r} cannot be rendered in CLEAR form ('.', a tab/newline/double "
                         "space, or an 'edges' keyword)")
    return _arrow_name(n)


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
        clash = next((n for n in g.nodes if n.lower() in _JSON_STRUCT), None)
        if clash is not None:  # the reader would take the map for an object with nodes/edges keys
            raise GraphError(f"node name {clash!r} cannot be rendered as json_parents (a reserved key); use json")
        mixed = bool(g.bidirected) or g.kind is GraphClass.ADMG
        return json.dumps({n: {"parents": sorted(g.parents(n)), **({"spouses": sorted(g.siblings(n))} if mixed else {})}
                           for n in g.nodes}, ensure_ascii=False)
    if fmt == "matrix":
        def cell(n):
            return _quote(n, bool(re.fullmatch(r"[^\s,;|\"'\ufeff]+", n)) and not _NUM.fullmatch(n))  # BOM: lstripped
        return "\n".join([" ".join(map(cell, g.nodes))] + [" ".join([cell(a)] + [
            str(((a, c) in g.directed) + 2 * g.has_edge(a, c, "<->")) for c in g.nodes]) for a in g.nodes])
    if fmt == "graphml":
        lines = ['<?xml version="1.0" encoding="UTF-8"?>',
                 '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
                 '  <key id="kind" for="graph" attr.name="kind" attr.type="string"/>',
                 '  <key id="type" for="edge" attr.name="type" attr.type="string"/>',
                 '  <graph id="G" edgedefault="directed">',
                 f'    <data key="kind">{g.kind.value}</data>']
        bad = next((n for n in g.nodes if _XML_BAD.search(n)), None)
        if bad is not None:
            raise GraphError(f"node name {bad!r} holds a character XML cannot express")
        qa = {n: '"' + n.translate(_XML_ATTR) + '"' for n in g.nodes}  # no xml.sax: it imports urllib
        lines += [f"    <node id={qa[n]}/>" for n in g.nodes]
        for edges, t in ((dir_, "directed"), (bi, "bidirected")):
            lines += [f'    <edge source={qa[a]} target={qa[c]}><data key="type">{t}</data></edge>'
                      for a, c in edges]
        return "\n".join(lines + ["  </graph>", "</graphml>"])
    if fmt == "dot":
        q = {n: '"' + n.replace("\\", "\\\\").replace('"', '\\"') + '"' for n in g.nodes}.__getitem__
        lines = ["digraph G {"] + [f"  {q(n)};" for n in g.nodes]
        lines += [f"  {q(a)} -> {q(c)};" for a, c in dir_]
        lines += [f"  {q(a)} -> {q(c)} [dir=both, style=dashed];" for a, c in bi]
        return "\n".join(lines + ["}"])
    if fmt == "prose":
        names = [_prose_name(n) for n in g.nodes]
        sents = [f"The variables are {', '.join(names[:-1]) + ' and ' if names[:-1] else ''}{names[-1]}."]
        sents += [f"{_prose_name(a)} causes {_prose_name(c)}." for a, c in dir_]
        sents += [f"{_prose_name(a)} and {_prose_name(c)} share a hidden common cause." for a, c in bi]
        return " ".join(sents)
    if fmt == "clear":
        names = ", ".join(_clear_name(n) for n in g.nodes)
        de = ", ".join(f"{_clear_name(a)}->{_clear_name(c)}" for a, c in dir_)
        be = ", ".join(f"{_clear_name(a)}<->{_clear_name(c)}" for a, c in bi)
        if g.kind is GraphClass.ADMG:
            return (f"Given an ADMG (acyclic directed mixed graph) with nodes {names}, "
                    f"{'directed edges ' + de if de else 'no directed edges'} and "
                    f"{'bi-directed edges ' + be if be else 'no bi-directed edges'}.")
        if bi:
            raise GraphError("only an ADMG can be rendered with bidirected edges in CLEAR form")
        head = "a DAG (directed acyclic graph)" if g.kind is GraphClass.DAG else "a directed graph"
        return f"Given {head} with nodes {names} and {'directed edges ' + de if de else 'no edges'}."
    raise GraphError(f"unknown render format {fmt!r}; expected one of {', '.join(RENDER_FORMATS)}")
