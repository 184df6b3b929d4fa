"""Task registry: each task family registers its parser, semantic predicate and consistency check.

A family is a subclass of :class:`TaskFamily` decorated with :func:`register`. The scorer
(`calver.verifier.scoring`) runs the same six-bit pipeline for every family and calls the family's
hooks; families override only what differs. Unregistered tasks fail closed in the scorer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.problem import Problem, ProblemError

_REGISTRY: dict[str, "TaskFamily"] = {}


def register(cls: type["TaskFamily"]) -> type["TaskFamily"]:
    """Class decorator: validate the family's declaration and register one instance."""
    for attr in ("name", "operation", "description", "answer_type"):
        if not isinstance(getattr(cls, attr, None), str) or not getattr(cls, attr):
            raise TypeError(f"task family {cls.__name__} must declare a non-empty str {attr!r}")
    if cls.answer_type not in ANSWER_TYPES:
        raise TypeError(f"{cls.__name__}.answer_type must be one of {ANSWER_TYPES}")
    for key in cls.query_keys:
        if key not in cls.query_types:
            raise TypeError(f"{cls.__name__}: query key {key!r} has no entry in query_types")
    if cls.name in _REGISTRY and type(_REGISTRY[cls.name]) is not cls:
        raise TypeError(f"task family {cls.name!r} is already registered by {type(_REGISTRY[cls.name]).__name__}")
    _REGISTRY[cls.name] = cls()
    return cls


