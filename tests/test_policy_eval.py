"""Policy-level evaluation (``calver.evaluation.policy``), teaching traces (rule answers, witness caps)
and the tiny tokenizer's phrases: each against an independent oracle or a constructed policy whose
answer is known."""

from __future__ import annotations

import random

import numpy as np
import pytest
from fixtures import small_config, synthetic_units, write_pool

from calver.data_gen.generators import canonical_answer, canonical_trace, generate, validity_objects
from calver.data_gen.trace_style import TraceStyle
from calver.evaluation.units import load_units
from calver.verifier import get_family, grade, score

RULE_TASKS = ("backdoor_set", "separation_set", "frontdoor_set", "blocking_set")


@pytest.mark.parametrize("task", RULE_TASKS)
def test_rule_answers_are_valid_members_and_traces_score_six(task):
    cfg = small_config(3, n_nodes=(4, 7), variants=("any",), many_satisfier=True)
    hits = 0
    for p in generate(task, 40, cfg):
        members = {get_family(task).canonical_answer_key(o) for o in validity_objects(p)}
        rule = get_family(task).rule_object(p)
        if rule is not None:
            hits += 1
            assert get_family(task).canonical_answer_key(rule) in members  # oracle: the enumerated class
            assert grade(p, rule)
        obj = canonical_answer(p, "rule")
        assert get_family(task).canonical_answer_key(obj) in members
        for witnesses in (None, 1):
            t = canonical_trace(p, TraceStyle("rule", witnesses))
            assert score(t, p).total == 6, (t, score(t, p).reasons)
    assert hits >= 20  # the rules cover most generated queries (else the demo's policy has little to learn)


def test_rule_objects_follow_their_rules():
    cfg = small_config(5, n_nodes=(4, 7), variants=("any",), many_satisfier=True)
    for p in generate("backdoor_set", 20, cfg):
        q = p.query
        first = next(get_family("backdoor_set").rule_objects(p.graph, get_family("backdoor_set").normalize_query(p)))
        assert first == {a for a, b in p.graph.directed if b == q["treatment"]} - {q["outcome"]}


def test_witness_cap_lists_at_most_that_many_paths():
    cfg = small_config(1, n_nodes=(6, 8), variants=("any",))
    seen_multi = False
    for p in generate("backdoor_set", 30, cfg):
        full = canonical_trace(p, TraceStyle("rule"))
        capped = canonical_trace(p, TraceStyle("rule", 1))
        deriv = next(line for line in capped.splitlines() if line.startswith("DERIVATION"))
        assert deriv.count(" | ") == 0
        seen_multi |= " | " in full
    assert seen_multi  # the cap changed something


def test_answers_argument_is_checked():
    p = generate("backdoor_set", 1, small_config(0))[0]
    with pytest.raises(ValueError, match="answers"):
        canonical_answer(p, "best")


def _policy_units(tmp_path, good: bool):
    """A pool whose candidates are canonical traces of valid answers of their own problem (a policy
    that reads its prompt) or of another problem of the family (one that ignores it)."""
    units = synthetic_units(n_units=16, k=4, seed=2)
    by_task: dict[str, list] = {}
    for p, _, _ in units:
        by_task.setdefault(p.task, []).append(p)
    rng = random.Random(0)
    out = []
    for p, s, _ in units:
        src = p if good else next(q for q in by_task[p.task] if q.id != p.id)
        texts = []
        for _ in range(4):
            obj = rng.choice(validity_objects(src))
            texts.append(get_family(p.task).canonical_trace(src, obj))
        out.append((p, s, texts))
    return load_units(write_pool(tmp_path / ("good" if good else "bad"), out, 4))


def test_policy_stats_and_shuffled_control_tell_reading_from_guessing(tmp_path):
    from calver.evaluation.policy import policy_stats, shuffled_control

    good, bad = _policy_units(tmp_path, True), _policy_units(tmp_path, False)
    sg = policy_stats(good, draws=200)
    assert sg["six_rate"]["estimate"] == 1.0 and sg["parse_rate"]["estimate"] == 1.0
    assert sg["bit_pass_rates"]["GRAPH"] == 1.0
    sb = policy_stats(bad, draws=200)
    assert sb["bit_pass_rates"]["GRAPH"] < 0.5  # another problem's graph
    # brute-force oracle for the 6/6 rate: rescore every candidate
    assert sb["six_rate"]["estimate"] == pytest.approx(
        np.mean([np.mean([score(t, u.problem).total == 6 for t in u.texts]) for u in bad]))
    cg = shuffled_control(good, shuffles=2, seed=0, draws=200)
    assert cg["six_rate"]["own"]["estimate"] == 1.0
    assert cg["six_rate"]["shuffled"]["estimate"] < 0.5
    assert cg["valid_rate"]["own_minus_shuffled"]["ci_low"] > 0


