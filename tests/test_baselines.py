"""Answer-free baselines: each heuristic's answer, and its valid-answer rate graded against an oracle that
shares no code with calver's backdoor check (tests/oracles.py)."""

from __future__ import annotations

import json

import oracles as O

from calver.data_gen.generators import GenConfig, generate
from calver.evaluation.baselines import HEURISTICS, answer_free_baselines, applies, heuristic_answer
from calver.verifier import get_family


def _oracle_valid(p, z) -> bool:
    """``z`` is a valid answer of a backdoor_set problem (variant 'any'), by the independent oracle."""
    g = O.G(p.graph.nodes, p.graph.directed, p.graph.bidirected)
    return O.backdoor(g, p.query["treatment"], p.query["outcome"], z)


def test_heuristic_answers():
    p = generate("backdoor_set", 1, GenConfig(seed=2, n_nodes=(6, 8), variants=("any",)))[0]
    fam = get_family(p.task)
    cands = set(fam.candidates(p.graph, fam.normalize_query(p)))
    assert heuristic_answer(p, "all_candidates") == cands and heuristic_answer(p, "empty_set") == frozenset()
    sub = heuristic_answer(p, "random_subset")
    assert sub <= cands and heuristic_answer(p, "random_subset") == sub  # seeded by the problem
    assert heuristic_answer(p, "family_rule") == next(iter(fam.rule_objects(p.graph, fam.normalize_query(p))))
    # the same subset however the graph lists its nodes (a pool stores problems through JSON)
    for q in generate("separation_set", 24, GenConfig(seed=17, n_nodes=(5, 8), variants=("any",))):
        back = type(q).from_dict(json.loads(json.dumps(q.to_dict())))
        assert heuristic_answer(back, "random_subset") == heuristic_answer(q, "random_subset")
    cyc = generate("cycle_witness", 1, GenConfig(seed=2))[0]
    assert not applies("all_candidates", cyc) and heuristic_answer(cyc, "all_candidates") is None
    assert applies("all_candidates", p) and applies("family_rule", p)


def test_rates_equal_the_oracle_on_backdoor_problems():
    problems = generate("backdoor_set", 40, GenConfig(seed=5, n_nodes=(5, 8), variants=("any",)))
    res = answer_free_baselines(problems, draws=200)
    assert set(res) == set(HEURISTICS)
    for name in HEURISTICS:
        want = [float(_oracle_valid(p, heuristic_answer(p, name) or frozenset()))
                if heuristic_answer(p, name) is not None else 0.0 for p in problems]
        assert res[name]["n_units"] == len(problems)
        assert abs(res[name]["estimate"] - sum(want) / len(want)) < 1e-12, name
        assert res[name]["ci_low"] <= res[name]["estimate"] <= res[name]["ci_high"]
    assert res["all_candidates"]["estimate"] != res["empty_set"]["estimate"]  # the heuristics differ here


def test_cli_prints_the_table(tmp_path, capsys):
    from calver.cli import main

    probs = generate("backdoor_set", 6, GenConfig(seed=1)) + generate("path", 3, GenConfig(seed=1))
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in probs))
    assert main(["baselines", "--problems", str(path), "--draws", "100"]) == 0
    out = capsys.readouterr().out
    assert "| all_candidates |" in out and "| 6 |" in out and "9 problems" in out
    assert main(["baselines", "--problems", str(tmp_path / "missing.jsonl")]) == 2
