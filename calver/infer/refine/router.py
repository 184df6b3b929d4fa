"""Extract-or-verify router: the label-free routing decision (``calver route`` evaluates it).

Per unit, :func:`graph_agreement` measures how much the K candidates agree on the graph they wrote:
each candidate's GRAPH slot is parsed; the consensus graph is the per-edge majority
(:func:`calver.infer.selectors.symbolic.consensus_graph`); the query-relevant nodes are the query's
nodes and their ancestors in the consensus graph; for every typed edge among those nodes that any
candidate wrote, the majority margin is ``|2 * share - 1|`` (1 = unanimous, 0 = an even split). The
agreement is the mean margin times the share of candidates whose GRAPH parsed (0 when none did).

:func:`route` sends a unit to ``extract`` (consensus graph + exact solve: the ``extract_solve``
selector) when agreement >= threshold, else to ``verify`` (CALVER over the candidates). Choosing the
threshold reads labels, so it lives with its report in :mod:`calver.evaluation.router_calibration`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from calver.infer.selectors.symbolic import consensus_graph
from calver.verifier import GraphError, Problem, get_family, split_slots
from calver.verifier.paths import ancestors

ROUTES = ("extract", "verify")


# ---- agreement ------------------------------------------------------------------------------------
def _query_nodes(problem: Problem) -> set[str]:
    fam = get_family(problem.task)
    return fam.query_nodes(fam.normalize_query(problem))


def _typed_edges(g) -> set[tuple[str, str, str]]:
    return {("->", a, b) for a, b in g.directed} | {("<->",) + tuple(sorted((a, b))) for a, b in g.bidirected}


def graph_agreement(texts: Sequence[str], problem: Problem) -> dict[str, Any]:
    """Agreement of the candidates' GRAPH slots on the query-relevant edges (``problem`` label-free)."""
    fam = get_family(problem.task)
    graphs = []
    for t in texts:
        g = split_slots(t).get("GRAPH")
        try:
            graphs.append(fam.parse_graph_slot(g, problem) if g is not None else None)
        except (ValueError, GraphError, RecursionError, TypeError):
            graphs.append(None)
    parsed = [g for g in graphs if g is not None and hasattr(g, "directed")]
    n = len(texts)
    if not parsed:
        return {"agreement": 0.0, "parsed": 0, "k": n, "relevant_nodes": [], "edges": {}}
    cons = consensus_graph(graphs, problem)
    qn = _query_nodes(problem)
    if cons is not None and qn:
        present = [v for v in qn if v in cons]
        rel = set(qn) | (set(ancestors(cons, present)) if present else set())
    else:  # no query nodes (cycle_witness) or no consensus: every node is relevant
        rel = set().union(*(set(g.nodes) for g in parsed))
    votes: Counter = Counter()
    for g in parsed:
        votes.update(e for e in _typed_edges(g) if e[1] in rel and e[2] in rel)
    shares = {e: c / len(parsed) for e, c in votes.items()}
    margin = sum(abs(2 * s - 1) for s in shares.values()) / len(shares) if shares else 1.0
    return {"agreement": margin * len(parsed) / n, "parsed": len(parsed), "k": n, "relevant_nodes": sorted(rel),
            "edges": {" ".join((e[1], e[0], e[2])): s for e, s in sorted(shares.items())}}


def route(agreement: float, threshold: float) -> str:
    """``extract`` when the candidates agree at least ``threshold``, else ``verify``."""
    return "extract" if agreement >= threshold else "verify"


__all__ = ["ROUTES", "graph_agreement", "route"]
