"""Non-neural selectors: first, exact plurality, set medoid, structure-only control, CALVER,
extract-then-solve. All read only the view (problem inputs + candidate texts)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from calver.infer.firewall import SelectorView
from calver.infer.selectors.base import ScalarSelector, Selection, Selector, earliest_max, plurality
from calver.verifier import SLOTS, GraphError, Problem, ProblemError, Verdict, get_family, score, split_slots
from calver.verifier.contract import parse_call
from calver.verifier.scoring import check_query, select_from_scores


# ---- shared per-view computations (memoized on the view) ----------------------------------------
def _scores(view: SelectorView) -> list[Verdict]:
    by_text: dict[str, Verdict] = {}  # the scorer is deterministic: score each distinct text once
    return [by_text.get(t) or by_text.setdefault(t, score(t, view.problem)) for t in view.texts]


def candidate_scores(view: SelectorView) -> Sequence[Verdict]:
    """The :class:`Verdict` of every candidate: the view's own (from the score table), else scored once
    per view."""
    if view.verdicts is not None:
        return view.verdicts
    return view.cached("verdicts", _scores)


def _answer_keys(view: SelectorView) -> list[Any]:
    return [ts.answer_key for ts in candidate_scores(view)]


def slot_parses(view: SelectorView) -> dict[str, Any]:
    """``split_slots`` of each distinct candidate text (memoized on the view)."""
    return view.cached("slots", lambda v: {t: split_slots(t) for t in dict.fromkeys(v.texts)})


def _graph_parses(view: SelectorView) -> dict[str, Any]:
    """GRAPH-slot text -> parsed graph (or the exception it raised), each distinct text once."""
    fam = get_family(view.problem.task)
    out: dict[str, Any] = {}
    for sp in slot_parses(view).values():
        g = sp.get("GRAPH")
        if g is None or g in out:
            continue
        try:
            out[g] = fam.parse_graph_slot(g, view.problem)
        except (ValueError, GraphError, RecursionError, TypeError) as e:
            out[g] = e
    return out


def graph_parses(view: SelectorView) -> dict[str, Any]:
    return view.cached("graphs", _graph_parses)


def answer_keys(view: SelectorView) -> list[Any]:
    """Canonical answer key per candidate (:func:`~calver.infer.selectors.base.answer_key`: None
    when the answer is unparsed)."""
    return view.cached("answer_keys", _answer_keys)


# ---- selectors ---------------------------------------------------------------------------------
class FirstSelector(Selector):
    name = "first"

    def select(self, view: SelectorView) -> Selection:
        return Selection(0, tuple(1.0 if i == 0 else 0.0 for i in range(view.k)))


class PluralitySelector(Selector):
    """Exact plurality over canonical answers (:func:`~calver.infer.selectors.base.plurality`):
    ties -> the answer whose first occurrence is earliest; unparsed answers do not vote; with no
    parsed answer at all the first candidate is returned. Score = the answer's vote count."""

    name = "plurality"

    def select(self, view: SelectorView) -> Selection:
        return Selection(*plurality(answer_keys(view)))


class MedoidSelector(Selector):
    """Set medoid: the candidate whose answer set has the largest mean Jaccard overlap with the others.

    Answers are sets (the family's :meth:`~calver.verifier.family.TaskFamily.key_set` of the canonical
    answer key: node sets as themselves, a scalar answer as a singleton); J(∅, ∅) = 1.
    Unparsed answers score -1 (never chosen while any answer parses); ties -> earliest.
    """

    name = "medoid"

    def select(self, view: SelectorView) -> Selection:
        keys = answer_keys(view)
        fam = get_family(view.problem.task) if any(k is not None for k in keys) else None
        sets = [None if k is None else fam.key_set(k) for k in keys]
        n = len(sets)
        cache: dict[tuple[frozenset, frozenset], float] = {}
        scores = []
        for i, a in enumerate(sets):
            if a is None:
                scores.append(-1.0)
                continue
            tot = 0.0
            for j, b in enumerate(sets):
                if j == i or b is None:
                    continue
                key = (a, b)
                if key not in cache:
                    u = len(a | b)
                    cache[key] = cache[(b, a)] = 1.0 if u == 0 else len(a & b) / u
                tot += cache[key]
            scores.append(tot / (n - 1) if n > 1 else 1.0)
        return Selection(earliest_max(scores), tuple(scores))


