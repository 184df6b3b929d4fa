"""The task-family base class: every per-task decision the scorer, generators, selectors and audits
need, so callers never duck-type a family or switch on its answer type.

A family declares its class attributes and overrides the hooks that differ; the answer-type bases in
:mod:`calver.verifier.tasks.base` (node sets, paths) fill in most of them. Register it with
:func:`calver.verifier.registry.register`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping

from calver.config import unknown_key_hints
from calver.verifier.contract import format_kv, parse_call
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.values import format_value, graph_diff, normalize_value, values_equal

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
    query: Mapping[str, Any]  # the problem's normalized query (read-only)
    slots: Any  # contract.SlotParse
    g_ver: Any = None  # CausalGraph (or a family's formal object, e.g. K&K constraints)
    trace_graph: Any = None
    strategy: Any = None
    strategy_error: str = ""
    answer: Any = None
    answer_error: str = ""
    extra: dict[Any, Any] = field(default_factory=dict)  # per-trace scratch (e.g. the predicate for b3/b5)
    memo: dict[Any, Any] | None = None  # the problem's memo: results that depend only on problem + key
    remember: Any = None  # remember(key, size, value): store in ``memo`` within its byte budget


_UNSET = object()
# What a malformed candidate object raises while audits coerce, compare, test or format it.
_OBJECT_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, GraphError)


def node_order(g: Any, rng: Any) -> list[str]:
    """``g``'s nodes in a seeded random order (none for a non-graph verification object)."""
    import numpy as np

    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    nodes = list(g.nodes) if isinstance(g, CausalGraph) else []
    return [nodes[i] for i in rng.permutation(len(nodes))]