def test_compare_policies_pairs_units_and_signs_the_difference(tmp_path):
    from calver.evaluation.policy import compare_policies

    good, bad = _policy_units(tmp_path, True), _policy_units(tmp_path, False)
    c = compare_policies(bad, good, draws=500)
    assert c["n_units"] == len(good)
    assert c["six_rate"]["estimate"] > 0 and c["six_rate"]["ci_low"] > 0
    assert c["mean_score"]["mean_a"] == pytest.approx(np.mean([u.totals.mean() for u in bad]))
    assert c["mean_score"]["mean_b"] == pytest.approx(np.mean([u.totals.mean() for u in good]))
    assert c["mean_score"]["estimate"] == pytest.approx(c["mean_score"]["mean_b"] - c["mean_score"]["mean_a"])
    assert compare_policies(good, good, draws=200)["six_rate"]["estimate"] == 0


def test_the_demo_stage_table_puts_each_pool_s_mean_under_its_own_name(tmp_path):
    from calver.demo.report_text import stage_table
    from calver.evaluation.policy import compare_policies, policy_stats

    good, bad = _policy_units(tmp_path, True), _policy_units(tmp_path, False)
    row = next(r for r in stage_table(compare_policies(bad, good, draws=200)) if r.startswith("| 6/6 rate %"))
    sft, grpo = (float(x) for x in row.split(" | ")[1:3])
    assert sft == pytest.approx(100 * policy_stats(bad, draws=50)["six_rate"]["estimate"], abs=0.05)
    assert grpo == pytest.approx(100 * policy_stats(good, draws=50)["six_rate"]["estimate"], abs=0.05) == 100.0


def test_k_curve_bands_hold_their_estimates():
    from calver.evaluation.scaling import k_curve
    from calver.evaluation.units import unit_facts

    units = [unit_facts(p, texts, seed=s) for p, s, texts in synthetic_units(n_units=12, k=8, seed=1)]
    res = k_curve(units, (1, 2, 4, 8), draws=300)
    for name, accs in res["accuracy"].items():
        for a, (lo, hi) in zip(accs, res["ci"][name]):
            assert lo <= a <= hi
    for c, (lo, hi) in zip(res["coverage"], res["ci"]["coverage"]):
        assert lo <= c <= hi


def test_cycle_rule_gives_a_reverse_pair_or_a_shortest_cycle():
    """Oracle: networkx's simple cycles. The rule's first proposal is a 2-cycle where the graph has one, else
    a cycle of the shortest length; `none` exactly when the graph is acyclic."""
    import networkx as nx

    fam = get_family("cycle_witness")
    seen_pair = seen_long = 0
    for p in generate("cycle_witness", 60, small_config(8, n_nodes=(4, 10))):
        cycles = list(nx.simple_cycles(p.graph.to_networkx()))
        first = next(fam.rule_objects(p.graph, fam.normalize_query(p)))
        if not cycles:
            assert first == ()
            continue
        shortest = min(len(c) for c in cycles)
        assert len(first) == shortest if shortest > 2 else len(first) == 2
        assert fam.canonical_answer_key(first) in {fam.canonical_answer_key(tuple(c)) for c in cycles}
        seen_pair += len(first) == 2
        seen_long += len(first) > 2
        assert score(canonical_trace(p, TraceStyle("rule", 0)), p).total == 6
    assert seen_pair and seen_long


@pytest.mark.parametrize("task, cover", [("backdoor_set", 0.9), ("separation_set", 0.5)])
def test_maximal_variants_get_a_rule_answer_from_the_class(task, cover):
    """Every non-descendant of the treatment (backdoor) and every other node (separation) are the maximal
    proposals; the enumerated validity class is the oracle."""
    fam = get_family(task)
    hits = n = 0
    for p in generate(task, 30, small_config(4, n_nodes=(4, 8), variants=("maximal",))):
        n += 1
        rule = fam.rule_object(p)
        if rule is None:
            continue
        hits += 1
        assert fam.canonical_answer_key(rule) in {fam.canonical_answer_key(o) for o in validity_objects(p)}
    assert hits >= cover * n  # how often the rule answers at all (else a random member is taught)
