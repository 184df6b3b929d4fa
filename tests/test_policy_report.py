"""``calver policy-report``: a policy beside the answer-free heuristics, its rule agreement and the shuffled
control, each checked against a policy whose answers are known (the rule itself, the random-subset heuristic)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from fixtures import build_pool, small_config, trace_for

from calver.data_gen.generators import generate
from calver.data_gen.rationales import lookup_names, rule_rationale, with_rationale
from calver.evaluation.baselines import heuristic_answer
from calver.evaluation.breakdowns import stratum_order
from calver.evaluation.policy_report import PolicyReportConfig, markdown, report_pool, rule_agreement
from calver.evaluation.units import load_units
from calver.verifier import get_family, grade

TASKS = ("backdoor_set", "separation_set", "blocking_set", "cycle_witness")


def _problems():
    cfg = small_config(17, n_nodes=(5, 8), variants=("any",))
    return [p for t in TASKS for p in generate(t, 8, cfg)]


def _pool(tmp_path, name, answer):
    units = [(p, 0, [answer(p)] * 3) for p in _problems()]
    return load_units(build_pool(str(tmp_path / name), units).root)


def test_a_rule_policy_agrees_with_the_rule_and_beats_the_random_subset(tmp_path):
    units = _pool(tmp_path, "rule", lambda p: get_family(p.task).rule_object(p))
    rep = report_pool(units, shuffles=2, draws=300, seed=0)
    assert rep["stats"]["valid_rate"]["estimate"] == 1.0
    assert rep["rule_agreement"]["estimate"] == 1.0 and rep["rule_agreement"]["n_units"] == len(units)
    rs = rep["baselines"]["random_subset"]
    # oracle: grade the heuristic's answer on every set-family problem by hand
    set_units = [u for u in units if u.problem.task != "cycle_witness"]
    want = np.mean([grade(u.grading_problem, heuristic_answer(u.grading_problem, "random_subset"))
                    for u in set_units])
    assert rs["baseline"]["estimate"] == pytest.approx(want) and rs["baseline"]["n_units"] == len(set_units)
    assert rs["policy_minus_baseline"]["estimate"] == pytest.approx(1 - want)
    assert rs["policy_minus_baseline"]["ci_low"] > 0
    assert rep["shuffled"]["valid_rate"]["own"]["estimate"] == 1.0


def test_a_policy_that_answers_the_random_subset_gains_nothing_over_it(tmp_path):
    def answer(p):
        got = heuristic_answer(p, "random_subset")
        return got if got is not None else get_family(p.task).rule_object(p)

    units = [u for u in _pool(tmp_path, "guess", answer) if u.problem.task != "cycle_witness"]
    rep = report_pool(units, shuffles=1, draws=200, seed=0)
    assert rep["baselines"]["random_subset"]["policy_minus_baseline"]["estimate"] == 0.0
    agree, _ = rule_agreement(units)
    rules = [get_family(u.problem.task).rule_object(u.grading_problem) for u in units]
    assert np.mean(agree) == pytest.approx(np.mean([
        get_family(u.problem.task).canonical_answer_key(heuristic_answer(u.grading_problem, "random_subset"))
        == get_family(u.problem.task).canonical_answer_key(r) for u, r in zip(units, rules) if r is not None]))


def test_per_task_rows_tell_the_learned_family_from_the_guessed_ones(tmp_path):
    """A policy that applies the rule on backdoor problems and guesses a random subset elsewhere: the per-task
    rows say so, each against a hand count over that family's problems."""
    def answer(p):
        got = heuristic_answer(p, "random_subset")
        return get_family(p.task).rule_object(p) if p.task == "backdoor_set" or got is None else got

    units = _pool(tmp_path, "mixed", answer)
    per = report_pool(units, shuffles=1, draws=200, seed=0)["per_task"]
    assert sorted(per) == sorted(TASKS)
    assert per["backdoor_set"]["rule_agreement"]["estimate"] == 1.0
    assert per["backdoor_set"]["valid_rate"]["estimate"] == 1.0
    for task in ("separation_set", "blocking_set"):
        us = [u for u in units if u.problem.task == task]
        want = np.mean([grade(u.grading_problem, heuristic_answer(u.grading_problem, "random_subset")) for u in us])
        assert per[task]["n_units"] == len(us)
        assert per[task]["valid_rate"]["estimate"] == pytest.approx(want)
        assert per[task]["random_subset"]["estimate"] == pytest.approx(want)
        assert per[task]["graph"]["estimate"] == 1.0  # build_pool writes the true graph


