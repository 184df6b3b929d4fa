"""The paper's audits as tests: renaming invariance, answer swap -> 3, witness damage -> 5; gold -> 6."""

from __future__ import annotations

import random

import pytest
from fixtures import GRAPH_TASKS, SET_TASKS, sample_problem

from calver.evaluation.audits import damage_witness, rename_nodes, replace_slot
from calver.verifier import get_family, grade, score


def _cases(task: str, n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        problem, valid = sample_problem(task, rng)
        yield rng, problem, valid


@pytest.mark.parametrize("task", GRAPH_TASKS)
def test_canonical_trace_of_every_valid_object_scores_6_and_grades(task):
    fam = get_family(task)
    for rng, problem, valid in _cases(task, 40, seed=11):
        obj = rng.choice(valid)
        trace = fam.canonical_trace(problem, obj)
        result = score(trace, problem)
        assert result.bits == [1] * 6, (trace, result.reasons)
        assert grade(problem, result.answer)


@pytest.mark.parametrize("task", GRAPH_TASKS)
def test_consistent_renaming_never_changes_any_score(task):
    fam = get_family(task)
    for rng, problem, valid in _cases(task, 25, seed=12):
        nodes = list(problem.graph.nodes)
        new = [f"R{i}x" for i in range(len(nodes))]
        rng.shuffle(new)
        mapping = dict(zip(nodes, new))
        traces = [fam.canonical_trace(problem, rng.choice(valid))]
        # degraded variants too: renaming must preserve every score, not only 6
        traces.append(replace_slot(traces[0], "RESULT", "invalid"))
        traces.append(replace_slot(traces[0], "GRAPH", ", ".join(problem.graph.edges_text()[1:]) or "Q -> R"))
        for t in traces:
            before = score(t, problem)
            renamed_trace, renamed_problem = rename_nodes(t, problem, mapping)
            after = score(renamed_trace, renamed_problem)
            assert before.bits == after.bits, (t, before.reasons, after.reasons)


@pytest.mark.parametrize("task", SET_TASKS)
def test_answer_swap_to_an_invalid_object_scores_exactly_3(task):
    fam = get_family(task)
    checked = 0
    for rng, problem, valid in _cases(task, 30, seed=13):
        trace = fam.canonical_trace(problem, rng.choice(valid))
        nodes = sorted(problem.graph.nodes)
        invalid = None
        for _ in range(200):
            cand = frozenset(rng.sample(nodes, rng.randint(0, min(3, len(nodes)))))
            if not grade(problem, cand):
                invalid = cand
                break
        if invalid is None:
            continue
        swapped = replace_slot(trace, "ANSWER", fam.format_object(invalid))
        result = score(swapped, problem)
        assert result.total == 3, (swapped, result.reasons)
        assert result.bits == [1, 1, 0, 1, 0, 0]
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("task", GRAPH_TASKS)
def test_witness_edge_damage_scores_exactly_5(task):
    fam = get_family(task)
    checked = 0
    for rng, problem, valid in _cases(task, 80, seed=14):
        trace = fam.canonical_trace(problem, rng.choice(valid))
        damaged = damage_witness(trace, problem)
        if damaged is None:
            continue
        result = score(damaged, problem)
        assert result.bits == [1, 1, 1, 0, 1, 1], (damaged, result.reasons)
        checked += 1
    assert checked >= 5
