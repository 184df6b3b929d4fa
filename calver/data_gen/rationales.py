"""One-line rule rationales for SFT traces (``calver gen`` with ``rationale: true``).

A rule answer (``answers: rule``: the treatment's parents, a path's collider, ...) is a lookup in the
graph, but the six-slot trace writes it in STRATEGY before any computation. A rationale spells the lookup
out first, as the edges the rule reads::

    GRAPH: K -> L, L -> I, N -> L, ...
    QUERY: task=backdoor_set; treatment=L; outcome=B; variant=any; graph=DAG

    Rule: adjust for the parents of L. Edges into L: K -> L, N -> L.

    STRATEGY: {K, N}

It stands between QUERY and STRATEGY as its own paragraph, after the graph and the query are written in
canonical form (so the lookup reads one arrow list whatever the prompt's encoding). The contract splitter
ignores a paragraph after a blank line, so the rationale earns no bit and changes no score.

The rationale names the rule the answer follows, found by matching the answer against the family's rule
proposals; an answer no rule gives (the validity-class fallback) gets none. Edges are listed in the order the
GRAPH line lists them (sorted, or the prompt's order under ``shuffle_order``).

The ``scan`` style (``rationale: scan``) writes each lookup as a pass over the GRAPH line first::

    Rule: adjust for the parents of L. Scan for edges into L: K -> L yes, L -> I no, N -> L yes.
    Edges into L: K -> L, N -> L.

A small policy cannot retrieve a node's edges from a list it just wrote (the second measured run: 12% of its
lookups exact); the scan makes the lookup a copy of that list in order, each edge with a local yes/no.

Under ``graph_slot: cue_first`` a lookup into a node lists its edges child first, as that style's GRAPH line
writes them for the families that look up parents::

    GRAPH: L <- K, I <- L, L <- N
    Rule: adjust for the parents of L. Edges into L: L <- K, L <- N.

A causal model copies what follows a cue it has seen: in ``K -> L`` the parent comes before the node that
finds it, in ``L <- K`` after it (as in ``Edges out of X: X -> C``, and in a parents map).
"""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass, field
from typing import Any, Callable, Mapping

from calver.data_gen.prompts import graph_line_order
from calver.verifier import Problem, get_family
from calver.verifier.contract import format_path, format_set
from calver.verifier.formats.common import RenderOrder, order_of
from calver.verifier.graph import CausalGraph
from calver.verifier.paths import descendants

RATIONALE_PREFIX = "Rule: "


STYLES = ("rule", "scan")