class TaskFamily:
    """Base class for task families. Subclasses declare the class attributes and the predicate."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""  # one line for the contract instructions
    operation: ClassVar[str] = ""  # the derivation record's operation name
    answer_type: ClassVar[str] = ""  # one of ANSWER_TYPES
    graph_classes: ClassVar[tuple[GraphClass, ...]] = (GraphClass.DAG, GraphClass.ADMG)
    query_keys: ClassVar[tuple[str, ...]] = ()  # keys the QUERY slot must bind
    query_types: ClassVar[dict[str, str]] = {}  # key -> node | set | path | number | word | list
    variants: ClassVar[tuple[str, ...]] = ("any",)
    graph_label: ClassVar[str] = "GRAPH"
    slot_docs: ClassVar[dict[str, str]] = {}  # slot -> what this family writes there
    example_query: ClassVar[dict[str, Any]] = {}
    # optional query keys (QUERY may omit them at the default)
    query_defaults: ClassVar[dict[str, str]] = {"variant": "any"}
    object_arg: ClassVar[str | None] = None  # derivation argument that repeats the STRATEGY object
    # The slots whose text check_derivation reads (besides the problem and the verification object);
    # when declared, the scorer computes the DERIVATION bit once per distinct such texts per problem.
    derivation_reads: ClassVar[tuple[str, ...] | None] = None
    witness_arg: ClassVar[str | None] = None  # derivation argument listing witness paths
    # What generators and the firewall need to know (read by calver.data_gen / calver.infer.firewall):
    many_answers: ClassVar[bool] = False  # a query may have several valid objects (find-one-valid tasks)
    single_answer_variants: ClassVar[tuple[str, ...]] = ()  # variants whose validity class is always one object
    large_class: ClassVar[bool] = False  # the class can grow exponentially (all paths): generators cap it
    # ``problem.data`` keys that are policy-visible payloads (CPT rows, K&K statements): the firewall
    # screens only their name, since their inner keys are data (people, variables), not field names.
    data_payload_keys: ClassVar[frozenset[str]] = frozenset()

    # ---- problem side ------------------------------------------------------------------
    def normalize_query(self, problem: Problem) -> dict[str, Any]:
        """Validate and normalize ``problem.query``; raise ProblemError naming the bad field. A key the
        family does not read is refused (a typo such as ``varient`` would otherwise score the default)."""
        q = dict(problem.query)
        unknown = unknown_key_hints(q, self.query_keys)
        if unknown:
            raise ProblemError(f"unknown query field(s) for task {self.name!r}: {', '.join(unknown)}; "
                               f"its query fields are {', '.join(self.query_keys)}")
        out: dict[str, Any] = {}
        for key in self.query_keys:
            if key not in q:
                if key in self.query_defaults:
                    q[key] = self.query_defaults[key]
                else:
                    raise ProblemError(f"query for task {self.name!r} is missing field {key!r}")
            raw = q[key]
            if self.query_types[key] == "node" and isinstance(raw, str) and problem.graph is not None \
                    and raw in problem.graph:
                out[key] = raw  # the problem names the node exactly ('"q"', ' lead'): no text to unquote
                continue
            try:
                out[key] = normalize_value(self.query_types[key], q[key])
            except (ValueError, GraphError) as e:
                raise ProblemError(f"query field {key!r}: {e}") from None
        if "variant" in out and out["variant"] not in self.variants:
            raise ProblemError(f"query field 'variant' must be one of {self.variants}, got {out['variant']!r}")
        graph = problem.graph
        if graph is not None:
            for key in self.query_keys:
                missing = [n for n in self.query_nodes(out, (key,)) if n not in graph]
                if missing:
                    raise ProblemError(f"query field {key!r} names node(s) not in the graph: "
                                       f"{', '.join(sorted(missing))}")
        if problem.graph_class is not None and problem.graph_class not in self.graph_classes:
            raise ProblemError(
                f"task {self.name!r} takes graph classes {[c.value for c in self.graph_classes]}, "
                f"not {problem.graph_class.value}"
            )
        return out

    def query_nodes(self, query: Mapping[str, Any], keys: tuple[str, ...] | None = None) -> set[str]:
        """The nodes a normalized ``query`` names under ``keys`` (default: every query key), read by each key's
        type: a node, a set / path / list of nodes, a typed path's nodes; numbers and words name none."""
        names: set[str] = set()
        for key in self.query_keys if keys is None else keys:
            kind, v = self.query_types[key], query[key]
            if kind == "node":
                names.add(v)
            elif kind in ("set", "path", "list"):
                names.update(v)
            elif kind == "typed_path":
                names.update(v[0])
        return names

    # ---- what traces are judged on ----------------------------------------------------------
    def verification_object(self, problem: Problem) -> Any:
        """The structure every trace is judged on: the problem's source (G* for graph families), or
        None when the problem carries none (a constructed-mode problem stripped of its graph).

        Both modes judge b3-b6 on the source when it exists; a constructed-mode trace's own graph is
        only a fallback for sourceless problems, whose score then measures consistency, not
        correctness (``Verdict.grounded`` is False)."""
        return problem.graph

    def verification_graph(self, problem: Problem, trace_graph: Any = None, graph_ok: bool = False,
                           source: Any = _UNSET) -> Any:
        """The one rule for what b3-b6 of a trace are judged on (``Verdict.g_ver``): the problem's
        source when it has one (or the problem is supplied-mode); else, in sourceless constructed
        mode, the trace's own parsed GRAPH slot ``trace_graph`` only if it passed b1 (``graph_ok``);
        else None. ``source`` is :meth:`verification_object` when the caller already has it."""
        if source is _UNSET:
            source = self.verification_object(problem)
        if source is not None or problem.mode == "supplied":
            return source
        return trace_graph if graph_ok else None

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
            return Check.fail(graph_diff(trace_graph, problem.graph))
        allowed = set(problem.variables or ())
        extra = sorted(set(trace_graph.nodes) - allowed)
        if extra:
            return Check.fail(f"GRAPH names variable(s) not in the prompt: {', '.join(extra[:5])}")
        source = problem.graph
        if source is not None and (trace_graph.directed != source.directed
                                   or trace_graph.bidirected != source.bidirected):
            # Constructed mode with its source: the edge set must be the source's (a variable the
            # trace leaves out may only be an isolated one), so an invented graph loses b1.
            return Check.fail(graph_diff(trace_graph, source, "the graph the prompt describes", nodes=False))
        return PASS

    # ---- objects -------------------------------------------------------------------------
    def parse_object(self, text: str) -> Any:
        """Parse a STRATEGY/ANSWER object; raise ValueError (or GraphError) with a reason."""
        raise NotImplementedError(f"{self.name} does not parse objects")

    def parse_answer(self, text: str) -> Any:
        """Parse the ANSWER slot (``Verdict.answer``; the CALVER tie rule counts it as answered).
        Default :meth:`parse_object`; a decision family whose STRATEGY holds evidence (a witness, an
        adjustment set) accepts only a decision here."""
        return self.parse_object(text)

    def coerce_object(self, obj: Any) -> Any:
        """A caller's answer (text or a Python value) as this family's object; ValueError/TypeError
        if it is not one. Default: text is parsed, anything else is taken as is."""
        return self.parse_object(obj) if isinstance(obj, str) else obj

    def object_for(self, problem: Problem, answer: Any) -> Any:
        """``answer`` read for ``problem`` (what :func:`~calver.verifier.scoring.grade` grades):
        :meth:`coerce_object`, unless the problem declares its own vocabulary (K&K role words)."""
        return self.coerce_object(answer)

    def format_object(self, obj: Any) -> str:
        raise NotImplementedError(f"{self.name} does not format objects")

    def canonical_answer_key(self, obj: Any) -> Any:
        """A hashable canonical form for exact voting."""
        return obj

    def answer_set(self, obj: Any) -> frozenset:
        """The object as a set of atoms, for set-overlap measures (the medoid selector's Jaccard):
        node sets as themselves, paths as their nodes, assignments as (person, role) pairs, a
        scalar as a singleton."""
        if isinstance(obj, (set, frozenset, list, tuple)):
            return frozenset(obj)
        if isinstance(obj, dict):
            return frozenset(obj.items())
        return frozenset([obj])

    def key_set(self, key: Any) -> frozenset:
        """A :meth:`canonical_answer_key` as a set of atoms, for the medoid selector's Jaccard overlap:
        a set or tuple key as its items, a mapping as its pairs, a scalar as a singleton. (A path key
        ``(nodes, types)`` thus gives two atoms, unlike :meth:`answer_set`'s nodes.)"""
        if isinstance(key, (set, frozenset, list, tuple)):
            return frozenset(key)
        if isinstance(key, dict):
            return frozenset(key.items())
        return frozenset([key])

    def object_mentions(self, text: str) -> list[tuple[int, int]]:
        """Spans of free text (a bit's reason) that may write an object of this family, so feedback
        can withhold a valid object the trace did not give. Default: none."""
        return []

    def object_to_json(self, obj: Any) -> Any:
        """A validity-class member as JSON (``meta.validity_class``): sets sorted, tuples as lists."""
        if isinstance(obj, (set, frozenset)):
            return sorted(obj)
        if isinstance(obj, tuple):
            return [list(v) if isinstance(v, tuple) else v for v in obj]
        return obj

    def object_from_json(self, data: Any) -> Any:
        """Inverse of :meth:`object_to_json`."""
        return data

    @property
    def is_decision(self) -> bool:
        """Whether the ANSWER is a decision or an estimate (yes/no, a number) rather than an object
        the STRATEGY exhibits: STRATEGY then holds evidence (a witness, an adjustment set), and a
        recomputed value in a reason would give the answer away."""
        return self.answer_type in ("bool", "number")

    # ---- teaching --------------------------------------------------------------------------------
    @property
    def has_rule(self) -> bool:
        """Whether the family proposes answers by a local rule (:meth:`rule_objects` overridden)."""
        return type(self).rule_objects is not TaskFamily.rule_objects

    def set_candidates(self, g: Any, query: Mapping[str, Any]) -> list[str] | None:
        """The nodes a set answer may hold (None: the family's answers are not node sets)."""
        return None

    def rule_objects(self, g: Any, query: Mapping[str, Any]) -> Iterator[Any]:
        """Objects a simple local rule proposes for a teaching trace, best first (not yet filtered by
        the predicate). A policy learns a rule it can apply from the prompt (a parent set read off
        the edge list); it cannot learn a draw from the validity class. Default: no rule."""
        return iter(())

    def rule_object(self, problem: Problem) -> Any:
        """The first :meth:`rule_objects` proposal valid on the problem's source, or None."""
        g = self.verification_object(problem)
        if g is None:
            return None
        query = self.normalize_query(problem)
        for obj in self.rule_objects(g, query):
            if self.predicate(g, query, obj).ok:
                return obj
        return None

    # ---- validity ---------------------------------------------------------------------------
    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
        """The task's semantic validity predicate on graph ``g``."""
        raise NotImplementedError(f"{self.name} has no validity predicate on a graph")

    def grade(self, problem: Problem, obj: Any) -> bool:
        """Correctness of a final answer object on the problem's source graph G*."""
        if problem.graph is None:
            raise ProblemError(f"cannot grade task {self.name!r} without the source graph")
        return self.predicate(problem.graph, self.normalize_query(problem), obj).ok

    def is_valid_on(self, g: Any, query: Mapping[str, Any], obj: Any, problem: Problem | None = None) -> bool:
        """Whether ``obj`` is a valid answer on verification object ``g`` (e.g. a trace's own graph,
        a reduced graph): the predicate; for a family without one, ``grade`` on a copy of
        ``problem`` supplying ``g``."""
        if type(self).predicate is not TaskFamily.predicate:
            return bool(self.predicate(g, query, obj).ok)
        if problem is None:
            raise ValueError(f"{self.name} has no predicate on a graph: is_valid_on needs the problem")
        on_g = problem if g is problem.graph else dataclasses.replace(problem, graph=g, mode="supplied")
        return bool(self.grade(on_g, obj))

    def validity_class(self, g: Any, query: Mapping[str, Any], limit: int | None = None) -> list[Any]:
        """Every valid object on ``g`` (at most ``limit``), in the family's canonical order."""
        raise NotImplementedError(f"{self.name} does not enumerate its validity class")

    def default_object(self, problem: Problem) -> Any:
        """A valid object for ``problem``: the first of its validity class (ProblemError if empty)."""
        query = self.normalize_query(problem)
        # a maximal variant filters the whole class, so only there may the first member need all of it
        limit = None if query.get("variant") == "maximal" else 1
        members = self.validity_class(self.verification_object(problem), query, limit=limit)
        if not members:
            raise ProblemError(f"{self.name} problem {problem.id!r} has no valid answer")
        return members[0]

    def answer_candidates(self, g: Any, answer: Any, rng: Any) -> Iterator[Any]:
        """Objects of the answer type to try as wrong answers, in a seeded order (not yet filtered:
        see :meth:`invalid_objects`). Answer-type bases override this; the default covers the
        scalar answer types."""
        order = node_order(g, rng)
        if self.answer_type == "bool":
            yield (not answer) if isinstance(answer, bool) else True
            yield False
        elif self.answer_type == "node":
            yield from order
        elif self.answer_type == "number":
            base = float(answer) if isinstance(answer, (int, float)) and not isinstance(answer, bool) else 0.0
            yield from (base + d for d in (1.0, -1.0, 10.0, -10.0))
        else:
            raise NotImplementedError(f"{self.name} ({self.answer_type}) lists no answer candidates")

    def invalid_objects(self, g: Any, query: Mapping[str, Any], answer: Any, rng: Any = 0,
                        problem: Problem | None = None) -> Iterator[Any]:
        """Distinct objects of the answer type that differ from ``answer`` and are NOT valid on ``g``
        (:meth:`is_valid_on`), in a seeded order: what an audit swaps into a trace. ``rng`` is a
        numpy Generator or a seed; ``problem`` is needed only by families without a predicate."""
        seen = {self.canonical_answer_key(answer)} if answer is not None else set()
        for raw in self.answer_candidates(g, answer, rng):
            try:
                obj = self.coerce_object(raw)
                key = self.canonical_answer_key(obj)
                if key in seen:
                    continue
                seen.add(key)
                if self.is_valid_on(g, query, obj, problem):
                    continue
                self.format_object(obj)  # it must be writable into a trace
            except _OBJECT_ERRORS:
                continue
            yield obj

    # ---- bits 3-6: overridden by families whose semantics differ -----------------------------
    # Each hook receives the trace's TraceContext, filled by the scorer (``query``, ``slots``, ``g_ver``,
    # ``trace_graph``, the parsed ``strategy``/``answer`` or their ``*_error``), and returns a Check:
    # PASS, or a failure whose reason feedback shows. Fail closed: a missing slot, an unparsed object
    # or ``g_ver is None`` fails the bit. A raised ValueError, GraphError, KeyError, TypeError or
    # RecursionError fails it with the message, and a return value that is not a Check fails it too.
    def check_strategy(self, ctx: TraceContext) -> Check:
        """Bit 3 (STRATEGY): the parsed STRATEGY (``ctx.strategy``) holds on the verification object
        ``ctx.g_ver`` for ``ctx.query``: the object satisfies the family's predicate, or, for decision
        families, the evidence (e.g. a witness path) is sound. Fails with ``ctx.strategy_error`` when
        STRATEGY is missing or does not parse."""
        raise NotImplementedError

    def check_derivation(self, ctx: TraceContext) -> Check:
        """Bit 4 (DERIVATION): the record ``operation(key=value, ...)`` names the family's operation,
        binds the query (:meth:`derivation_call`), repeats the STRATEGY object and, where the family
        lists witnesses, each witness path holds on ``ctx.g_ver``. With :attr:`derivation_reads`
        declared, it may read only those slots (the scorer memoizes it on them)."""
        raise NotImplementedError

    def derivation_binds(self, args: dict[str, str], query: Mapping[str, Any], keys: tuple[str, ...] | None = None,
                         required: bool = True) -> Check:
        """Whether the derivation arguments ``args`` bind ``keys`` (default: every query key) to the
        normalized ``query``'s values. A missing key fails when ``required``, else is skipped. A
        malformed value raises ValueError/GraphError (the scorer turns it into a failed bit)."""
        for key in self.query_keys if keys is None else keys:
            if key not in args:
                if required:
                    return Check.fail(f"DERIVATION lacks argument {key!r}")
                continue
            kind = self.query_types[key]
            if not values_equal(kind, normalize_value(kind, args[key]), query[key]):
                return Check.fail(f"DERIVATION {key}={args[key]} is not bound to the query")
        return PASS

    def derivation_call(self, ctx: TraceContext, bound: tuple[str, ...]) -> tuple[dict[str, str] | None, Check]:
        """Parse DERIVATION as ``operation(key=value, ...)``: the operation must be the family's and
        each ``bound`` argument must equal the query's value. Returns (args, PASS) or (None, failure)."""
        text = ctx.slots.get("DERIVATION")
        if text is None:
            return None, Check.fail(ctx.slots.problems["DERIVATION"])
        op, args = parse_call(text)
        if op.lower() != self.operation:
            return None, Check.fail(f"DERIVATION operation is {op!r}, expected {self.operation!r}")
        check = self.derivation_binds(args, ctx.query, bound)
        return (args, PASS) if check.ok else (None, check)

    def check_result(self, ctx: TraceContext) -> Check:
        """Bit 5 (RESULT): the declared outcome equals the verifier's own recomputation on
        ``ctx.g_ver``: of the returned object's validity (find-one-valid families), or of the
        decision or effect itself (decision families, e.g. reachability, ATE)."""
        raise NotImplementedError

    def check_answer(self, ctx: TraceContext) -> Check:
        """Bit 6 (ANSWER): ``ctx.answer`` agrees with the trace: for find-one-valid families it equals
        STRATEGY and RESULT declares it valid; decision families tie it to RESULT/STRATEGY or to the
        exact decision. Fails with ``ctx.answer_error`` when ANSWER is missing or does not parse."""
        raise NotImplementedError

    # ---- rendering ----------------------------------------------------------------------------
    def question_text(self, query: Mapping[str, Any]) -> str:
        """The natural-language question for a prompt."""
        raise NotImplementedError

    def query_slot(self, problem: Problem, query: Mapping[str, Any]) -> str:
        """The QUERY slot a canonical trace writes: task, every query key (an optional key at its
        default, other than ``variant``, is left out) and the graph class."""
        pairs: dict[str, Any] = {"task": self.name}
        for key in self.query_keys:
            if key != "variant" and key in self.query_defaults and query[key] == self.query_defaults[key]:
                continue
            pairs[key] = format_value(self.query_types[key], query[key])
        if problem.graph_class is not None:
            pairs["graph"] = problem.graph_class.value
        return format_kv(pairs)

    def canonical_trace(self, problem: Problem, obj: Any = None, *, witnesses: int | None = None,
                        order: RenderOrder | None = None, graph_text: str | None = None) -> str:
        """A six-slot trace for answer ``obj`` (default: :meth:`default_object`) that scores 6 when
        ``obj`` is valid. ``witnesses``: list at most that many witness paths in DERIVATION (families
        that list none ignore it; None: the family's own number). ``order``: the GRAPH slot lists the graph's
        nodes and edges in that order, as the prompt did (default: node order, sorted edges). ``graph_text``:
        the GRAPH slot writes this text of ``problem.graph`` instead (a matrix or parents map copied from the
        prompt); a family whose GRAPH slot holds no graph (K&K's formulas) ignores it."""
        raise NotImplementedError(f"{self.name} writes no canonical trace")
