"""GraphML.

DOCTYPE/ENTITY declarations are rejected; an edge is bidirected if a data key named ``type``/
``edge_type``/``kind`` says so (``bidirected``, ``<->``, ``confounded`` ...); an undirected edge
without such data is an error.  A graph data key ``kind``/``class``/``graph_type`` declares the class.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from calver.verifier.formats.common import ParseError, RenderOrder, edge_type, order_of
from calver.verifier.graph import CausalGraph, GraphClass, GraphError

_HEAD = re.compile(r"<(?:\?xml|graphml\b|!--)", re.I)
_XML_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\t": "&#9;",
                           "\r": "&#13;"})
_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # not even a char ref in XML 1.0


def detect(body: str) -> bool:
    return bool(_HEAD.match(body))


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def parse(text: str, hint=None):
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
            typ = edge_type(typ) if typ else None
            directed = el.get("directed", "true" if default_directed else "false").lower() == "true"
            if typ == "<->":
                b.append((s, t))
            elif not directed:
                raise ParseError(f"undirected GraphML edge {s} -- {t} has no bidirected type")
            else:
                d.append((t, s) if typ == "<-" else (s, t))
            nodes += [s, t]
    return nodes, d, b, declared


def render(g: CausalGraph, order: RenderOrder | None = None) -> str:
    o = order_of(g, order)
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
    lines += [f"    <node id={qa[n]}/>" for n in o.nodes]
    for edges, t in ((o.directed, "directed"), (o.bidirected, "bidirected")):
        lines += [f'    <edge source={qa[a]} target={qa[c]}><data key="type">{t}</data></edge>'
                  for a, c in edges]
    return "\n".join(lines + ["  </graph>", "</graphml>"])