def test_per_encoding_rows_tell_the_encodings_apart(tmp_path):
    """A policy that applies the rule where the prompt shows a JSON parents map and answers the empty set
    elsewhere: each encoding's row is a hand count over the problems whose prompt shows it."""
    cfg = small_config(23, n_nodes=(5, 7), variants=("any",), encoding=("arrows", "json_parents", "matrix", "clear"))
    problems = [p for t in ("backdoor_set", "separation_set") for p in generate(t, 12, cfg)]
    fam = lambda p: get_family(p.task)  # noqa: E731
    answer = {p.id: fam(p).rule_object(p) if p.meta["encoding"] == "json_parents" else fam(p).coerce_object(())
              for p in problems}
    units = load_units(build_pool(str(tmp_path / "enc"), [(p, 0, [answer[p.id]] * 2) for p in problems]).root)
    rep = report_pool(units, shuffles=1, draws=200, seed=0)
    per = rep["per_encoding"]
    assert sorted(per) == sorted({p.meta["encoding"] for p in problems})
    for enc, row in per.items():
        mine = [p for p in problems if p.meta["encoding"] == enc]
        assert row["n_units"] == len(mine)
        assert row["valid_rate"]["estimate"] == pytest.approx(np.mean([grade(p, answer[p.id]) for p in mine]))
    assert per["json_parents"]["valid_rate"]["estimate"] == 1.0
    assert per["json_parents"]["rule_agreement"]["estimate"] == 1.0
    assert "| encoding |" in markdown({"p": rep}, {}) and "| p | json_parents |" in markdown({"p": rep}, {})


def test_per_size_rows_count_each_graph_size_in_numeric_order(tmp_path):
    """A policy that applies the rule on graphs of at most 5 nodes and answers the empty set on larger ones: one
    row per node count, in numeric order (10 after 9), each a hand count over the problems of that size."""
    cfg = small_config(29, n_nodes=(4, 11), variants=("any",))
    problems = [p for t in ("backdoor_set", "separation_set") for p in generate(t, 14, cfg)]
    fam = lambda p: get_family(p.task)  # noqa: E731
    size = {p.id: len(set(p.graph.nodes)) for p in problems}
    answer = {p.id: fam(p).rule_object(p) if size[p.id] <= 5 else fam(p).coerce_object(()) for p in problems}
    units = load_units(build_pool(str(tmp_path / "size"), [(p, 0, [answer[p.id]] * 2) for p in problems]).root)
    rep = report_pool(units, shuffles=1, draws=200, seed=0)
    per = rep["per_size"]
    assert [int(k) for k in per] == sorted(set(size.values())) and max(size.values()) >= 10
    for n, row in per.items():
        mine = [p for p in problems if size[p.id] == int(n)]
        assert row["n_units"] == len(mine)
        assert row["valid_rate"]["estimate"] == pytest.approx(np.mean([grade(p, answer[p.id]) for p in mine]))
        if int(n) <= 5:
            assert row["rule_agreement"]["estimate"] == 1.0
    md = markdown({"p": rep}, {})
    assert "| nodes |" in md and all(f"| p | {n} |" in md for n in per)
    assert sorted(["10", "n/a", "4", "9"], key=stratum_order) == ["4", "9", "10", "n/a"]


def test_cli_writes_the_report_and_compares_stages(tmp_path):
    _pool(tmp_path, "rule", lambda p: get_family(p.task).rule_object(p))
    _pool(tmp_path, "empty", lambda p: get_family(p.task).coerce_object(()))
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "calver.cli", "policy-report", "--pool", f"a={tmp_path / 'empty'}",
           f"b={tmp_path / 'rule'}", "--compare", "a:b", "--draws", "200", "--shuffles", "1", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "random_subset" in r.stdout and "a → b" in r.stdout
    data = json.loads((out / "report.json").read_text())
    c = data["comparisons"]["a → b"]
    assert c["valid_rate"]["estimate"] > 0 and c["valid_rate"]["ci_low"] > 0
    assert (out / "report.md").read_text().startswith("| policy |")


@pytest.mark.parametrize("changes, field", [
    ({"pool": []}, "pool"),
    ({"pool": ["nodir"]}, "pool"),
    ({"pool": ["a=x", "a=y"]}, "pool"),
    ({"pool": ["a=x"], "compare": ["a:b"]}, "compare"),
    ({"pool": ["a=x"], "shuffles": 0}, "shuffles"),
])
def test_bad_config_names_the_field(changes, field):
    from calver.config import ConfigError

    with pytest.raises(ConfigError, match=field):
        PolicyReportConfig(**changes)