def get_family(name: str) -> "TaskFamily":
    fam = _REGISTRY.get(name) if _BUILTINS_LOADED else None  # the hot path: one dict lookup
    if fam is not None:
        return fam
    _load_builtin_families()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unregistered task {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def families() -> dict[str, "TaskFamily"]:
    _load_builtin_families()
    return dict(sorted(_REGISTRY.items()))


_BUILTINS_LOADED = False


def _load_builtin_families() -> None:
    global _BUILTINS_LOADED
    import calver.verifier.tasks  # noqa: F401  (registers the built-in families on import)

    _BUILTINS_LOADED = True


ANSWER_TYPES = ("set", "path", "bool", "number", "assignment", "node")


@dataclass
class Check:
    """One bit's outcome."""

    ok: bool
    reason: str = ""

    @classmethod
    def fail(cls, reason: str) -> "Check":
        return cls(False, reason)


PASS = Check(True)


@dataclass
class TraceContext:
    """Everything the bit checks of one trace may read. ``g_ver`` is the verification graph."""

    problem: Problem
    query: dict[str, Any]  # the problem's normalized query
    slots: Any  # contract.SlotParse
    g_ver: Any = None  # CausalGraph (or a family's formal object, e.g. K&K constraints)
    trace_graph: Any = None
    strategy: Any = None
    strategy_error: str = ""
    answer: Any = None
    answer_error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class TaskFamily:
    """Base class for task families. Subclasses declare the class attributes and the predicate."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""  # one line for the contract instructions
    operation: ClassVar[str] = ""  # the derivation record's operation name
    answer_type: ClassVar[str] = ""
    graph_classes: ClassVar[tuple[GraphClass, ...]] = (GraphClass.DAG, GraphClass.ADMG)
    query_keys: ClassVar[tuple[str, ...]] = ()  # keys the QUERY slot must bind
    query_types: ClassVar[dict[str, str]] = {}  # key -> node | set | path | number | word | list
    variants: ClassVar[tuple[str, ...]] = ("any",)
    graph_label: ClassVar[str] = "GRAPH"
    slot_docs: ClassVar[dict[str, str]] = {}  # slot -> what this family writes there
    example_query: ClassVar[dict[str, Any]] = {}
    query_defaults: ClassVar[dict[str, str]] = {"variant": "any"}  # optional query keys (QUERY may omit them at the default)

    # ---- problem side ------------------------------------------------------------------
    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        """Validate and normalize ``problem.query``; raise ProblemError naming the bad field."""
        q = dict(problem.query)
        out: dict[str, Any] = {}
        for key in self.query_keys:
            if key not in q:
                if key in self.query_defaults:
                    q[key] = self.query_defaults[key]
                else:
                    raise ProblemError(f"query for task {self.name!r} is missing field {key!r}")
            try:
                out[key] = normalize_value(self.query_types[key], q[key])
            except (ValueError, GraphError) as e:
                raise ProblemError(f"query field {key!r}: {e}") from None
        if "variant" in out and out["variant"] not in self.variants:
            raise ProblemError(f"query field 'variant' must be one of {self.variants}, got {out['variant']!r}")
        graph = problem.graph
        if graph is not None:
            for key in self.query_keys:
                kind = self.query_types[key]
                if kind == "node":
                    names = {out[key]}
                elif kind in ("set", "path", "list"):
                    names = set(out[key])
                elif kind == "typed_path":
                    names = set(out[key][0])
                else:
                    names = set()
                missing = [n for n in names if n not in graph]
                if missing:
                    raise ProblemError(f"query field {key!r} names node(s) not in the graph: {', '.join(sorted(missing))}")
        if problem.graph_class is not None and problem.graph_class not in self.graph_classes:
            raise ProblemError(
                f"task {self.name!r} takes graph classes {[c.value for c in self.graph_classes]}, "
                f"not {problem.graph_class.value}"
            )
        return out

    # ---- the problem's source (what traces are judged on) ----------------------------------
    def verification_object(self, problem: Problem) -> Any:
        """The structure every trace is judged on: the problem's source (G* for graph families), or
        None when the problem carries none (a constructed-mode problem stripped of its graph).

        Both modes judge b3-b6 on the source when it exists; a constructed-mode trace's own graph is
        only a fallback for sourceless problems, whose score then measures consistency, not
        correctness (``TraceScore.grounded`` is False)."""
        return problem.graph

    # ---- the graph slot (b1) --------------------------------------------------------------
    def parse_graph_slot(self, text: str, problem: Problem) -> Any:
        from calver.verifier.parsers import parse_graph

        return parse_graph(text, kind=problem.graph_class)

    def check_graph(self, trace_graph: Any, problem: Problem) -> Check:
        """b1 given a parsed graph slot (class already enforced by the parser)."""
        if problem.mode == "supplied":
            if problem.graph is None:
                return Check.fail("problem supplies no graph")
            if trace_graph == problem.graph:
                return PASS
            return Check.fail(_graph_diff(trace_graph, problem.graph))
        allowed = set(problem.variables or ())
        extra = sorted(set(trace_graph.nodes) - allowed)
        if extra:
            return Check.fail(f"GRAPH names variable(s) not in the prompt: {', '.join(extra[:5])}")
        source = problem.graph
        if source is not None and (trace_graph.directed != source.directed or trace_graph.bidirected != source.bidirected):
            # Constructed mode with its source: the edge set must be the source's (a variable the
            # trace leaves out may only be an isolated one), so an invented graph loses b1.
            return Check.fail(_graph_diff(trace_graph, source, "the graph the prompt describes", nodes=False))
        return PASS

    # ---- objects -------------------------------------------------------------------------
    def parse_object(self, text: str) -> Any:
        """Parse a STRATEGY/ANSWER object; raise ValueError (or GraphError) with a reason."""
        raise NotImplementedError

    def predicate(self, g: CausalGraph, query: dict[str, Any], obj: Any) -> Check:
        """The task's semantic validity predicate on graph ``g``."""
        raise NotImplementedError

    def grade(self, problem: Problem, obj: Any) -> bool:
        """Correctness of a final answer object on the problem's source graph G*."""
        if problem.graph is None:
            raise ProblemError(f"cannot grade task {self.name!r} without the source graph")
        return self.predicate(problem.graph, self.normalize_query(problem), obj).ok

    def validity_class(self, g: CausalGraph, query: dict[str, Any], limit: int | None = None) -> list[Any]:
        raise NotImplementedError(f"{self.name} does not enumerate its validity class")

    # ---- bits 3-6: overridden by families whose semantics differ -----------------------------
    def check_strategy(self, ctx: TraceContext) -> Check:
        raise NotImplementedError

    def check_derivation(self, ctx: TraceContext) -> Check:
        raise NotImplementedError

    def derivation_call(self, ctx: TraceContext, bound: tuple[str, ...]) -> tuple[dict[str, str] | None, Check]:
        """Parse DERIVATION as ``operation(key=value, ...)``: the operation must be the family's and
        each ``bound`` argument must equal the query's value. Returns (args, PASS) or (None, failure)."""
        from calver.verifier.contract import parse_call

        text = ctx.slots.get("DERIVATION")
        if text is None:
            return None, Check.fail(ctx.slots.problems["DERIVATION"])
        op, args = parse_call(text)
        if op.lower() != self.operation:
            return None, Check.fail(f"DERIVATION operation is {op!r}, expected {self.operation!r}")
        for key in bound:
            if key not in args:
                return None, Check.fail(f"DERIVATION lacks argument {key!r}")
            kind = self.query_types[key]
            if not values_equal(kind, normalize_value(kind, args[key]), ctx.query[key]):
                return None, Check.fail(f"DERIVATION {key}={args[key]} is not bound to the query")
        return args, PASS

    def check_result(self, ctx: TraceContext) -> Check:
        raise NotImplementedError

    def check_answer(self, ctx: TraceContext) -> Check:
        raise NotImplementedError

    # ---- rendering ----------------------------------------------------------------------------
    def format_object(self, obj: Any) -> str:
        raise NotImplementedError

    def question_text(self, query: dict[str, Any]) -> str:
        """The natural-language question for a prompt."""
        raise NotImplementedError

    def canonical_trace(self, problem: Problem, obj: Any) -> str:
        """A six-slot trace for answer ``obj`` that scores 6 when ``obj`` is valid."""
        raise NotImplementedError

    def canonical_answer_key(self, obj: Any) -> Any:
        """A hashable canonical form for exact voting."""
        return obj


# ---- value normalization shared by QUERY binding and derivation arguments ----------------------


def normalize_value(kind: str, value: Any) -> Any:
    """Normalize a query/derivation value of type ``kind``; raises ValueError (never TypeError) on a
    value of the wrong shape, so a malformed problem surfaces as a ProblemError naming its field."""
    from calver.verifier.parsers import parse_node_list

    if kind == "node":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a node name, got {_short(value)}")
        return value.strip().strip("'\"`")
    if kind == "set":
        if isinstance(value, str):
            from calver.verifier.tasks.base import cached_node_set

            return cached_node_set(value)
        return frozenset(_names(value, "a set of node names"))
    if kind in ("path", "list"):
        if isinstance(value, str):
            return tuple(parse_node_list(value))
        return tuple(_names(value, "a list of node names"))
    if kind == "typed_path":
        from calver.verifier.parsers import parse_path

        if isinstance(value, str):
            nodes, types = parse_path(value)
        elif isinstance(value, dict):
            if "nodes" not in value:
                raise ValueError("expected a path object with 'nodes'")
            nodes, types = value["nodes"], value.get("types")
        else:
            nodes, types = value, None
        nodes = _names(nodes, "a path (a list of node names)")
        if types and (not isinstance(types, (list, tuple)) or not all(isinstance(t, str) for t in types)):
            raise ValueError(f"expected edge types as a list of strings, got {_short(types)}")
        return (tuple(nodes), tuple(types) if types else None)
    if kind == "number":
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"expected a number, got {_short(value)}") from None
        if not math.isfinite(x):
            raise ValueError(f"expected a finite number, got {_short(value)}")
        return x
    if kind == "word":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"expected a word, got {_short(value)}")
        return str(value).strip().strip("'\"`").lower()
    if kind == "bool":
        return parse_bool(value)
    raise ValueError(f"unknown query value type {kind!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _names(value: Any, what: str) -> list[str]:
    """Node names of a JSON list (str or int members); ValueError for anything else."""
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"expected {what}, got {_short(value)}")
    bad = [v for v in value if not isinstance(v, (str, int)) or isinstance(v, bool)]
    if bad:
        raise ValueError(f"expected {what}, but it holds {_short(bad[0])}")
    return [str(v) for v in value]


