"""Exact graph recovery and edge F1 of constructed-mode units, and the verification-mode report line.

Oracle: the edge sets of hand-built GRAPH slots are networkx graphs built in this file from the very edge
lists the slot text is rendered from (directed edges as ordered pairs of a DiGraph, bidirected ones as
unordered pairs of a Graph), against the problem's source graph read the same way; exact match and F1
are computed from those sets here, not by calver.
"""

from __future__ import annotations

import dataclasses
import json
import random

import networkx as nx
import pytest
from fixtures import build_pool, level_problems

from calver.data_gen import GenConfig
from calver.data_gen.generators import generate, validity_objects
from calver.evaluation.audits import replace_slot
from calver.evaluation.evaluate import evaluate
from calver.evaluation.graph_recovery import edge_score, recover_units, trace_graph
from calver.evaluation.report import render_markdown
from calver.evaluation.results import EvalResult
from calver.evaluation.units import load_units
from calver.verifier import get_family

DRAWS = dict(draws=60, decomp_draws=40, audits=False, ladder=False)


def _nx(directed, bidirected) -> tuple[nx.DiGraph, nx.Graph]:
    d, b = nx.DiGraph(), nx.Graph()
    d.add_edges_from(directed)
    b.add_edges_from(bidirected)
    return d, b


def _oracle(nodes, directed, bidirected, source) -> tuple[bool, float]:
    """(exact, F1) of a trace graph given as edge lists against ``source`` (a CausalGraph read as lists)."""
    td, tb = _nx(source.directed, source.bidirected)
    pd_, pb = _nx(directed, bidirected)
    true = {("d", *e) for e in td.edges()} | {("b", frozenset(e)) for e in tb.edges()}
    pred = {("d", *e) for e in pd_.edges()} | {("b", frozenset(e)) for e in pb.edges()}
    exact = set(nodes) == set(source.nodes) and true == pred
    f1 = 1.0 if not true and not pred else 2 * len(true & pred) / (len(true) + len(pred))
    return exact, f1


def _graph_text(nodes, directed, bidirected) -> str:
    touched = {n for e in [*directed, *bidirected] for n in e}
    return ", ".join([f"{a} -> {b}" for a, b in directed] + [f"{a} <-> {b}" for a, b in bidirected]
                     + [n for n in nodes if n not in touched])


def _admg_problem():
    """A constructed-mode L1 problem on an ADMG (so a trace may carry bidirected edges)."""
    return next(p for p in level_problems("backdoor_set", 4, levels=(1,), n_nodes=(5, 6), latent=0.4,
                                          graph_class=("ADMG",))
                if len(p.graph.directed) >= 3 and validity_objects(p))


def _variants(p):
    """(label, nodes, directed, bidirected) of hand-built trace graphs, and the canonical trace."""
    src = p.graph
    nodes, d, b = list(src.nodes), sorted(src.directed), sorted(src.bidirected)
    rev = next(e for e in d if nx.is_directed_acyclic_graph(nx.DiGraph([x for x in d if x != e] + [e[::-1]])))
    extra = next((x, y) for x in nodes for y in nodes if x < y and (x, y) not in src.bidirected)
    return [("perfect", nodes, d, b), ("missing", nodes, d[1:], b),
            ("reversed", nodes, [e[::-1] if e == rev else e for e in d], b), ("extra_bi", nodes, d, [*b, extra])]


def test_hand_built_traces_match_the_networkx_oracle(tmp_path):
    p = _admg_problem()
    base = get_family(p.task).canonical_trace(p, validity_objects(p)[0])
    variants = _variants(p)
    texts = [replace_slot(base, "GRAPH", _graph_text(n, d, b)) for _, n, d, b in variants]
    texts.append(replace_slot(base, "GRAPH", "A -> -> ((B"))  # does not parse: no graph
    pool = build_pool(str(tmp_path / "pool"), [(p, 0, texts)], raw_texts=True)
    res = evaluate(str(pool.root), ["first", "calver", "plurality"], **DRAWS)
    g = res.graph_recovery
    assert g is not None and g.n_units == 1 and g.n_candidates == 5 and g.n_unparsed == 1
    want = [_oracle(n, d, b, p.graph) for _, n, d, b in variants] + [(False, 0.0)]
    (row,) = g.units
    assert row.exact == [w[0] for w in want] and row.f1 == pytest.approx([w[1] for w in want])
    assert want[0] == (True, 1.0) and not any(w[0] for w in want[1:])
    assert 0 < want[1][1] < 1 and 0 < want[2][1] < 1 and 0 < want[3][1] < 1  # each damage costs some F1
    assert g.exact.estimate == pytest.approx(1 / 5) and g.f1.estimate == pytest.approx(sum(w[1] for w in want) / 5)
    for name in ("calver", "plurality"):  # the selectors' picks read the same per-candidate numbers
        i = row.selected[name]
        assert i == res.units[0].index[name]
        assert g.selected[name].exact.estimate == float(want[i][0])
        assert g.selected[name].f1.estimate == pytest.approx(want[i][1])
    # a score rebuilt from the stored table has no parse: the GRAPH slot is parsed again, to the same graphs
    (u,) = load_units(pool)
    stored = dataclasses.replace(u, scores=[dataclasses.replace(s, slots=None, trace_graph=None) for s in u.scores])
    again = recover_units([stored], {"calver": {u.key: row.selected["calver"]}})[u.key]
    assert again.exact == row.exact and again.f1 == row.f1
    assert [trace_graph(stored, i) == trace_graph(u, i) for i in range(5)] == [True] * 5
    back = EvalResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back.graph_recovery == g and back.to_dict() == res.to_dict()
    md = render_markdown(res, {})
    assert "## Graph recovery (constructed mode)" in md and "| `calver` pick | 1 |" in md
    assert "Verification: candidate_graph 1 units." in md


