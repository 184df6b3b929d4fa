"""Shared bit logic for find-one-valid *node-set* families (backdoor, frontdoor, separation, blocking).

The object a trace returns is its ANSWER set (falling back to STRATEGY when the answer does not
parse), so swapping the answer of a max-score trace to an invalid set fails exactly b3 (predicate
on the returned set), b5 (declared result vs recomputation on the returned set) and b6 (answer ≠
strategy): score 3. Witness paths listed in the derivation are checked edge by edge against G_ver
(b4 only), so damaging one witness edge scores 5.
"""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any, ClassVar, Iterator, Mapping

from calver.verifier.budget import TooLargeToGrade, WorkBudget
from calver.verifier.contract import format_kv, format_set
from calver.verifier.family import PASS, Check, TaskFamily, TraceContext, node_order
from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphError
from calver.verifier.memo import Memo, text_cost
from calver.verifier.values import (
    cached_node_set,
    cached_path,
    format_value,
    parse_bool,
)

_BRACES = re.compile(r"\{[^{}]*\}")  # a node set written in free text
_TEST_OVERHEAD = 32  # work units of one subset test beyond the graph size (the call itself)


def parse_result_bool(text: str) -> bool:
    """A RESULT slot like ``valid`` or ``valid (X _||_ Y | {A} in G_X)``: read the leading verdict."""
    try:
        return parse_bool(text)
    except ValueError:
        pass
    m = re.match(r"\W*(not\s+valid|[A-Za-z]+)", text)
    if not m:
        raise ValueError(f"RESULT has no verdict: {text[:40]!r}")
    return parse_bool(m.group(1))