def values_equal(kind: str, a: Any, b: Any) -> bool:
    if kind == "number":
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


_TRUE = {"true", "yes", "valid", "holds", "reachable", "1", "y", "t", "satisfied", "consistent", "blocked", "separated"}
_FALSE = {"false", "no", "invalid", "fails", "unreachable", "0", "n", "f", "unsatisfied", "inconsistent", "open", "connected", "not valid"}


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().strip("'\"`*.").lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected a yes/no (true/false, valid/invalid) value, got {str(value)[:40]!r}")


def _graph_diff(got: CausalGraph, want: CausalGraph, what: str = "the supplied graph", nodes: bool = True) -> str:
    parts = []
    miss_n = sorted(set(want.nodes) - set(got.nodes)) if nodes else []
    extra_n = sorted(set(got.nodes) - set(want.nodes)) if nodes else []
    if miss_n:
        parts.append(f"missing node(s) {', '.join(miss_n[:4])}")
    if extra_n:
        parts.append(f"extra node(s) {', '.join(extra_n[:4])}")
    md = sorted(want.directed - got.directed)
    ed = sorted(got.directed - want.directed)
    mb = sorted(want.bidirected - got.bidirected)
    eb = sorted(got.bidirected - want.bidirected)
    if md:
        parts.append("missing edge(s) " + ", ".join(f"{a}->{b}" for a, b in md[:4]))
    if ed:
        parts.append("extra edge(s) " + ", ".join(f"{a}->{b}" for a, b in ed[:4]))
    if mb:
        parts.append("missing edge(s) " + ", ".join(f"{a}<->{b}" for a, b in mb[:4]))
    if eb:
        parts.append("extra edge(s) " + ", ".join(f"{a}<->{b}" for a, b in eb[:4]))
    return f"GRAPH differs from {what}: " + "; ".join(parts)
