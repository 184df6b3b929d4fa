"""Mechanism audits: perturbations applied to frozen candidates (nothing is resampled).

* :func:`rename_nodes` -- consistent node renaming of a trace *and* its problem (scores must not move);
* :func:`swap_answer` -- replace the ANSWER slot by an object invalid on the verification graph
  (node-set tasks: a max-score trace drops to exactly 3: strategy, result and answer bits fail);
* :func:`damage_witness` -- make one edge of a witness path in the DERIVATION slot absent from the
  verification graph (only the derivation bit fails: exactly 5);
* :func:`corrupt_graph` -- the graph-corruption ladder for the checker's graph (delete / add /
  reverse a fraction of edges, a random graph of the same size, every edge reversed).

All are pure functions of trace text, problem and an explicit RNG. Pool-level summaries live in
:mod:`calver.evaluation.audit_runs`.
"""

from __future__ import annotations

import dataclasses
import re
from itertools import combinations
from typing import Any

import numpy as np

from calver.verifier import CausalGraph, GraphClass, Problem, Verdict, get_family, score
from calver.verifier.contract import parse_call, slot_spans
from calver.verifier.parsers import parse_path

# ---- slot locations -----------------------------------------------------------------------------------


def replace_slot(trace: str, slot: str, value: str) -> str:
    """``trace`` with one slot's value replaced; surrounding text and trailing whitespace kept."""
    start, end = slot_spans(trace)[slot]
    old = trace[start:end]
    tail = old[len(old.rstrip()):]
    return trace[:start] + value + tail + trace[end:]


# ---- renaming -----------------------------------------------------------------------------------------