@dataclass(frozen=True)
class Rank:
    """The directed edges of the trace's GRAPH line, in its order; ``scan``: write each lookup as a pass
    over them; ``cue_first``: write the edges of a lookup into a node child first (``L <- K``), so the node
    comes before the parent a causal model copies after it."""

    edges: tuple[tuple[str, str], ...]
    scan: bool = False
    cue_first: bool = False
    _at: dict[tuple[str, str], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_at", {e: i for i, e in enumerate(self.edges)})

    def __getitem__(self, edge: tuple[str, str]) -> int:
        return self._at[edge]


def _edge_text(edge: tuple[str, str], kind: str, rank: Rank) -> str:
    a, b = edge
    return f"{format_path([b])} <- {format_path([a])}" if rank.cue_first and kind == "into" else format_path([a, b])


def _edges(pairs: list[tuple[str, str]], kind: str, rank: Rank) -> str:
    return ", ".join(_edge_text(e, kind, rank) for e in sorted(pairs, key=rank.__getitem__)) or "none"


def _touches(edge: tuple[str, ...], kind: str, node: str) -> bool:
    """Whether ``edge`` runs into (kind ``into``) or out of (``out of``) ``node``."""
    return edge[1 if kind == "into" else 0] == node


def _lookup(kind: str, node: str, pairs: list[tuple[str, str]], rank: Rank) -> str:
    """``Edges into X: ...`` (kind ``into`` / ``out of``), after a scan of every edge when ``rank.scan``."""
    found = f"Edges {kind} {format_path([node])}: {_edges(pairs, kind, rank)}."
    if not rank.scan:
        return found
    marks = ", ".join(f"{_edge_text(e, kind, rank)} {'yes' if _touches(e, kind, node) else 'no'}" for e in rank.edges)
    return f"Scan for edges {kind} {format_path([node])}: {marks or 'none'}. {found}"


def node_edges(g: CausalGraph, kind: str, node: str) -> list[tuple[str, str]]:
    """``node``'s directed edges of ``kind``: ``into`` it (from its parents) or ``out of`` it (to its children)."""
    return [(p, node) for p in g.parents(node)] if kind == "into" else [(node, c) for c in g.children(node)]


def listed_edges(text: str) -> list[tuple[str, ...]]:
    """The edges a lookup lists (``K -> L, N -> L``, child first ``L <- K, L <- N``, or ``none``), each as
    (parent, child) where it has one arrow."""
    return [] if text == "none" else [_edge(e) for e in text.split(", ")]


def lookup_line(kind: str, node: str, g: CausalGraph, order: RenderOrder | None = None, scan: bool = True) -> str:
    """The lookup of the edges ``kind`` (``into`` / ``out of``) ``node``, over ``g``'s directed edges in
    ``order`` (default: sorted), as a rationale writes it, alone (the lookup drills): after a scan of every
    edge when ``scan`` (the ``scan`` style), else the list alone (the ``rule`` style)."""
    if kind not in ("into", "out of"):
        raise ValueError(f"lookup_line: kind must be 'into' or 'out of', got {kind!r}")
    if node not in g.nodes:
        raise ValueError(f"lookup_line: {node!r} is not a node of the graph")
    return _lookup(kind, node, node_edges(g, kind, node), Rank(order_of(g, order).directed, scan=scan))


def _into(g: CausalGraph, node: str, rank: Rank) -> str:
    return _lookup("into", node, [(p, node) for p in g.parents(node)], rank)


def _backdoor(g: CausalGraph, q: Mapping[str, Any], obj: frozenset[str], rank: Rank) -> str | None:
    x, y = q["treatment"], q["outcome"]
    if obj == g.parents(x) - {y}:
        return f"adjust for the parents of {format_path([x])}. {_into(g, x, rank)}"
    below = descendants(g, [x]) - {x}
    if obj == frozenset(g) - below - {x, y}:
        return (f"adjust for every non-descendant of {format_path([x])}. "
                f"Descendants of {format_path([x])}: {format_set(below)}.")
    return None


def _frontdoor(g: CausalGraph, q: Mapping[str, Any], obj: frozenset[str], rank: Rank) -> str | None:
    x, y = q["treatment"], q["outcome"]
    if obj != g.children(x) - {y}:
        return None
    return (f"the children of {format_path([x])} intercept its directed paths. "
            + _lookup("out of", x, [(x, c) for c in g.children(x)], rank))


def _separation(g: CausalGraph, q: Mapping[str, Any], obj: frozenset[str], rank: Rank) -> str | None:
    ends = frozenset(q["x"]) | frozenset(q["y"])
    parents = {side: frozenset().union(*(g.parents(n) for n in q[side])) - ends for side in ("x", "y")}
    for sides in (("x", "y"), ("x",), ("y",)):
        if obj == frozenset().union(*(parents[s] for s in sides)):
            named = sorted(n for s in sides for n in q[s])
            return f"condition on the parents of {format_set(named)}. " + " ".join(_into(g, n, rank) for n in named)
    if obj == frozenset(g) - ends:
        return f"condition on every node but {format_set(ends)}."
    return None


def _blocking(g: CausalGraph, q: Mapping[str, Any], obj: frozenset[str], rank: Rank) -> str | None:
    nodes, types = q["path"]
    colliders = [n for i, n in enumerate(nodes[1:-1], start=1)
                 if types[i - 1] in ("->", "<->") and types[i] in ("<-", "<->")]
    if not obj:
        return f"the path has a collider at {format_set(colliders)}, so the empty set blocks it." if colliders else None
    if len(obj) == 1 and not colliders and next(iter(obj)) in nodes[1:-1]:
        return f"the path has no collider, so conditioning on its interior node {format_set(obj)} blocks it."
    return None


def _cycle(g: CausalGraph, q: Mapping[str, Any], obj: tuple[str, ...], rank: Rank) -> str | None:
    if not obj:
        return "no edge sequence returns to its start: the graph has no directed cycle."
    if len(obj) == 2:
        a, b = obj
        return f"a pair of opposite edges is a cycle: {format_path([a, b])} and {format_path([b, a])}."
    return f"no pair of opposite edges; a shortest cycle: {format_path(list(obj) + [obj[0]])}."


_RATIONALES: dict[str, Callable[[CausalGraph, Mapping[str, Any], Any, Rank], str | None]] = {
    "backdoor_set": _backdoor,
    "frontdoor_set": _frontdoor,
    "separation_set": _separation,
    "blocking_set": _blocking,
    "cycle_witness": _cycle,
}
RATIONALE_TASKS = tuple(_RATIONALES)


def rule_rationale(problem: Problem, obj: Any, style: str = "rule", cue_first: bool = False) -> str | None:
    """The one-line rationale (``Rule: ...``) of answer ``obj`` to ``problem``, or None when the family has
    none or no rule of it gives ``obj``; ``style`` ``scan`` writes each edge lookup as a scan first;
    ``cue_first`` writes the edges into a node child first (``Edges into L: L <- K.``)."""
    if style not in STYLES:
        raise ValueError(f"rule_rationale: style must be one of {STYLES}, got {style!r}")
    explain = _RATIONALES.get(problem.task)
    if explain is None or problem.graph is None:
        return None
    fam = get_family(problem.task)
    order = graph_line_order(problem)
    edges = order.directed if order is not None else sorted(problem.graph.directed)
    rank = Rank(tuple((a, b) for a, b in edges), scan=style == "scan", cue_first=cue_first)
    text = explain(problem.graph, fam.normalize_query(problem), fam.coerce_object(obj), rank)
    return None if text is None else RATIONALE_PREFIX + text


def with_rationale(trace: str, rationale: str | None) -> str:
    """``trace`` with ``rationale`` as its own paragraph after the QUERY line (unchanged when None)."""
    if rationale is None:
        return trace
    head, sep, tail = trace.partition("\nSTRATEGY:")
    if not sep:
        raise ValueError("with_rationale: the trace has no STRATEGY line")
    return f"{head}\n\n{rationale}\n\nSTRATEGY:{tail}"


# ---- reading a policy's rationales back ------------------------------------------------------------
# a lookup a rationale states: its head, kind, node and the edges listed (up to the period that ends it)
LOOKUP_RE = re.compile(r"(Scan for edges|Edges) (into|out of) (.+?): (.+?)\.(?= Edges | Scan |\n|$)", re.MULTILINE)


class Counts:
    """A frozen dataclass of counts that adds field by field (checks summed over many replies)."""

    def __add__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return type(self)(*(a + b for a, b in zip(astuple(self), astuple(other))))


@dataclass(frozen=True)
class LookupCheck(Counts):
    """The edge lookups of the rationales in some traces, checked against their graphs: ``lookups`` stated,
    ``exact`` of them listing exactly the node's edges; ``listed`` edges, ``listed_true`` of them the node's,
    ``in_graph`` of them in the graph at all; ``true``: the node's edges over all lookups. Scans (the ``scan``
    style): ``scans`` stated, ``complete`` of them listing every edge of the graph once; ``scanned`` edges,
    ``scanned_in_graph`` of them in the graph, ``marks_right`` of them marked yes exactly when they run into
    (out of) the node, ``not_the_node_s`` of them that do not (the marks a scan writing "no" everywhere gets
    right: the baseline ``marks_right`` must beat). ``empty`` lookups list no edge although the node has some
    (``Edges into X: none.`` where X has parents: a small model's fallback when it cannot find the edges)."""

    lookups: int = 0
    exact: int = 0
    listed: int = 0
    listed_true: int = 0
    in_graph: int = 0
    true: int = 0
    scans: int = 0
    complete: int = 0
    scanned: int = 0
    scanned_in_graph: int = 0
    marks_right: int = 0
    not_the_node_s: int = 0
    empty: int = 0


def _edge(text: str) -> tuple[str, ...]:
    if " <- " in text and " -> " not in text:
        child, _, parent = text.partition(" <- ")
        return parent, child
    return tuple(text.split(" -> ", 1))


def _check_scan(kind: str, node: str, text: str, g: CausalGraph) -> LookupCheck:
    items = [] if text == "none" else [item.rpartition(" ") for item in text.split(", ")]
    edges = [_edge(e) for e, _, _ in items]
    right = sum(1 for e, (_, _, mark) in zip(edges, items)
                if len(e) == 2 and mark == ("yes" if _touches(e, kind, node) else "no"))
    complete = len(edges) == len(g.directed) and set(edges) == set(g.directed)
    return LookupCheck(scans=1, complete=int(complete), scanned=len(edges),
                       scanned_in_graph=sum(1 for e in edges if e in g.directed), marks_right=right,
                       not_the_node_s=sum(1 for e in edges if len(e) == 2 and not _touches(e, kind, node)))


def lookup_names(trace: str) -> frozenset[str] | None:
    """The nodes a trace's rationale finds by its lookups: over every ``Edges into X: ...`` /
    ``Edges out of X: ...`` it states, each listed edge's other end (a parent of X, a child of X; a listed item
    that is not an edge counts as the name it is); None when it states no lookup. Scans are not lookups (their
    ``Edges ...`` sentence after the scan is)."""
    lookups = [(kind, text) for head, kind, _, text in LOOKUP_RE.findall(trace) if head != "Scan for edges"]
    if not lookups:
        return None
    return frozenset(e[1] if kind == "out of" and len(e) == 2 else e[0]
                     for kind, text in lookups for e in listed_edges(text))


def check_lookups(trace: str, g: CausalGraph) -> LookupCheck:
    """Each ``Edges into X: ...`` / ``Edges out of X: ...`` a trace's rationale states, against ``g`` (a node
    that is not in ``g``: a lookup that is never exact), and each ``Scan for edges into X: ...`` (see
    :class:`LookupCheck`). Names are read as written, unquoted."""
    out = LookupCheck()
    for head, kind, node, text in LOOKUP_RE.findall(trace):
        if head == "Scan for edges":
            out += _check_scan(kind, node, text, g)
            continue
        listed = set(listed_edges(text))
        true: set[tuple[str, ...]] = set(node_edges(g, kind, node)) if node in g.nodes else set()
        out += LookupCheck(1, int(node in g.nodes and listed == true), len(listed), len(listed & true),
                           sum(1 for e in listed if len(e) == 2 and e in g.directed), len(true),
                           empty=int(not listed and bool(true)))
    return out
