"""Exact graph recovery and edge F1 of constructed-graph units (the bnlearn ladder's graph numbers).

In constructed mode the policy reads prose and writes the graph itself, so each candidate's GRAPH slot
is its own graph. Here, after selection, it is compared with the source graph G* of the unstripped
problem (:attr:`UnitFacts.grading_problem`; evaluation is the only place labels are read):

* **exact**: the same node set, the same directed edges and the same bidirected edges (unordered);
* **edge F1**: over directed edges as ordered pairs plus bidirected edges as unordered pairs; when
  both graphs have no edge F1 is 1 (nothing to miss, nothing invented), when exactly one has none it is 0;
* a GRAPH slot that is absent or does not parse is *no graph*: not exact, F1 0.

The parsed graph is the scorer's (:attr:`Verdict.trace_graph`) when the unit's scores were computed
in this process; a score rebuilt from the stored table has no parse, so its GRAPH slot is parsed here
with the family's own parser, on the problem the scorer saw. Aggregates: the candidate-level exact rate
and mean F1, and both for the candidates chosen by the target and baseline selectors, each with a
clustered (source problem) bootstrap interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from calver.evaluation.bootstrap import mean_ci
from calver.evaluation.metrics import as_pick
from calver.evaluation.results import Interval, JsonRecord
from calver.evaluation.units import UnitFacts
from calver.verifier import CausalGraph, GraphError, get_family, split_slots

RECOVERY_SELECTORS = ("calver", "plurality")


@dataclass(frozen=True)
class EdgeScore:
    """One trace graph against the source graph (``n_pred``: its edges; ``n_true``: the source's)."""

    exact: bool
    precision: float
    recall: float
    f1: float
    n_true: int
    n_pred: int
    n_common: int


def edge_set(g: CausalGraph) -> set[tuple[str, ...]]:
    """Typed edges: ``("->", a, b)`` ordered, ``("<->", a, b)`` with ``a < b`` (the graph stores them sorted)."""
    return {("->", a, b) for a, b in g.directed} | {("<->", *sorted(e)) for e in g.bidirected}


def edge_score(trace: CausalGraph | None, source: CausalGraph) -> EdgeScore:
    """``trace`` (None: no parsable graph) scored against ``source``."""
    true = edge_set(source)
    if trace is None:
        return EdgeScore(False, float("nan"), 0.0, 0.0, len(true), 0, 0)
    pred = edge_set(trace)
    common = len(true & pred)
    exact = set(trace.nodes) == set(source.nodes) and pred == true
    precision = common / len(pred) if pred else (1.0 if not true else float("nan"))
    recall = common / len(true) if true else (1.0 if not pred else float("nan"))
    f1 = 1.0 if not true and not pred else 2 * common / (len(true) + len(pred))
    return EdgeScore(exact, precision, recall, f1, len(true), len(pred), common)


def source_graph(u: UnitFacts) -> CausalGraph | None:
    """G* of a constructed-mode unit (None for any other unit, or one whose labels hold no graph)."""
    p = u.grading_problem
    if p is None or p.mode != "constructed" or not isinstance(p.graph, CausalGraph):
        return None
    return p.graph


def trace_graph(u: UnitFacts, i: int, memo: dict | None = None) -> CausalGraph | None:
    """Candidate ``i``'s parsed GRAPH slot (None: absent or unparsable). ``memo``: parses by (problem,
    slot text), shared across calls (a pool repeats its GRAPH slots)."""
    ts = u.scores[i] if i < len(u.scores) else None
    if ts is not None and ts.slots is not None:  # scored in this process: the scorer's own parse
        g = ts.trace_graph
    else:
        text = split_slots(u.texts[i]).get("GRAPH")
        problem = u.problem or u.grading_problem
        if text is None or problem is None:
            return None
        memo = {} if memo is None else memo
        key = (id(problem), text)  # the units hold their problems, so ids stay unique during a call
        if key not in memo:
            try:
                memo[key] = get_family(problem.task).parse_graph_slot(text, problem)
            except (ValueError, GraphError, RecursionError):  # what the scorer counts as "does not parse"
                memo[key] = None
        g = memo[key]
    return g if isinstance(g, CausalGraph) else None


@dataclass
class UnitGraphRecovery(JsonRecord):
    """One constructed-mode unit: per candidate (sampling order) exact match and edge F1, and the
    index each reported selector chose (-1: an answer built outside the pool, which has no graph)."""

    problem_id: str
    seed: int
    source_id: str
    exact: list[bool]
    f1: list[float]
    parsed: list[bool]  # the candidate has a parsable GRAPH slot
    selected: dict[str, int] = field(default_factory=dict)

    def picked(self, selector: str) -> tuple[bool, float]:
        """(exact, F1) of the selector's candidate; no candidate is no graph."""
        i = self.selected[selector]
        return (self.exact[i], self.f1[i]) if 0 <= i < len(self.exact) else (False, 0.0)


@dataclass
class SelectedRecovery(JsonRecord):
    """Exact recovery and edge F1 of one selector's chosen candidate, over units."""

    exact: Interval
    f1: Interval


@dataclass
class GraphRecovery(JsonRecord):
    """Graph recovery over the constructed-mode units of an evaluation (or of one breakdown stratum)."""

    n_units: int
    n_clusters: int
    n_candidates: int
    n_unparsed: int  # candidates with no parsable GRAPH slot
    exact: Interval  # candidate-level exact-match rate
    f1: Interval  # candidate-level mean edge F1
    selected: dict[str, SelectedRecovery] = field(default_factory=dict)
    units: list[UnitGraphRecovery] | None = None  # left out of breakdown rows


def recover_units(units: Sequence[UnitFacts], indices: Mapping[str, Mapping[Hashable, Any]], *,
                  keys: Sequence[Hashable] | None = None, selectors: Sequence[str] = RECOVERY_SELECTORS
                  ) -> dict[Hashable, UnitGraphRecovery]:
    """{unit key: its recovery} for the constructed-mode units with a source graph; ``selectors``
    that ``indices`` holds are recorded with their picks."""
    keys = [u.key for u in units] if keys is None else list(keys)
    out: dict[Hashable, UnitGraphRecovery] = {}
    memo: dict = {}
    for u, key in zip(units, keys):
        src = source_graph(u)
        if src is None:
            continue
        graphs = [trace_graph(u, i, memo) for i in range(len(u.texts))]
        scores = [edge_score(g, src) for g in graphs]
        out[key] = UnitGraphRecovery(
            problem_id=u.problem_id, seed=u.seed, source_id=u.source_id, exact=[s.exact for s in scores],
            f1=[s.f1 for s in scores], parsed=[g is not None for g in graphs],
            selected={n: int(as_pick(indices[n][key])[0]) for n in selectors if n in indices and key in indices[n]})
    return out


def summarize(rows: Sequence[UnitGraphRecovery], *, draws: int, seed: int = 0, keep_units: bool = True
              ) -> GraphRecovery | None:
    """The aggregates over ``rows`` (None when there are none, e.g. a supplied-mode-only pool)."""
    rows = [r for r in rows if r.exact]
    if not rows:
        return None
    cand_clusters = [r.source_id for r in rows for _ in r.exact]
    unit_clusters = [r.source_id for r in rows]

    def ci(x: Sequence[float], clusters: Sequence[str]) -> Interval:
        return Interval.of(mean_ci(np.asarray(x, float), clusters, draws=draws, seed=seed))

    names = [n for n in rows[0].selected if all(n in r.selected for r in rows)]
    selected = {}
    for n in names:
        picks = [r.picked(n) for r in rows]
        selected[n] = SelectedRecovery(exact=ci([float(e) for e, _ in picks], unit_clusters),
                                       f1=ci([f for _, f in picks], unit_clusters))
    return GraphRecovery(
        n_units=len(rows), n_clusters=len(set(unit_clusters)), n_candidates=len(cand_clusters),
        n_unparsed=sum(not p for r in rows for p in r.parsed),
        exact=ci([float(e) for r in rows for e in r.exact], cand_clusters),
        f1=ci([f for r in rows for f in r.f1], cand_clusters),
        selected=selected, units=list(rows) if keep_units else None,
    )


def graph_recovery(units: Sequence[UnitFacts], indices: Mapping[str, Mapping[Hashable, Any]], *,
                   draws: int, seed: int = 0, keys: Sequence[Hashable] | None = None,
                   selectors: Sequence[str] = RECOVERY_SELECTORS) -> GraphRecovery | None:
    """:func:`summarize` of :func:`recover_units`: None when no unit is in constructed mode."""
    return summarize(list(recover_units(units, indices, keys=keys, selectors=selectors).values()),
                     draws=draws, seed=seed)


__all__ = ["EdgeScore", "GraphRecovery", "RECOVERY_SELECTORS", "SelectedRecovery", "UnitGraphRecovery",
           "edge_score", "edge_set", "graph_recovery", "recover_units", "source_graph", "summarize", "trace_graph"]