def default_mapping(problem: Problem, rng: np.random.Generator | int = 0) -> dict[str, str]:
    """A random bijection from the problem's variables to fresh opaque names (``Q07`` ...)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    nodes = list(problem.variables or (problem.graph.nodes if problem.graph is not None else ()))
    taken = set(nodes)
    prefix = "Q"
    while any(n.startswith(prefix) for n in taken):
        prefix += "Q"
    perm = rng.permutation(len(nodes))
    return {n: f"{prefix}{int(p):02d}" for n, p in zip(nodes, perm)}


def rename_text(text: str, mapping: dict[str, str], keep_keys: bool = True) -> str:
    """Rename whole-word node names simultaneously. Operations (``name(``) are kept, and so are keys
    (``name=``) unless ``keep_keys`` is False (CPT text such as ``P(X=1 | Z=0)`` names nodes that way)."""
    if not mapping:
        return text
    names = sorted(mapping, key=len, reverse=True)
    guard = r"(?!\s*[=(])" if keep_keys else r"(?!\s*\()"
    pat = re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w-])" + guard)
    return pat.sub(lambda m: mapping[m.group(1)], text)


def _rename_value(kind: str, value: Any, mapping: dict[str, str]) -> Any:
    r = lambda n: mapping.get(n, n)  # noqa: E731
    if kind == "node" and isinstance(value, str):
        return r(value.strip())
    if kind == "set" and not isinstance(value, str):
        return [r(str(v)) for v in value]
    if kind in ("path", "list") and not isinstance(value, str):
        return [r(str(v)) for v in value]
    if isinstance(value, str) and kind in ("set", "path", "list", "typed_path"):
        return rename_text(value, mapping)
    return value


def _rename_data(obj: Any, mapping: dict[str, str]) -> Any:
    """Problem payloads (CPTs, statements): node names as whole strings, keys, or words in text."""
    if isinstance(obj, str):
        return mapping[obj] if obj in mapping else rename_text(obj, mapping, keep_keys=False)
    if isinstance(obj, dict):
        return {_rename_data(k, mapping): _rename_data(v, mapping) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_rename_data(v, mapping) for v in obj)
    return obj


def rename_problem(problem: Problem, mapping: dict[str, str]) -> Problem:
    family = get_family(problem.task)
    query = dict(problem.query)
    for key, kind in family.query_types.items():
        if key in query:
            query[key] = _rename_value(kind, query[key], mapping)
    return dataclasses.replace(
        problem,
        query=query,
        graph=problem.graph.relabel(mapping) if problem.graph is not None else None,
        variables=tuple(mapping.get(v, v) for v in problem.variables) if problem.variables else problem.variables,
        data=_rename_data(problem.data, mapping),
        text=rename_text(problem.text, mapping) if problem.text else problem.text,
    )


def rename_nodes(trace: str, problem: Problem, mapping: dict[str, str] | None = None,
                 rng: np.random.Generator | int = 0) -> tuple[str, Problem]:
    """Consistently rename nodes in a trace and its problem; every score should be unchanged."""
    mapping = mapping if mapping is not None else default_mapping(problem, rng)
    return rename_text(trace, mapping), rename_problem(problem, mapping)


# ---- answer swap ----------------------------------------------------------------------------------------


def invalid_answer(trace: str, problem: Problem, rng: np.random.Generator | int = 0,
                   sc: Verdict | None = None) -> Any:
    """An object of the family's answer type that differs from the trace's ANSWER and is invalid on
    the graph the trace is judged on (``Verdict.g_ver``), the first of the family's seeded search
    (:meth:`~calver.verifier.family.TaskFamily.invalid_objects`); None if there is none or no graph."""
    sc = sc if sc is not None else score(trace, problem)
    if sc.g_ver is None:
        return None
    family = get_family(problem.task)
    return next(family.invalid_objects(sc.g_ver, family.normalize_query(problem), sc.answer, rng, problem), None)


def swap_answer(trace: str, problem: Problem, rng: np.random.Generator | int = 0) -> str | None:
    """``trace`` with its ANSWER replaced by an object invalid on the verification graph
    (:func:`invalid_answer`: single nodes, the empty set, pairs, ... in a seeded order); None if the
    trace has no ANSWER slot or no invalid object is found."""
    if "ANSWER" not in slot_spans(trace):
        return None
    obj = invalid_answer(trace, problem, rng)
    return None if obj is None else replace_slot(trace, "ANSWER", get_family(problem.task).format_object(obj))


# ---- witness damage ---------------------------------------------------------------------------------------

_FLIPS = {"->": ("<-",), "<-": ("->",), "<->": ("->", "<-")}


def _witness_texts(family, args: dict[str, str]) -> list[str]:
    from calver.verifier.tasks.base import split_paths

    key = family.witness_arg
    return split_paths(args[key]) if key is not None and key in args else []


def damage_witness(trace: str, problem: Problem, sc: Verdict | None = None) -> str | None:
    """``trace`` with one edge of a DERIVATION witness path changed so it is absent from the
    verification graph (an arrow reversed, or a bidirected edge made directed); None if the trace
    lists no witness path with an edge that can be damaged. ``sc``: the trace's score on ``problem``
    when the caller has it (its ``g_ver`` is the verification graph)."""
    spans = slot_spans(trace)
    if "DERIVATION" not in spans:
        return None
    start, end = spans["DERIVATION"]
    region = trace[start:end]
    g = (sc if sc is not None else score(trace, problem)).g_ver
    if g is None:
        return None
    try:
        _op, args = parse_call(region.strip())
    except ValueError:
        return None
    family = get_family(problem.task)
    for raw in _witness_texts(family, args):
        try:
            nodes, types = parse_path(raw)
        except ValueError:
            continue
        if len(nodes) < 2:
            continue
        types = list(types) if types else ["->"] * (len(nodes) - 1)
        for i, t in enumerate(types):
            a, b = nodes[i], nodes[i + 1]
            for t2 in _FLIPS.get(t, ()):
                if a in g and b in g and not g.has_edge(a, b, t2):
                    new_types = types[:i] + [t2] + types[i + 1 :]
                    parts = [nodes[0]]
                    for tt, n in zip(new_types, nodes[1:]):
                        parts += [tt, n]
                    pos = region.find(raw)
                    if pos < 0:
                        return None
                    new_region = region[:pos] + " ".join(parts) + region[pos + len(raw) :]
                    return trace[:start] + new_region + trace[end:]
    return None


# ---- graph corruption ---------------------------------------------------------------------------------------

LADDER = ("clean", "delete", "add", "reverse", "random", "reverse_all")


def _acyclic(nodes, directed) -> bool:
    return CausalGraph.build(nodes, directed, (), GraphClass.DIRECTED, validate=False).acyclic


def corrupt_graph(graph: CausalGraph, kind: str, frac: float = 0.1,
                  rng: np.random.Generator | int = 0) -> CausalGraph:
    """A corrupted copy of ``graph`` (same nodes and class label) for the checker.

    ``delete``/``add``/``reverse``: ``max(1, round(frac * |E|))`` edges; additions and reversals keep
    an acyclic graph acyclic when possible. ``random``: a random graph with the same numbers of
    directed and bidirected edges (acyclic if the original is). ``reverse_all``: every directed
    edge reversed. ``clean``: the graph itself.
    """
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    nodes = sorted(graph.nodes)  # the draws depend on the graph, not on the order a file listed its nodes in
    d = sorted(graph.directed)
    bi = sorted(graph.bidirected)
    n_edges = len(d) + len(bi)
    m = max(1, int(round(frac * n_edges))) if n_edges else 0
    acyclic = graph.acyclic
    if kind == "clean":
        return graph
    if kind == "delete":
        edges = [("d", e) for e in d] + [("b", e) for e in bi]
        drop = {edges[i] for i in rng.permutation(len(edges))[:m]}
        d2 = [e for e in d if ("d", e) not in drop]
        b2 = [e for e in bi if ("b", e) not in drop]
    elif kind == "add":
        order = [nodes[i] for i in rng.permutation(len(nodes))]
        if acyclic:  # consistent with a topological order of the current graph
            import networkx as nx

            order = list(nx.lexicographical_topological_sort(graph.to_networkx(), key=lambda n: order.index(n)))
        pos = {n: i for i, n in enumerate(order)}
        present = set(d) | {(b, a) for a, b in d}
        pairs = [(a, b) for a in nodes for b in nodes if a != b and (a, b) not in present
                 and (not acyclic or pos[a] < pos[b])]
        picks = [pairs[i] for i in rng.permutation(len(pairs))[:m]]
        d2, b2 = d + picks, bi
    elif kind == "reverse":
        current = set(d)
        done = 0
        for i in rng.permutation(len(d)):
            if done >= m:
                break
            a, b = d[i]
            trial = (current - {(a, b)}) | {(b, a)}
            if (b, a) in current or (acyclic and not _acyclic(nodes, trial)):
                continue
            current, done = trial, done + 1
        d2, b2 = sorted(current), bi
    elif kind == "random":
        order = [nodes[i] for i in rng.permutation(len(nodes))]
        if acyclic:
            pairs = [(order[i], order[j]) for i in range(len(order)) for j in range(i + 1, len(order))]
        else:
            pairs = [(a, b) for a in nodes for b in nodes if a != b]
        d2 = [pairs[i] for i in rng.permutation(len(pairs))[: len(d)]]
        und = [(a, b) for a, b in combinations(sorted(nodes), 2)]
        b2 = [und[i] for i in rng.permutation(len(und))[: len(bi)]]
    elif kind == "reverse_all":
        d2, b2 = [(b, a) for a, b in d], bi
    else:
        raise ValueError(f"unknown corruption {kind!r}; expected one of {LADDER}")
    return CausalGraph.build(graph.nodes, d2, b2, graph.kind, validate=False)
