"""Load-time query checks (audit 2026-12-01, F12 items 1-2): a query key the family does not read is refused
with the closest known key, a mediator query with treatment = outcome is refused, and every problem the
generators, the prose levels and the CLEAR / bnlearn / CausalGraph2LLM adapters produce still loads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from calver.verifier import Problem, ProblemError, get_family, score
from calver.verifier.registry import families

DATA = Path(__file__).parent / "data"
BD = json.loads((DATA / "repro-2026-12-01" / "backdoor_problem.json").read_text())
BD_TRACE = (DATA / "repro-2026-12-01" / "backdoor_trace.txt").read_text()


def _load(d: dict) -> Problem:
    """What ``calver verify`` and the reward do at load: parse, normalize the query, build the verification object."""
    p = Problem.from_dict(d)
    fam = get_family(p.task)
    fam.normalize_query(p)
    fam.verification_object(p)
    return p


def test_query_typo_is_refused_with_the_closest_key():
    bad = dict(BD, query={"treatment": "X", "outcome": "Y", "varient": "minimal"})
    with pytest.raises(ProblemError, match=r"'varient' \(did you mean 'variant'\?\)"):
        _load(bad)
    with pytest.raises(ProblemError, match="varient"):  # scoring refuses it too, instead of scoring variant 'any'
        score(BD_TRACE, Problem.from_dict(bad))
    _load(BD)


@pytest.mark.parametrize("task", sorted(families()))
def test_every_family_refuses_an_unknown_query_key(task):
    fam = families()[task]
    key = fam.query_keys[0]
    query = dict(fam.example_query, **{key + key[-1]: 1})
    with pytest.raises(ProblemError) as err:
        fam.normalize_query(Problem(task=task, query=query))
    assert f"did you mean {key!r}" in str(err.value) and task in str(err.value)


def test_mediator_treatment_equal_to_outcome_is_refused():
    d = {"task": "mediator", "graph": "A -> B, B -> C", "query": {"treatment": "A", "outcome": "A", "variant": "any"}}
    with pytest.raises(ProblemError, match="'treatment' and 'outcome' must differ"):
        _load(d)
    _load(dict(d, query={"treatment": "A", "outcome": "C", "variant": "any"}))


def _loads_back(problems, where: str) -> int:
    for p in problems:
        try:
            _load(json.loads(json.dumps(p.to_dict())))
        except ProblemError as e:  # pragma: no cover - the failure message names the item
            pytest.fail(f"{where}: {p.id} no longer loads: {e}")
    return len(problems)


def test_generated_and_leveled_problems_still_load():
    from calver.data_gen.generators import GenConfig, available_tasks, generate
    from calver.data_gen.text_levels import constructed_problems

    made = []
    for task in available_tasks():
        for cfg in (GenConfig(seed=0), GenConfig(seed=1, latent=0.3), GenConfig(seed=2, many_satisfier=True)):
            made += generate(task, 3, cfg)
    for task in ("cycle_witness", "mediator", "intervention_reachability"):
        made += generate(task, 3, GenConfig(seed=3, graph_class=("directed",)))
    assert {p.task for p in made} == set(available_tasks())
    assert _loads_back(made, "generate") == len(made)
    leveled = [p for lv in (1, 2, 3) for p in constructed_problems(made, lv, random.Random(lv))[0]]
    assert leveled and _loads_back(leveled, "text_levels")


def test_adapted_problems_still_load(tmp_path, monkeypatch):
    from calver.data_gen.clear import load_clear

    assert _loads_back(load_clear(DATA / "clear-sample.jsonl"), "CLEAR") > 0
    pytest.importorskip("pgmpy", reason="pgmpy ships the bnlearn networks")
    from calver.data_gen import bnlearn
    from calver.data_gen.bnlearn import BNLEARN_TASKS, bnlearn_problems
    from calver.data_gen.cg2llm import cg2llm_problems

    monkeypatch.setenv("CALVER_CACHE_DIR", str(tmp_path))  # the parsed-network cache stays out of the user's
    bnlearn._cached.cache_clear()
    try:
        for task in BNLEARN_TASKS:
            _loads_back(bnlearn_problems("asia", task, n=2), f"bnlearn {task}")
        for task in ("mediator", "intervention_reachability"):
            assert _loads_back(cg2llm_problems("asia", task, n=2), f"cg2llm {task}") > 0
    finally:
        bnlearn._cached.cache_clear()
