"""`cycle_witness`: exhibit a directed cycle in a directed graph (or ``none`` if it is acyclic)."""

from __future__ import annotations

from itertools import combinations
from typing import Any, Iterator, Mapping

from calver.verifier.contract import format_path
from calver.verifier.family import PASS, Check, node_order
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.registry import register
from calver.verifier.tasks.base import NodeSetFamily
from calver.verifier.values import cached_path


def _canonical_cycle(nodes: tuple[str, ...]) -> tuple[str, ...]:
    """Rotation-invariant form: start at the smallest name."""
    if not nodes:
        return ()
    i = nodes.index(min(nodes))
    return tuple(nodes[i:] + nodes[:i])


def _shortest_cycle_through(g: CausalGraph, s: str) -> tuple[str, ...] | None:
    """A shortest directed cycle through ``s`` (breadth-first from its children), or None."""
    prev: dict[str, str] = {}
    frontier = sorted(g.children(s))
    for c in frontier:
        prev[c] = s
    while frontier:
        nxt = []
        for u in frontier:
            if u == s:
                path = [s]
                v = prev[s]
                while v != s:
                    path.append(v)
                    v = prev[v]
                return (s,) + tuple(reversed(path[1:]))
            for w in sorted(g.children(u)):
                if w not in prev:
                    prev[w] = u
                    nxt.append(w)
        frontier = nxt
    return None


@register
class CycleWitness(NodeSetFamily):
    name = "cycle_witness"
    description = "exhibit one directed cycle of the graph as a closed node sequence (none if acyclic)"
    operation = "find_cycle"
    answer_type = "path"
    graph_classes = (GraphClass.DIRECTED,)
    variants = ("any",)
    query_keys = ("variant",)
    query_types = {"variant": "word"}
    object_arg = "cycle"
    witness_arg = "cycle"
    large_class = True
    example_query = {"variant": "any"}
    slot_docs = {
        "STRATEGY": "the cycle as a closed sequence, e.g. A -> B -> C -> A (none if the graph is acyclic)",
        "DERIVATION": "find_cycle(cycle=A -> B -> C -> A)",
        "RESULT": "valid or invalid (whether every edge of the cycle exists and it closes)",
        "ANSWER": "the cycle only",
    }

    def parse_object(self, text: str) -> tuple[str, ...]:
        """The cycle's nodes in edge order (closing node dropped). Arrows keep their meaning: all
        ``->`` is the cycle as written, all ``<-`` the same cycle written backwards (so the node
        order is reversed); ``<->`` or mixed directions name no directed cycle and do not parse.
        A bare node list (``A, B, C``) is read forwards."""
        if text.strip().strip(".").lower() in ("none", "no cycle", "acyclic", "[]"):
            return ()
        nodes, types = cached_path(text)
        nodes = list(nodes)
        kinds = set(types or ())
        if "<->" in kinds:
            raise ValueError("a directed cycle has only directed edges; <-> is a bidirected edge")
        if len(kinds) > 1:
            raise ValueError("a directed cycle runs one way: its arrows mix -> and <-")
        if kinds == {"<-"}:
            nodes.reverse()
        if len(nodes) > 1 and nodes[0] == nodes[-1]:
            nodes = nodes[:-1]
        if len(set(nodes)) != len(nodes):
            raise ValueError("a cycle witness may not repeat a node")
        return tuple(nodes)

    def coerce_object(self, obj: Any) -> tuple[str, ...]:
        if isinstance(obj, str):
            return self.parse_object(obj)
        nodes = [str(n) for n in obj]
        if len(nodes) > 1 and nodes[0] == nodes[-1]:
            nodes = nodes[:-1]
        return tuple(nodes)

    def format_object(self, obj: Any) -> str:
        nodes = list(obj)
        return format_path(nodes + nodes[:1]) if nodes else "none"

    def canonical_answer_key(self, obj: Any) -> Any:
        return _canonical_cycle(tuple(obj))

    def object_from_json(self, data: Any) -> tuple[str, ...]:
        return tuple(data)

    def answer_candidates(self, g: CausalGraph, answer: Any, rng: Any) -> Iterator[Any]:
        """``none``, single nodes, node pairs (seeded order), then the answer's cycle reversed."""
        order = node_order(g, rng)
        yield ()
        yield from ((n,) for n in order)
        yield from combinations(order, 2)
        if answer:
            yield tuple(reversed(tuple(answer)))

    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
        from calver.verifier.primitives import is_directed_cycle

        nodes = tuple(obj)
        if not nodes:
            return PASS if g.acyclic else Check.fail("the graph has a directed cycle, so 'none' is wrong")
        unknown = [n for n in nodes if n not in g]
        if unknown:
            return Check.fail(f"{', '.join(unknown)} not in the graph")
        if is_directed_cycle(g, list(nodes)):
            return PASS
        missing = [f"{a}->{b}" for a, b in zip(nodes, nodes[1:] + nodes[:1]) if not g.has_edge(a, b)]
        return Check.fail(f"{self.format_object(nodes)} is not a directed cycle: missing edge(s) {', '.join(missing)}")

    def rule_objects(self, g, query):
        # read off the edge list: a reverse-edge pair (A -> B and B -> A) first, the commonest cycle
        # in CLEAR's directed graphs; else one shortest cycle (breadth-first); none when acyclic
        if g.acyclic:
            yield ()
            return
        names = sorted(g)
        for a in names:
            for b in sorted(g.children(a)):
                if a < b and g.has_edge(b, a):
                    yield (a, b)
        best: tuple[str, ...] | None = None
        for s in names:
            cyc = _shortest_cycle_through(g, s)
            if cyc is not None and (best is None or len(cyc) < len(best)):
                best = cyc
        if best is not None:
            yield best

    def validity_class(self, g: CausalGraph, query: Mapping[str, Any], limit: int | None = None) -> list[Any]:
        import networkx as nx

        if g.acyclic:
            return [()]
        out = []
        for cyc in nx.simple_cycles(g.to_networkx()):
            out.append(_canonical_cycle(tuple(cyc)))
            if limit is not None and len(out) >= limit:
                break
        return sorted(set(out), key=lambda c: (len(c), c))

    def derivation_slot(self, g, query, obj, witnesses=None):
        return f"{self.operation}(cycle={self.format_object(obj)})"

    def question_text(self, query: Mapping[str, Any]) -> str:
        return "Find one directed cycle in the graph (answer none if the graph is acyclic)."
