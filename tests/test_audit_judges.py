"""Judge / PRM audit: the verifier's expected row by construction (model-free), and
``calver audit-judges`` on a tiny-model pool with a PRM and an LLM judge (slow)."""

from __future__ import annotations

import json
import random

import pytest

from calver.data_gen.generators import GenConfig, available_tasks, canonical_trace, generate
from calver.data_gen.text_levels import constructed_problems
from calver.evaluation.audit_judges import VARIANTS, acceptance_table, make_variants, score_items, verifier_matches
from calver.infer.firewall import strip_problem
from calver.verifier import SLOTS, get_family, score

B = {s: i for i, s in enumerate(SLOTS)}


def _problems():
    ps = [p for t in available_tasks() for p in generate(t, 2, GenConfig(seed=9))]
    for lv in (1, 3):
        ps += constructed_problems(generate("backdoor_set", 3, GenConfig(seed=9)), lv, random.Random(lv))[0]
    return ps


def test_verifier_expected_row_by_construction():
    items = []
    probs = {}
    for j, p in enumerate(_problems()):
        sp = strip_problem(p)
        probs[p.id] = sp
        fam = get_family(p.task)
        vs = make_variants(canonical_trace(p), sp)
        assert "clean" in vs and "truncation" in vs and "answer_swap" in vs
        for name, v in vs.items():
            ts = score(v["text"], sp)
            bits = ts.bits
            if name == "clean":
                assert ts.total == 6
            elif name == "answer_swap":
                assert ts.total <= 5
                if fam.answer_type == "set":  # documented: b3, b5, b6 fail -> exactly 3
                    assert ts.total == 3 and bits[B["STRATEGY"]] == bits[B["RESULT"]] == bits[B["ANSWER"]] == 0
            elif name == "consistent_swap":
                assert ts.total <= 5
                if fam.answer_type != "bool":  # the returned object is invalid: the predicate bit fails
                    assert bits[B["STRATEGY"]] == 0
            elif name == "strategy_only":
                assert ts.total <= 5
            elif name == "edge_deletion":
                if p.mode == "supplied":  # b1 fails, nothing else reads the trace's graph
                    assert bits[B["GRAPH"]] == 0 and ts.total == 5
                elif v["expected_reject"]:
                    assert ts.total <= 5
            elif name == "truncation":  # only the derivation bit
                assert bits[B["DERIVATION"]] == 0 and ts.total == 5
            items.append({"problem_id": p.id, "source_id": p.source_id, "trace_id": j, "variant": name,
                          "text": v["text"], "expected_reject": v["expected_reject"]})
    scorers = score_items(items, probs)
    assert scorers == ["verifier"] and verifier_matches(items)
    rows = {r["variant"]: r for r in acceptance_table(items, scorers, draws=200)}
    assert set(rows) == set(VARIANTS)
    assert rows["clean"]["acceptance"]["estimate"] == 1.0
    for name in VARIANTS[1:]:
        r = rows[name]
        assert r["determined_acceptance"] == r["expected_acceptance"] == 0.0, name
        if name != "edge_deletion":
            assert r["acceptance"]["estimate"] == 0.0 and r["delta_vs_clean"]["estimate"] == -1.0
    # edge deletion is undetermined only in constructed mode (the verifier checks the trace's own graph)
    assert all(it["expected_reject"] is True for it in items
               if it["variant"] == "edge_deletion" and "-L" not in it["problem_id"])


@pytest.mark.slow
def test_audit_judges_cli_on_tiny_pool(tiny_model_dir, tmp_path_factory, tmp_path):
    pytest.importorskip("torch")
    from fixtures import demo_problems, sample_pool

    from calver.cli import main

    pool = sample_pool(demo_problems(), tmp_path_factory.getbasetemp() / "refine_shared_pool", tiny_model_dir,
                       k=2, max_tokens=12)
    out = tmp_path / "audit"
    rc = main(["audit-judges", "--pool", str(pool.root), "--prm", str(tiny_model_dir),
               "--judge-model", str(tiny_model_dir), "--backend", "hf", "--judge-max-tokens", "4",
               "--max-sources", "3", "--draws", "200", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "audit_judges.json").read_text())
    assert res["scorers"] == ["verifier", "prm", "judge"] and res["n_source_traces"] == 3
    assert res["verifier_matches_expectation"] is True
    rows = {(r["scorer"], r["variant"]): r for r in res["table"]}
    assert rows[("verifier", "clean")]["acceptance"]["estimate"] == 1.0
    for sc in ("prm", "judge"):
        assert (sc, "clean") in rows and (sc, "answer_swap") in rows
        assert "delta_vs_clean" in rows[(sc, "truncation")]
    md = (out / "audit_judges.md").read_text()
    assert "| judge | consistent_swap |" in md and "| prm | edge_deletion |" in md
    items = [json.loads(x) for x in (out / "audit_items.jsonl").read_text().splitlines()]
    assert {it["variant"] for it in items} == set(VARIANTS)
