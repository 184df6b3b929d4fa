"""CausalGraph2LLM-style items (Sheth et al. 2025) on bnlearn structures, over five graph encodings.

Each item is a supplied-graph :class:`Problem` whose ``text`` is the graph rendered in one encoding
(:data:`ENCODINGS`: textual prose, JSON parents map, adjacency matrix, GraphML, Graphviz DOT, all
through :func:`calver.verifier.render_graph`, which :func:`calver.verifier.parse_graph` reads back).
Tasks:

* ``mediator`` with variants ``any`` (name one mediator) and ``all`` (list every mediator);
* ``intervention_reachability`` (after do(S), does source still reach target?), balanced yes/no:
  "no" items are *nontrivial* -- the source reaches the target in the original graph and the
  intervention cuts every directed path -- and "yes" items intervene on a node that lies on
  some but not all directed paths, or on an off-path ancestor when no such node exists.

The rendered graph is the whole network when it has at most ``max_nodes`` nodes, else the
ancestral subgraph of the query nodes (itself at most ``max_nodes``). The same structural query is
rendered in every encoding (``meta["unit"]`` groups them), so accuracy can be compared per encoding;
they share one ``source_id`` (network + query, :func:`calver.data_gen.meta.query_source_id`), the
evaluation's cluster key. ``meta`` also holds ``source``, ``network``, ``encoding`` and ``n_valid``.
"""

from __future__ import annotations

import itertools
import random
from typing import Any, Iterable

from calver.data_gen.meta import class_size, query_source_id
from calver.verifier.graph import CausalGraph
from calver.verifier.parsers import render_graph
from calver.verifier.problem import Problem

__all__ = ["ENCODINGS", "cg2llm_units", "cg2llm_problems"]

ENCODINGS = ("prose", "json_parents", "matrix", "graphml", "dot")


def _context(g: CausalGraph, nodes: Iterable[str], max_nodes: int) -> CausalGraph | None:
    from calver.data_gen.bnlearn import ancestral_subgraph

    if len(g) <= max_nodes:
        return g
    sub = ancestral_subgraph(g, nodes)
    return sub if len(sub) <= max_nodes else None


def _mediator_units(g, rng, n, variant, max_nodes):
    from calver.verifier.primitives import descendants, mediators

    pairs = [(x, y) for x in g.nodes for y in sorted(descendants(g, x))]
    rng.shuffle(pairs)
    out = []
    for x, y in pairs:
        if len(out) >= n:
            break
        ctx = _context(g, (x, y), max_nodes)
        if ctx is None:
            continue
        meds = mediators(ctx, x, y)
        if not meds or (variant == "all" and len(meds) < 2 and rng.random() < 0.5):
            continue  # prefer "all" items with several mediators
        out.append((ctx, {"treatment": x, "outcome": y, "variant": variant}, {"mediators": sorted(meds)}))
    return out


def _intervention_units(g, rng, n, max_nodes):
    from calver.verifier.primitives import ancestors, descendants, mediators, reachable_after_do

    pairs = [(x, y) for x in g.nodes for y in sorted(descendants(g, x))]
    rng.shuffle(pairs)
    yes, no = [], []
    half = (n + 1) // 2
    for x, y in pairs:
        if len(yes) >= half and len(no) >= n - half:
            break
        ctx = _context(g, (x, y), max_nodes)
        if ctx is None:
            continue
        meds = sorted(mediators(ctx, x, y))
        if len(no) < n - half and meds:
            # "no": a smallest set of mediators (at most 2) that cuts every directed path
            cut = next((c for k in (1, 2) for c in itertools.combinations(meds, k)
                        if not reachable_after_do(ctx, c, x, y)), None)
            if cut:
                no.append((ctx, {"do": list(cut), "source": x, "target": y}, {"label": False}))
                continue
        if len(yes) < half:
            partial = [m for m in meds if reachable_after_do(ctx, [m], x, y)]
            others = sorted((ancestors(ctx, [y]) | {y}) - {x, y} - set(meds) - ancestors(ctx, [x]))
            pool = partial or others
            if pool:
                do = [rng.choice(pool)]
                if reachable_after_do(ctx, do, x, y):
                    yes.append((ctx, {"do": do, "source": x, "target": y}, {"label": True}))
    units = yes + no
    rng.shuffle(units)
    return units


def cg2llm_units(g: CausalGraph, task: str, n: int, rng: random.Random, *, variant: str = "any",
                 max_nodes: int = 30) -> list[tuple[CausalGraph, dict[str, Any], dict[str, Any]]]:
    """``(context graph, query, info)`` units before rendering."""
    if task == "mediator":
        return _mediator_units(g, rng, n, variant, max_nodes)
    if task == "intervention_reachability":
        return _intervention_units(g, rng, n, max_nodes)
    raise ValueError(f"CausalGraph2LLM tasks are mediator and intervention_reachability, not {task!r}")


def cg2llm_problems(network: str | CausalGraph, task: str, n: int = 10, seed: int = 0, *, variant: str = "any",
                    encodings: Iterable[str] = ENCODINGS, max_nodes: int = 30, name: str = "") -> list[Problem]:
    """``n`` query units x ``len(encodings)`` problems; ``network`` is a bnlearn name or a graph."""
    if isinstance(network, str):
        from calver.data_gen.bnlearn import load_network

        g, _ = load_network(network)
        name = name or network
    else:
        g, name = network, name or "graph"
    rng = random.Random(f"cg2llm:{name}:{task}:{variant}:{seed}")
    out: list[Problem] = []
    from calver.verifier.registry import get_family

    fam = get_family(task)
    for u, (ctx, query, info) in enumerate(cg2llm_units(g, task, n, rng, variant=variant, max_nodes=max_nodes)):
        probe = Problem(task=task, query=query, graph=ctx)
        question = fam.question_text(fam.normalize_query(probe))
        sid = query_source_id("cg2llm", name, task, query)  # one cluster per unit, whatever the encoding
        n_valid = class_size(probe, max_nodes=None)  # mediators / one decision: cheap at any size
        for enc in encodings:
            meta = {"source": "cg2llm", "network": name, "encoding": enc, "unit": u, **info}
            if n_valid is not None:
                meta["n_valid"] = n_valid
            out.append(Problem(task=task, query=query, graph=ctx, mode="supplied",
                               text=f"{render_graph(ctx, enc)}\n\n{question}",
                               id=f"cg2llm-{name}-{task}-{variant if task == 'mediator' else 'do'}-{seed}-{u}-{enc}",
                               source_id=sid, meta=meta))
    return out
