"""`Problem`: one causal (or propositional) question, in supplied-graph or constructed-graph mode."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from calver.verifier.graph import CausalGraph, GraphClass, GraphError, check_name

MODES = ("supplied", "constructed")
# (field, accepted JSON types, description) for Problem.from_dict
_FIELD_TYPES = (
    ("task", str, "a task name (a string)"),  # required: also refused when null (below)
    ("query", dict, "an object"),
    ("graph", (str, dict, list, CausalGraph), "graph text or a JSON edge list / parents map"),
    ("graph_format", str, "a format name (a string)"),
    ("graph_class", (str, GraphClass), "a graph class name (a string)"),
    ("text", str, "a string"),
    ("mode", str, "a string"),
    ("variables", list, "a list of names"),
    ("data", dict, "an object"),
    ("meta", dict, "an object"),
    ("id", (str, int), "a string"),
    ("source_id", (str, int), "a string"),
)


class ProblemError(ValueError):
    """A problem definition is malformed; the message names the offending field."""


@dataclass
class Problem:
    """A query about a graph.

    - ``task``: a registered task family name (``backdoor_set`` ...).
    - ``query``: the family's query dict (``treatment``, ``outcome``, ``variant`` ...).
    - ``graph``: the source graph G*. Both modes judge b3-b6 on it when present
      (``TaskFamily.verification_object``); ``supplied`` mode also shows it to the policy, while in
      ``constructed`` mode it is a label the firewall strips. A constructed-mode problem without it is
      judged on each trace's own GRAPH (``Verdict.grounded`` is False).
    - ``text``: the prompt's description (prose for constructed mode; optional otherwise).
    - ``variables``: the prompt's variables (constructed mode: a trace graph may use only these).
    - ``data``: family payload visible to the policy (CPTs for ATE, statements for K&K).
    - ``meta``: provenance and analysis-only fields (never read by scoring).
    """

    task: str
    query: Mapping[str, Any]
    graph: CausalGraph | None = None
    text: str | None = None
    mode: str = "supplied"
    graph_class: GraphClass | None = None
    variables: tuple[str, ...] | None = None
    data: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    source_id: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ProblemError(f"field 'mode' must be one of {MODES}, got {self.mode!r}")
        if not isinstance(self.query, dict):
            raise ProblemError(f"field 'query' must be a mapping, got {type(self.query).__name__}")
        if self.graph_class is None and self.graph is not None:
            self.graph_class = self.graph.kind
        elif self.graph_class is not None:
            try:
                self.graph_class = GraphClass.parse(self.graph_class)
            except GraphError as e:
                raise ProblemError(f"field 'graph_class': {e}") from None
        if self.variables is None and self.graph is not None:
            self.variables = tuple(self.graph.nodes)
        elif self.variables is not None:
            if isinstance(self.variables, (str, bytes)) or not isinstance(self.variables, (list, tuple)):
                raise ProblemError(f"field 'variables' must be a list of names, got {type(self.variables).__name__}")
            for v in self.variables:
                try:
                    check_name(v)
                except GraphError as e:
                    raise ProblemError(f"field 'variables': {e}") from None
            self.variables = tuple(self.variables)
        for name in ("data", "meta"):
            if not isinstance(getattr(self, name), dict):
                raise ProblemError(f"field {name!r} must be an object, got {type(getattr(self, name)).__name__}")
        if not self.source_id:
            self.source_id = self.id

    # ---- JSON ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Problem":
        """Build from the documented JSON form (see ``calver verify --help``). ``graph`` may also be a
        parsed :class:`CausalGraph` (``to_dict(parsed_graph=True)``): it is used as is, not re-parsed,
        unless ``graph_class`` names another class."""
        from calver.verifier.parsers import parse_graph

        if not isinstance(d, dict):
            raise ProblemError("a problem must be a JSON object")
        for key in ("task", "query"):
            if key not in d:
                raise ProblemError(f"problem is missing required field {key!r}")
        known = {
            "task", "query", "graph", "graph_format", "graph_class", "text", "mode",
            "variables", "data", "id", "source_id", "meta",
        }
        unknown = sorted(set(d) - known)
        if unknown:
            raise ProblemError(f"unknown problem field(s): {', '.join(unknown)}")
        # JSON field types, checked here so a wrong one is a ProblemError naming it, not a TypeError later.
        if not isinstance(d["task"], str):
            raise ProblemError(f"field 'task' must be a task name (a string), got {type(d['task']).__name__}")
        for key, types, what in _FIELD_TYPES:
            if d.get(key) is not None and not isinstance(d[key], types):
                raise ProblemError(f"field {key!r} must be {what}, got {type(d[key]).__name__}")
        graph = None
        raw = d.get("graph")
        if isinstance(raw, CausalGraph) and d.get("graph_class") in (None, raw.kind):
            graph = raw
        elif raw is not None:
            if isinstance(raw, CausalGraph):  # another class: validated by a parse, as for its text
                raw = raw.to_text()
            try:
                text = raw if isinstance(raw, str) else json.dumps(raw)
                graph = parse_graph(text, fmt=d.get("graph_format"), kind=d.get("graph_class"))
                order = _declared_order(graph, d.get("variables"))
                if order is not None:
                    graph = _reordered(order, graph.directed, graph.bidirected, graph.kind)
            except GraphError as e:
                raise ProblemError(f"field 'graph': {e}") from None
            except (RecursionError, ValueError) as e:  # json.dumps of a hostile structure
                raise ProblemError(f"field 'graph': not a usable graph ({type(e).__name__})") from None
        return cls(
            task=d["task"],
            query=dict(d["query"]) if isinstance(d["query"], dict) else d["query"],
            graph=graph,
            text=d.get("text"),
            mode=d.get("mode", "supplied"),
            graph_class=d.get("graph_class"),
            variables=d.get("variables"),
            data=dict(d.get("data") or {}),
            id=str(d.get("id", "")),
            source_id=str(d.get("source_id", d.get("id", ""))),
            meta=dict(d.get("meta") or {}),
        )

    def to_dict(self, *, parsed_graph: bool = False) -> dict[str, Any]:
        """The JSON form; ``parsed_graph``: the :class:`CausalGraph` itself under ``graph`` (not JSON;
        ``from_dict`` takes it back without a parse)."""
        graph = self.graph if parsed_graph or self.graph is None else self.graph.to_text()
        return {
            "task": self.task,
            "query": dict(self.query),
            "graph": graph,
            "graph_class": self.graph_class.value if self.graph_class else None,
            "text": self.text,
            "mode": self.mode,
            "variables": list(self.variables) if self.variables is not None else None,
            "data": self.data,
            "id": self.id,
            "source_id": self.source_id,
            "meta": self.meta,
        }

    @property
    def family(self):
        from calver.verifier.registry import get_family

        return get_family(self.task)


def _declared_order(graph: CausalGraph, variables: Any) -> tuple[str, ...] | None:
    """``variables`` as a node order for ``graph``, where it names exactly its nodes in another order (else
    None): the arrow text ``to_dict`` writes lists nodes as its edges meet them, and a matrix or parents map
    the generator rendered from the graph shows them in the graph's own order."""
    if not isinstance(variables, list) or tuple(variables) == graph.nodes or len(variables) != len(graph.nodes) \
            or not all(isinstance(v, str) for v in variables) or set(variables) != set(graph.nodes):
        return None
    return tuple(variables)


@functools.lru_cache(maxsize=4096)
def _reordered(order: tuple[str, ...], directed: frozenset, bidirected: frozenset, kind: GraphClass) -> CausalGraph:
    """The parsed graph with its nodes in ``order``, built once per graph and order and then shared (as the parse
    cache shares a parse): a pool or a training set loads the same rows many times. Keyed on the edges and the
    class, since graph equality ignores the class."""
    return CausalGraph.build(order, sorted(directed), sorted(bidirected), kind, validate=False)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_containers(obj: Any) -> Any:
    """``obj`` with every dict, list and set copied at any depth (subclasses as their base type); other
    values are shared, frozensets and hashable tuples too (they hold only immutable values). A deep copy
    of JSON-like data; ``RecursionError`` past Python's recursion limit."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out[k] = v if type(v) in _ATOMS else copy_containers(v)
        return out
    if isinstance(obj, list):
        return [v if type(v) in _ATOMS else copy_containers(v) for v in obj]
    if isinstance(obj, set):
        return set(obj)
    if isinstance(obj, tuple):
        try:
            hash(obj)
            return obj
        except TypeError:  # it holds a list or dict
            return tuple(copy_containers(v) for v in obj)
    return obj