class CalverSelector(ScalarSelector):
    """CALVER: among the candidates with the maximum six-bit score, the earliest whose ANSWER parsed,
    else the earliest (the deployed ``first`` rule, :func:`calver.verifier.select_from_scores`)."""

    name = "calver"

    def candidate_scores(self, view: SelectorView) -> list[float]:
        return [float(ts.total) for ts in candidate_scores(view)]

    def select(self, view: SelectorView) -> Selection:
        ts = candidate_scores(view)
        idx = select_from_scores([t.total for t in ts], "first", parsed=[t.answer is not None for t in ts])
        return Selection(idx, tuple(float(t.total) for t in ts))


# ---- structure-only control --------------------------------------------------------------------
def structure_bits(text: str, problem: Problem, *, slots=None, graphs: dict[str, Any] | None = None,
                   query: dict[str, Any] | None = None) -> list[int]:
    """Six format bits, no semantic validity: GRAPH parses in the problem's class (not compared with
    any graph), QUERY binds the problem's query, STRATEGY parses, DERIVATION names the family's
    operation with well-typed arguments bound to the query, RESULT is a single non-empty value,
    ANSWER parses."""
    try:
        fam = get_family(problem.task)
    except KeyError:
        return [0] * len(SLOTS)
    slots = slots if slots is not None else split_slots(text)
    bits = [0] * len(SLOTS)
    g = slots.get("GRAPH")
    if g is not None:
        if graphs is not None and g in graphs:
            bits[0] = int(not isinstance(graphs[g], Exception))
        else:
            try:
                fam.parse_graph_slot(g, problem)
                bits[0] = 1
            except (ValueError, GraphError, RecursionError):
                pass
    try:
        query = query if query is not None else fam.normalize_query(problem)
        bits[1] = int(check_query(slots, fam, problem, query).ok)
    except (ProblemError, ValueError, GraphError, KeyError, TypeError):
        query = None
    for i, slot in ((2, "STRATEGY"), (5, "ANSWER")):
        t = slots.get(slot)
        if t is not None:
            try:
                (fam.parse_answer if slot == "ANSWER" else fam.parse_object)(t)
                bits[i] = 1
            except (ValueError, GraphError, RecursionError, TypeError):
                pass
    d = slots.get("DERIVATION")
    if d is not None and query is not None:
        bits[3] = int(_derivation_typed(d, fam, query))
    bits[4] = int(slots.get("RESULT") is not None)
    return bits


def _derivation_typed(text: str, fam, query: dict[str, Any]) -> bool:
    try:
        op, args = parse_call(text)
    except ValueError:
        return False
    if op.lower() != fam.operation:
        return False
    try:  # every query argument present must be bound; none is required
        if not fam.derivation_binds(args, query, required=False).ok:
            return False
    except (ValueError, GraphError, KeyError, TypeError):
        return False
    if fam.object_arg and fam.object_arg in args:
        try:
            fam.parse_object(args[fam.object_arg])
        except (ValueError, GraphError, TypeError):
            return False
    return True


class StructureSelector(ScalarSelector):
    """Structure-only control: earliest maximum of :func:`structure_bits` (parsing, binding, format)."""

    name = "structure"

    def candidate_scores(self, view: SelectorView) -> list[float]:
        def compute(v: SelectorView) -> list[float]:
            slots, graphs = slot_parses(v), graph_parses(v)
            try:
                query = get_family(v.problem.task).normalize_query(v.problem)
            except (KeyError, ProblemError):
                query = None
            memo = {t: float(sum(structure_bits(t, v.problem, slots=sp, graphs=graphs, query=query)))
                    for t, sp in slots.items()}
            return [memo[t] for t in v.texts]

        return view.cached("structure", compute)


# ---- extract-then-solve ------------------------------------------------------------------------
def _parsed_graphs(view: SelectorView) -> list[Any]:
    slots, graphs = slot_parses(view), graph_parses(view)
    out = []
    for text in view.texts:
        g = slots[text].get("GRAPH")
        h = graphs.get(g) if g is not None else None
        out.append(None if h is None or isinstance(h, Exception) else h)
    return out