def test_answer_names_count_names_and_whether_the_answer_follows_its_lookup(tmp_path):
    """Three candidates a problem: the rule's trace with its own rule rationale (follows its lookup wherever the
    rationale states one), the same rationale with the treatment (or an x node) added to the answer (departs,
    names a query node), and an answer naming a node the graph lacks; each count against a hand tally."""
    cfg = small_config(31, n_nodes=(5, 8), variants=("any",), latent=0.0)
    problems = [p for t in ("backdoor_set", "separation_set", "frontdoor_set") for p in generate(t, 6, cfg)
                if get_family(p.task).rule_object(p) is not None]
    units, looked, n_names, in_graph = [], 0, 0, 0
    for p in problems:
        fam = get_family(p.task)
        rule = fam.coerce_object(fam.rule_object(p))
        why = rule_rationale(p, rule)
        asked = p.query["treatment"] if "treatment" in p.query else p.query["x"][0]
        texts = [with_rationale(trace_for(p, rule), why),
                 with_rationale(trace_for(p, rule | {asked}), why),
                 with_rationale(trace_for(p, rule | {"zz_not_a_node"}), why)]
        units.append((p, 0, texts))
        looked += 3 * ("Edges into" in (why or "") or "Edges out of" in (why or ""))
        n_names += len(rule) + len(rule | {asked}) + len(rule) + 1
        in_graph += len(rule) + len(rule | {asked}) + len(rule)
    pool = load_units(build_pool(str(tmp_path / "names"), units, raw_texts=True).root)
    rep = report_pool(pool, shuffles=1, draws=100, seed=0)
    got = rep["answer_names"]
    assert got["answers"] == 3 * len(problems)
    assert got["names"] == n_names and got["in_graph"] == pytest.approx(in_graph / n_names)
    assert got["only_graph_nodes"] == pytest.approx(2 / 3)
    assert got["names_a_query_node"] == pytest.approx(1 / 3)
    assert looked > 0 and got["with_lookup"] == looked
    assert got["follows_lookup"] == pytest.approx(1 / 3)
    follows = got["valid"]["follows"]
    assert follows["candidates"] == looked // 3 and follows["valid"] == 1.0  # the rule's own answer is valid
    assert got["valid"]["departs"]["candidates"] == 2 * looked // 3
    assert "answer = the lookup's nodes" in markdown({"p": rep}, {})


@pytest.mark.parametrize("trace, want", [
    ("Rule: adjust for the parents of L. Edges into L: K -> L, N -> L.\n", {"K", "N"}),
    ("Rule: the children of X intercept its directed paths. Edges out of X: X -> C.\n", {"C"}),
    ("Rule: adjust for the parents of L. Edges into L: L <- K, L <- N.\n", {"K", "N"}),
    ("Rule: adjust for the parents of L. Edges into L: none.\n", set()),
    ("Rule: condition on the parents of {a, b}. Edges into a: c -> a. Edges into b: d e -> b.\n", {"c", "d e"}),
    ("Rule: adjust for the parents of h. Edges into h: ticket, instance.\n", {"ticket", "instance"}),
    ("Rule: x. Scan for edges into L: K -> L yes, L -> I no. Edges into L: K -> L.\n", {"K"}),
    ("Rule: adjust for every non-descendant of X. Descendants of X: {Y}.\n", None),
    ("GRAPH: A -> B\nANSWER: {A}", None),
])
def test_lookup_names_reads_each_lookup_s_other_ends(trace, want):
    got = lookup_names(trace)
    assert got == (None if want is None else frozenset(want))


def test_a_blocking_answer_on_its_path_names_no_query_node(tmp_path):
    """A blocking set is the path's interior by design: the rule's answers count as naming no query node."""
    cfg = small_config(33, n_nodes=(5, 8), variants=("any",))
    rules = [(p, get_family(p.task).rule_object(p)) for p in generate("blocking_set", 10, cfg)]
    rules = [(p, r) for p, r in rules if r]  # non-empty: an interior node of the path
    assert rules
    pool = load_units(build_pool(str(tmp_path / "block"), [(p, 0, [r]) for p, r in rules]).root)
    got = report_pool(pool, shuffles=1, draws=100, seed=0)["answer_names"]
    interior = lambda p: set(get_family(p.task).normalize_query(p)["path"][0][1:-1])  # noqa: E731
    assert all(set(r) <= interior(p) for p, r in rules)  # the rule answers are interior nodes of the path
    assert got["answers"] == len(rules) and got["names_a_query_node"] == 0.0