def split_paths(text: str) -> list[str]:
    """``[X <- A -> Y | X <- B -> Y]`` → two path strings; ``none``/``[]`` → none."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    body = body.strip()
    if body.lower() in ("", "none", "-", "nil"):
        return []
    from calver.verifier.formats.objects import split_unquoted

    return [p.strip() for p in split_unquoted(body, "|;") if p.strip()]


_WITNESS_MEMO = Memo("witness path")  # (id(g), path text) -> (g, nodes, error)
_MINMAX_MEMO = Memo("min/max check")  # (id(g), family, variant, query, nodes) -> (g, witness or TooLargeToGrade)


def check_witness_paths(g: CausalGraph | None, text: str | None, ends: tuple[str, str] | None = None) -> Check:
    """Every edge of every listed witness path must exist in ``g`` with its stated type."""
    from calver.verifier.primitives import path_edges

    if text is None:
        return PASS
    paths = split_paths(text)
    if paths and g is None:
        return Check.fail("DERIVATION lists witness paths but no verification graph is available")
    for p in paths:
        hit = _WITNESS_MEMO.get((id(g), p))
        if hit is None or hit[0] is not g:  # a pool's candidates list the same few paths
            try:
                nodes, types = cached_path(p)
                assert g is not None  # paths without a graph were refused above
                path_edges(g, nodes, types)
                hit = (g, nodes, None)
            except (ValueError, GraphError) as e:
                hit = (g, None, f"DERIVATION witness path {p!r} is not in the graph: {e}")
            _WITNESS_MEMO.put((id(g), p), hit, text_cost(p, 16))
        _, nodes, error = hit
        if error:
            return Check.fail(error)
        if ends is not None and {nodes[0], nodes[-1]} != set(ends):
            return Check.fail(f"DERIVATION witness path {p!r} does not run between {ends[0]} and {ends[1]}")
    return PASS


class NodeSetFamily(TaskFamily):
    """A find-one-valid task whose answer is a set of nodes, with any/minimal/maximal variants."""

    answer_type = "set"
    variants: ClassVar[tuple[str, ...]] = ("any", "minimal", "maximal")
    object_arg: ClassVar[str | None] = "set"  # derivation argument carrying the strategy set
    bound_args: ClassVar[tuple[str, ...]] = ()  # derivation arguments that must equal query values
    many_answers: ClassVar[bool] = True
    derivation_reads = ("DERIVATION", "STRATEGY")  # binding + witness edges on the verification graph

    # ---- to implement ----------------------------------------------------------------------
    def base_violation(self, g: CausalGraph, query: Mapping[str, Any], nodes: frozenset[str]) -> str | None:
        """Why ``nodes`` is not a valid set (ignoring the variant), or None when valid. Builds a
        feedback sentence (e.g. an open path): used for the reason of a failed predicate only."""
        raise NotImplementedError

    def is_base_valid(self, g: CausalGraph, query: Mapping[str, Any], nodes: frozenset[str]) -> bool:
        """Whether ``nodes`` is a valid set (ignoring the variant), without building a reason.

        This is the hot path of :meth:`validity_class` and the minimal/maximal checks (one call per
        subset); families override it with the boolean primitive. It must agree with
        ``base_violation(...) is None``; the default derives it from there."""
        return self.base_violation(g, query, frozenset(nodes)) is None

    def excluded(self, query: Mapping[str, Any]) -> frozenset[str]:
        """Nodes that can never be members (treatment, outcome ...)."""
        return frozenset()

    def witness_paths(self, g: CausalGraph, query: Mapping[str, Any], nodes: frozenset[str]) -> list[str]:
        return []

    # ---- shared ------------------------------------------------------------------------------
    def parse_object(self, text: str) -> Any:  # a set here; subclasses parse paths and cycles
        return cached_node_set(text)

    def coerce_object(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.parse_object(obj)
        if isinstance(obj, (set, frozenset, list, tuple)):
            return frozenset(str(v) for v in obj)
        raise TypeError(f"expected a set of node names, got {type(obj).__name__}")

    def format_object(self, obj: Any) -> str:
        return format_set(obj)

    def canonical_answer_key(self, obj: Any) -> Any:
        return frozenset(obj)

    def object_from_json(self, data: Any) -> Any:
        return frozenset(data)

    def object_mentions(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _BRACES.finditer(text)]

    def answer_candidates(self, g: CausalGraph, answer: Any, rng: Any) -> Iterator[Any]:
        """Single nodes, the empty set, pairs, then every node, in a seeded node order."""
        order = node_order(g, rng)
        yield from (frozenset([n]) for n in order)
        yield frozenset()
        yield from (frozenset(c) for c in combinations(order, 2))
        yield frozenset(order)

    def set_candidates(self, g: Any, query: Mapping[str, Any]) -> list[str] | None:
        # path and cycle families inherit the node machinery but answer with sequences, not sets
        return self.candidates(g, query) if self.answer_type == "set" else None

    def candidates(self, g: CausalGraph, query: Mapping[str, Any]) -> list[str]:
        ex = self.excluded(query)
        return [n for n in g.nodes if n not in ex]

    def predicate(self, g: CausalGraph, query: Mapping[str, Any], obj: Any) -> Check:
        nodes = frozenset(obj)
        unknown = sorted(n for n in nodes if n not in g)
        if unknown:
            return Check.fail(f"{', '.join(unknown)} not in the graph")
        if not self.is_base_valid(g, query, nodes):  # fast boolean first; the reason only on failure
            return Check.fail(self.base_violation(g, query, nodes) or f"{format_set(nodes)} is not valid")
        variant = query.get("variant", "any")
        if variant not in ("minimal", "maximal"):
            return PASS
        try:
            other = self._minmax_memo(g, query, nodes, variant)
        except TooLargeToGrade as e:
            return Check.fail(f"too large to grade exactly: {e}")
        if other is not None:
            return Check.fail(f"{format_set(nodes)} is valid but not {variant}: {format_set(other)} is also valid")
        return PASS

    def _minmax_memo(self, g, query, nodes, variant) -> frozenset[str] | None:
        """A pool's candidates repeat the same answers and a check may cost thousands of tests. Each
        check gets one :class:`WorkBudget` (a verdict past it is memoized too: it is deterministic)."""
        search = self._proper_subset_valid if variant == "minimal" else self._proper_superset_valid
        what = "the minimality check" if variant == "minimal" else "the maximality check"
        key = (id(g), self.name, variant, tuple(sorted(query.items())), nodes)
        try:
            hit = _MINMAX_MEMO.get(key)
        except TypeError:  # an unhashable query value: no memo
            return search(g, query, nodes, WorkBudget(what=what))
        if hit is None or hit[0] is not g:
            found: frozenset[str] | None | TooLargeToGrade  # the verdict past the budget is memoized too
            try:
                found = search(g, query, nodes, WorkBudget(what=what))
            except TooLargeToGrade as e:
                found = e
            hit = _MINMAX_MEMO.put(key, (g, found), 512 + 128 * len(nodes))
        if isinstance(hit[1], TooLargeToGrade):
            raise hit[1]
        return hit[1]

    # Exact minimal/maximal checks. The default is an exhaustive search over what prune_pool
    # leaves (valid families need not be monotone), failing closed once its WorkBudget is spent;
    # every family shipped here overrides both methods with a polynomial exact test.
    def prune_pool(self, g: CausalGraph, query: Mapping[str, Any], must: frozenset[str],
                   pool: frozenset[str]) -> tuple[frozenset[str], frozenset[str]] | None:
        """(must', pool') with must ⊆ must' ⊆ pool' ⊆ pool such that every valid S with must ⊆ S ⊆
        pool also has must' ⊆ S ⊆ pool' (it must be provably sound), or None if no such S is
        valid. The default prunes nothing."""
        return must, pool

    def _search(self, g, query, nodes, must, pool, fallback, budget: WorkBudget | None = None) -> frozenset[str] | None:
        """First valid S ≠ ``nodes`` with must ⊆ S ⊆ pool: the whole pool, the ``fallback`` sets (one
        removal / addition), then every subset, smallest additions first. Each test costs the graph's
        nodes + edges (+ a constant) of ``budget``; once it is spent the check fails closed
        (:class:`TooLargeToGrade`), so the verdict never depends on the machine's speed."""
        budget = budget or WorkBudget()
        cost = _TEST_OVERHEAD + len(g.nodes) + len(g.directed) + len(g.bidirected)
        free = sorted(pool - must)

        def valid(s: frozenset[str]) -> bool:
            budget.spend(cost)
            return s != nodes and self.is_base_valid(g, query, s)

        try:
            if valid(pool):  # one test, often the witness
                return pool
            for s in fallback(must, free):
                if valid(s):
                    return s
            for r in range(len(free) + 1):
                for c in combinations(free, r):
                    s = must | frozenset(c)
                    if valid(s):
                        return s
        except TooLargeToGrade as e:
            raise TooLargeToGrade(f"{len(free)} candidate nodes remain after pruning and {e}") from None
        return None

    def _proper_subset_valid(self, g, query, nodes, budget: WorkBudget | None = None) -> frozenset[str] | None:
        pruned = self.prune_pool(g, query, frozenset(), frozenset(nodes))
        if pruned is None:
            return None
        return self._search(g, query, nodes, *pruned, lambda must, free: [
            must | frozenset(free[:i] + free[i + 1:]) for i in range(len(free))], budget)

    def _proper_superset_valid(self, g, query, nodes, budget: WorkBudget | None = None) -> frozenset[str] | None:
        cands = frozenset(self.candidates(g, query))
        if not nodes <= cands:  # a member outside the candidates: no superset is valid either
            return None
        pruned = self.prune_pool(g, query, frozenset(nodes), cands)
        if pruned is None:
            return None
        return self._search(g, query, nodes, *pruned, lambda must, free: [must | {n} for n in free], budget)

    def validity_class(self, g: CausalGraph, query: Mapping[str, Any],
                       limit: int | None = None) -> list[frozenset[str]]:
        """Every valid set (``is_base_valid`` on each subset of :meth:`candidates`, ordered by size
        then sorted names, as :func:`~calver.verifier.primitives.enumerate_valid_sets`), stopping
        after ``limit`` hits, then the variant's minimal/maximal filter."""
        from calver.verifier.primitives import maximal_sets, minimal_sets

        test = self.is_base_valid  # the hot loop of generation: bound once, no per-call adapter
        pool = sorted(set(self.candidates(g, query)))
        valid: list[frozenset[str]] = []
        for r in range(len(pool) + 1):
            for combo in combinations(pool, r):
                z = frozenset(combo)
                if test(g, query, z):
                    valid.append(z)
                    if limit is not None and len(valid) >= limit:
                        break
            else:
                continue
            break
        variant = query.get("variant", "any")
        if variant == "minimal":
            return minimal_sets(valid)
        if variant == "maximal":
            return maximal_sets(valid)
        return valid

    def returned(self, ctx: TraceContext):
        return ctx.answer if ctx.answer is not None else ctx.strategy

    def _predicate_once(self, ctx: TraceContext, obj: Any) -> Check:
        """b3 and b5 both evaluate the predicate on the returned object: once per trace, and once per
        problem for each (verification object, answer) a pool's candidates repeat."""
        key = ("predicate", self.canonical_answer_key(obj))
        hit = ctx.extra.get(key)
        if hit is None:
            shared_key = (*key, id(ctx.g_ver))
            shared = ctx.memo.get(shared_key) if ctx.memo is not None else None
            if shared is not None and shared[0] is ctx.g_ver:
                hit = shared[1]
            else:
                hit = self.predicate(ctx.g_ver, ctx.query, obj)
                if ctx.remember is not None:
                    size = len(key[1]) if isinstance(key[1], (frozenset, tuple)) else 0
                    ctx.remember(shared_key, size, (ctx.g_ver, hit))
            ctx.extra[key] = hit
        return hit

    # ---- bits ----------------------------------------------------------------------------------
    def check_strategy(self, ctx: TraceContext) -> Check:
        if ctx.strategy is None:
            return Check.fail(ctx.strategy_error or "STRATEGY does not parse")
        if ctx.g_ver is None:
            return Check.fail("no verification graph: the trace's GRAPH slot is unusable")
        return self._predicate_once(ctx, self.returned(ctx))

    def check_derivation(self, ctx: TraceContext) -> Check:
        args, check = self.derivation_call(ctx, self.bound_args)
        if args is None:
            return check
        if self.object_arg not in args:
            return Check.fail(f"DERIVATION lacks argument {self.object_arg!r}")
        if ctx.strategy is None:
            return Check.fail("DERIVATION cannot bind an unparsed STRATEGY")
        key = self.canonical_answer_key
        if key(self.parse_object(args[self.object_arg])) != key(ctx.strategy):
            return Check.fail(f"DERIVATION {self.object_arg}={args[self.object_arg]} differs from STRATEGY")
        if self.witness_arg:
            return check_witness_paths(ctx.g_ver, args.get(self.witness_arg), self.witness_ends(ctx.query))
        return PASS

    def witness_ends(self, query: Mapping[str, Any]) -> tuple[str, str] | None:
        return None

    def check_result(self, ctx: TraceContext) -> Check:
        text = ctx.slots.get("RESULT")
        if text is None:
            return Check.fail(ctx.slots.problems["RESULT"])
        declared = parse_result_bool(text)
        obj = self.returned(ctx)
        if obj is None:
            return Check.fail("no returned set to recompute the result on")
        if ctx.g_ver is None:
            return Check.fail("no verification graph to recompute the result on")
        actual = self._predicate_once(ctx, obj).ok
        if declared != actual:
            return Check.fail(
                f"RESULT says {'valid' if declared else 'invalid'} but recomputation on "
                f"{self.format_object(obj)} gives {'valid' if actual else 'invalid'}"
            )
        return PASS

    def check_answer(self, ctx: TraceContext) -> Check:
        if ctx.answer is None:
            return Check.fail(ctx.answer_error or "ANSWER does not parse")
        key = self.canonical_answer_key
        if ctx.strategy is not None and key(ctx.answer) != key(ctx.strategy):
            return Check.fail(
                f"ANSWER {self.format_object(ctx.answer)} differs from STRATEGY {self.format_object(ctx.strategy)}"
            )
        if ctx.strategy is None:
            return Check.fail("ANSWER cannot be checked against an unparsed STRATEGY")
        text = ctx.slots.get("RESULT")
        try:
            declared = parse_result_bool(text) if text is not None else None
        except ValueError:
            declared = None
        if declared is not True:
            return Check.fail("ANSWER gives an object although RESULT does not declare it valid")
        return PASS

    # ---- rendering -------------------------------------------------------------------------------
    def derivation_slot(self, g: CausalGraph, query: Mapping[str, Any], nodes: frozenset[str],
                        witnesses: int | None = None) -> str:
        args: dict[str, Any] = {k: format_value(self.query_types[k], query[k]) for k in self.bound_args}
        assert self.object_arg is not None  # set-returning families name their object argument
        args[self.object_arg] = self.format_object(nodes)
        if self.witness_arg:
            paths = self.witness_paths(g, query, nodes)[:witnesses]
            args[self.witness_arg] = "[" + " | ".join(paths) + "]" if paths else "none"
        return f"{self.operation}({format_kv(args, ', ')})"

    def canonical_trace(self, problem, obj: Any = None, *, witnesses: int | None = None,
                        order: RenderOrder | None = None, graph_text: str | None = None) -> str:
        from calver.verifier.contract import assemble_trace

        g = problem.graph
        query = self.normalize_query(problem)
        obj = self.coerce_object(obj if obj is not None else self.default_object(problem))
        valid = self.predicate(g, query, obj).ok
        return assemble_trace(
            {
                "GRAPH": g.to_text(order) if graph_text is None else graph_text,
                "QUERY": self.query_slot(problem, query),
                "STRATEGY": self.format_object(obj),
                "DERIVATION": self.derivation_slot(g, query, obj, witnesses),
                "RESULT": "valid" if valid else "invalid",
                "ANSWER": self.format_object(obj),
            }
        )


class SeparatorFamily(NodeSetFamily):
    """A node-set family whose valid sets are exactly the Z ⊆ R that separate X and Y in one graph
    (G without the outgoing edges of ``no_out``): minimal/maximal are exact and linear
    (:mod:`calver.verifier.separators`)."""

    def separator_masks(self, g: CausalGraph, query: Mapping[str, Any]) -> tuple[int, int, int, int]:
        """Masks (X, Y, R, no_out)."""
        raise NotImplementedError

    def _proper_subset_valid(self, g, query, nodes, budget=None) -> frozenset[str] | None:
        from calver.verifier.paths import node_mask
        from calver.verifier.separators import smaller_separator

        xm, ym, _rm, no_out = self.separator_masks(g, query)
        found = smaller_separator(g, xm, ym, node_mask(g, nodes), no_out)
        return None if found is None else g.names(found)

    def _proper_superset_valid(self, g, query, nodes, budget=None) -> frozenset[str] | None:
        from calver.verifier.paths import node_mask
        from calver.verifier.separators import larger_separator

        xm, ym, rm, no_out = self.separator_masks(g, query)
        found = larger_separator(g, xm, ym, node_mask(g, nodes), rm, no_out, budget)
        return None if found is None else g.names(found)