def consensus_graph(graphs: list[Any], problem: Problem):
    """Majority per-edge vote over the parsed graphs (edges in more than half of them); edges are
    added by descending vote (then name) and one that would break the problem's graph class is
    skipped. Returns None when no graph parsed."""
    from calver.verifier import CausalGraph

    parsed = [g for g in graphs if g is not None and hasattr(g, "directed")]
    if not parsed:
        return None
    first = parsed[0]
    if all(g is first or _same_graph(g, first) for g in parsed) and not set(problem.variables or ()) - set(first.nodes):
        return first  # unanimous: the consensus is that graph
    n = len(parsed)
    votes: Counter = Counter()
    node_votes: Counter = Counter()
    for g in parsed:
        votes.update(("->",) + e for e in g.directed)
        votes.update(("<->",) + e for e in g.bidirected)
        node_votes.update(g.nodes)
    nodes = [v for v, c in sorted(node_votes.items(), key=lambda x: (-x[1], x[0])) if 2 * c > n]
    nodes += [v for v in (problem.variables or ()) if v not in nodes]
    kind = problem.graph_class
    majority = [(e, c) for e, c in sorted(votes.items(), key=lambda x: (-x[1], x[0])) if 2 * c > n]
    try:  # usually the majority edges already form a graph of the problem's class
        return CausalGraph.build(nodes, [e[1:] for e, _ in majority if e[0] == "->"],
                                 [e[1:] for e, _ in majority if e[0] == "<->"], kind)
    except GraphError:
        pass
    directed: list[tuple[str, str]] = []
    bidirected: list[tuple[str, str]] = []
    for (typ, a, b), c in majority:
        d2, b2 = (directed + [(a, b)], bidirected) if typ == "->" else (directed, bidirected + [(a, b)])
        try:
            CausalGraph.build(nodes, d2, b2, kind)
        except GraphError:
            continue
        directed, bidirected = d2, b2
    try:
        return CausalGraph.build(nodes, directed, bidirected, kind)
    except GraphError:
        return None


def _same_graph(a, b) -> bool:
    return (a.kind == b.kind and a.directed == b.directed and a.bidirected == b.bidirected
            and set(a.nodes) == set(b.nodes))


def solve_on(g, problem: Problem, memo: dict | None = None) -> str | None:
    """The first member of the family's validity-class enumeration on ``g`` (node sets: smallest
    first, then by sorted names), rendered as ANSWER text; None if the class is empty or unknown.

    ``memo`` (one dict per selection run) reuses the solution when units share a consensus graph."""
    if memo is None:
        return _solve(g, problem)
    key = (problem.task, g.kind, frozenset(g.nodes), g.directed, g.bidirected, repr(sorted(problem.query.items())),
           repr(sorted(problem.data.items())) if problem.data else "")
    if key not in memo:
        memo[key] = _solve(g, problem)
    return memo[key]


def _solve(g, problem: Problem) -> str | None:
    fam = get_family(problem.task)
    p = Problem(task=problem.task, query=dict(problem.query), graph=g, mode="supplied",
                graph_class=problem.graph_class, data=dict(problem.data), id=problem.id)
    try:
        query = fam.normalize_query(p)
        # Only the first member is needed; a "maximal" variant must see the whole class to know it.
        limit = None if query.get("variant") == "maximal" else 1
        members = fam.validity_class(g, query, limit=limit)
        if not members:
            return None
        return fam.format_object(members[0])
    except (ProblemError, NotImplementedError, ValueError, GraphError, KeyError, TypeError):
        return None


class ExtractSolveSelector(Selector):
    """Consensus graph from the candidates' GRAPH slots, solved exactly: returns index -1 and an
    answer built outside the pool. Scores: each candidate graph's edge Jaccard with the consensus."""

    name = "extract_solve"

    def select_many(self, views):
        memo: dict = {}
        return [self.select(v, memo) for v in views]

    def select(self, view: SelectorView, memo: dict | None = None) -> Selection:
        try:
            graphs = _parsed_graphs(view)
        except KeyError:
            return Selection(-1, tuple(0.0 for _ in view.texts), None)
        g = consensus_graph(graphs, view.problem)
        if g is None:
            return Selection(-1, tuple(0.0 for _ in view.texts), None)
        cons = {("->",) + e for e in g.directed} | {("<->",) + e for e in g.bidirected}
        scores = []
        for h in graphs:
            if h is None or not hasattr(h, "directed"):
                scores.append(0.0)
                continue
            mine = {("->",) + e for e in h.directed} | {("<->",) + e for e in h.bidirected}
            u = len(mine | cons)
            scores.append(1.0 if u == 0 else len(mine & cons) / u)
        return Selection(-1, tuple(scores), solve_on(g, view.problem, memo))