def test_edge_score_edge_cases():
    p = _admg_problem()
    empty = dataclasses.replace(p.graph, directed=frozenset(), bidirected=frozenset())
    s = edge_score(empty, empty)
    assert s.exact and s.f1 == 1.0  # nothing to find and nothing invented
    assert edge_score(empty, p.graph).f1 == 0.0 and edge_score(p.graph, empty).f1 == 0.0
    for src in (empty, p.graph):  # no parsable graph: never exact, F1 0, even against an edgeless source
        none = edge_score(None, src)
        assert not none.exact and none.f1 == 0.0 and none.n_pred == 0


def test_l1_canonical_pool_recovers_every_graph_and_breaks_down_by_level(tmp_path):
    problems = level_problems("backdoor_set", 6, levels=(1,), all_levels=False)
    rng = random.Random(0)
    units = [(p, s, [rng.choice(validity_objects(p) or [frozenset()]) for _ in range(3)])
             for p in problems for s in (0, 1)]
    pool = build_pool(str(tmp_path / "pool"), units)
    res = evaluate(str(pool.root), ["first", "calver", "plurality"], by=["text_level", "verification"], **DRAWS)
    g = res.graph_recovery
    assert g.n_units == len(units) and g.n_clusters == len({p.source_id for p in problems})
    assert g.exact.estimate == 1.0 and g.f1.estimate == 1.0 and g.n_unparsed == 0
    assert all(s.exact.estimate == 1.0 and s.f1.estimate == 1.0 for s in g.selected.values())
    assert set(g.selected) == {"calver", "plurality"}
    (row,) = res.breakdowns["text_level"].rows
    assert row.stratum == "L1" and row.graph_recovery.exact.estimate == 1.0 and row.graph_recovery.units is None
    assert [r.stratum for r in res.breakdowns["verification"].rows] == ["candidate_graph"]
    assert res.verification == {"candidate_graph": len(units)}
    md = render_markdown(res, {})
    assert "Graph recovery by `text_level`" in md and "| L1 | all candidates |" in md


def test_supplied_and_knights_pool_has_no_graph_recovery_and_names_its_modes(tmp_path):
    sup = generate("backdoor_set", 3, GenConfig(seed=3, n_nodes=(4, 5)))
    kk = generate("knights_knaves", 2, GenConfig(seed=3))
    units = [(p, 0, [o for o in validity_objects(p)[:2]] or [frozenset()]) for p in [*sup, *kk]]
    pool = build_pool(str(tmp_path / "pool"), units)
    res = evaluate(str(pool.root), ["first", "calver", "plurality"], by=["verification"], **DRAWS)
    assert res.graph_recovery is None and "graph_recovery" not in res.to_dict()
    assert res.verification == {"source_graph": 3, "grounded": 2}
    assert all(r.graph_recovery is None for r in res.breakdowns["verification"].rows)
    md = render_markdown(res, {})
    assert "Graph recovery" not in md
    assert "Verification: source_graph 3 units; grounded 2 units." in md
    assert "- `grounded` (K&K)" in md and "- `source_graph` (supplied graph)" in md


def test_candidate_local_knights_units_are_named_as_such(tmp_path):
    kk = [dataclasses.replace(p, meta={**p.meta, "verification": "candidate_local"})
          for p in generate("knights_knaves", 2, GenConfig(seed=5))]
    pool = build_pool(str(tmp_path / "pool"), [(p, 0, validity_objects(p)[:2]) for p in kk])
    res = evaluate(str(pool.root), ["first", "calver", "plurality"], by=["verification"], **DRAWS)
    assert res.verification == {"candidate_local": 2} and res.graph_recovery is None
    assert [r.stratum for r in res.breakdowns["verification"].rows] == ["candidate_local"]
    md = render_markdown(res, {})
    assert "Verification: candidate_local 2 units." in md
    assert "- `candidate_local` (K&K): the formal statements are hidden; CALVER read each speaker's" in md
