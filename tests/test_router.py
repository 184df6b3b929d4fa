"""Extract-or-verify router: graph agreement, dev-only threshold choice (model-free), and
``calver route`` on a tiny-model pool (slow)."""

from __future__ import annotations

import json
import math

import pytest
from fixtures import level_problems

from calver.data_gen.generators import canonical_trace
from calver.evaluation.audits import replace_slot
from calver.evaluation.router_calibration import (
    candidate_thresholds,
    check_disjoint,
    choose_threshold,
    evaluate_router,
    split_by_source,
)
from calver.infer.firewall import strip_problem
from calver.infer.refine.router import graph_agreement, route


def _constructed():
    return level_problems("backdoor_set", 3, seed=4, levels=(1,))


def test_agreement_unanimous_split_and_unparsed():
    p = _constructed()[0]
    sp = strip_problem(p)
    good = canonical_trace(p)
    assert graph_agreement([good] * 4, sp)["agreement"] == 1.0
    assert graph_agreement(["no slots here"] * 4, sp)["agreement"] == 0.0
    # two of four candidates drop a query-relevant edge (into the outcome): margin falls below 1
    y = p.query["outcome"]
    a, b = next(e for e in sorted(p.graph.directed) if e[1] == y)
    other = replace_slot(good, "GRAPH", p.graph.with_edges(remove_directed=[(a, b)]).to_text())
    split = graph_agreement([good, good, other, other], sp)
    assert 0.0 <= split["agreement"] < 1.0 and split["edges"][f"{a} -> {b}"] == 0.5
    assert y in split["relevant_nodes"]
    # unparsed candidates scale the agreement down
    half = graph_agreement([good, good, "junk", "junk"], sp)
    assert half["parsed"] == 2 and math.isclose(half["agreement"], 0.5)


def _row(pid, src, ag, ex, ve, level="L1"):
    return {"problem_id": pid, "source_id": src, "level": level, "agreement": ag, "extract_correct": ex,
            "verify_correct": ve}


def test_threshold_chosen_on_dev_only():
    # dev: extraction is right exactly when agreement is high
    dev = [_row(f"d{i}", f"s{i}", ag, ag >= 0.7, ag < 0.7) for i, ag in enumerate([0.1, 0.3, 0.5, 0.8, 0.9, 1.0])]
    ch = choose_threshold(dev)
    assert ch["dev_accuracy"] == 1.0 and 0.5 < ch["threshold"] <= 0.8
    assert route(0.9, ch["threshold"]) == "extract" and route(0.2, ch["threshold"]) == "verify"
    test = [_row(f"t{i}", f"u{i}", ag, True, False, level=f"L{1 + i % 3}") for i, ag in enumerate([0.2, 0.6, 0.95])]
    res = evaluate_router(dev, test, draws=100)
    # the test outcomes cannot move the threshold
    flipped = [dict(r, extract_correct=not r["extract_correct"], verify_correct=not r["verify_correct"]) for r in test]
    assert evaluate_router(dev, flipped, draws=100)["threshold"] == res["threshold"] == ch["threshold"]
    assert set(res["levels"]) == {"L1", "L2", "L3", "all"}
    allrow = res["levels"]["all"]
    assert allrow["arms"]["always_extract"]["estimate"] == 1.0 and allrow["arms"]["always_verify"]["estimate"] == 0.0
    assert allrow["winners"] == ["always_extract"]
    # no information: the router verifies (CALVER is the default)
    flat = [_row(f"d{i}", f"s{i}", 0.0, False, False) for i in range(3)]
    assert choose_threshold(flat)["threshold"] == math.inf
    assert candidate_thresholds([0.2, 0.4]) == [-math.inf, pytest.approx(0.3), math.inf]


def test_overlapping_splits_are_refused():
    dev = [_row("a", "s1", 0.5, True, False)]
    with pytest.raises(ValueError, match="problem_id"):
        check_disjoint(dev, [_row("a", "s2", 0.5, True, False)])
    with pytest.raises(ValueError, match="source_id"):
        evaluate_router(dev, [_row("b", "s1", 0.5, True, False)])
    rows = [_row(f"p{i}-L{lv}", f"s{i}", 0.5, True, False) for i in range(5) for lv in (1, 2, 3)]
    d, t = split_by_source(rows, 0.5, seed=3)
    assert d and t and not ({r["source_id"] for r in d} & {r["source_id"] for r in t})
    assert split_by_source(rows, 0.5, seed=3) == (d, t)


def test_level_problems_share_sources_across_levels():
    ps = level_problems("backdoor_set", 3, seed=4)
    by = {}
    for p in ps:
        by.setdefault(p.source_id, set()).add(p.meta["text_level"])
        assert p.mode == "constructed" and strip_problem(p).graph is None
    assert all(v == {"L1", "L2", "L3"} for v in by.values())


@pytest.mark.slow
def test_route_cli_on_tiny_pool(tiny_model_dir, tmp_path_factory, tmp_path):
    pytest.importorskip("torch")
    from fixtures import demo_problems, sample_pool

    from calver.cli import main

    pool = sample_pool(demo_problems(), tmp_path_factory.getbasetemp() / "refine_shared_pool", tiny_model_dir,
                       k=2, max_tokens=12)
    out = tmp_path / "route"
    assert main(["route", "--pool", str(pool.root), "--draws", "200", "--out", str(out)]) == 0
    res = json.loads((out / "route.json").read_text())
    assert not set(res["dev_sources"]) & set(res["test_sources"])
    units = [json.loads(x) for x in (out / "route_units.jsonl").read_text().splitlines()]
    assert len(units) == 7 and {u["split"] for u in units} == {"dev", "test"}
    levels = {u["level"] for u in units}
    assert {"L1", "L2", "L3"} <= levels
    for lv, t in res["levels"].items():
        assert set(t["arms"]) == {"router", "always_extract", "always_verify"}
    assert "| all |" in (out / "route.md").read_text()
    # two pools: the same pool as test is refused (shared ids), never silently evaluated
    assert main(["route", "--pool", str(pool.root), "--test-pool", str(pool.root), "--out", str(tmp_path / "r2")]) == 2
