"""VerifierReward: TRL reward-function semantics on canonical / corrupted traces (no model)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("networkx")

from calver.train.rewards import VerifierReward, completion_text  # noqa: E402
from calver.verifier import SLOTS, Problem, parse_graph, score  # noqa: E402


@pytest.fixture(scope="module")
def problems():
    from calver.train.common import generate_problems

    return generate_problems(["backdoor_set"], 3, seed=5, n_nodes=(4, 5))


@pytest.fixture(scope="module")
def traces(problems):
    from calver.data_gen.generators import canonical_trace

    return [canonical_trace(p) for p in problems]


def _pj(p: Problem) -> str:
    from calver.train.common import problem_json

    return problem_json(p)


def test_fraction_reward_matches_verifier(problems, traces):
    r = VerifierReward()
    assert r.__name__ == "verifier"
    half = "\n".join(traces[0].splitlines()[:3])
    comps = [traces[0], half, "no slots at all"]
    pj = [_pj(problems[0])] * 3
    out = r(prompts=[None] * 3, completions=comps, problem_json=pj)
    expect = [score(c, problems[0]).total / 6 for c in comps]
    assert out == pytest.approx(expect)
    assert out[0] == 1.0 and 0 < out[1] < 1 and out[2] == 0.0


def test_strict_and_weighted(problems, traces):
    half = "\n".join(traces[1].splitlines()[:4])
    bits = score(half, problems[1]).bits
    strict = VerifierReward("strict")
    assert strict.__name__ == "verifier_strict"
    assert strict(None, [traces[1], half], problem_json=[_pj(problems[1])] * 2) == [1.0, 0.0]
    w = [3, 1, 1, 1, 1, 3]
    weighted = VerifierReward("weighted", weights=w)
    got = weighted(None, [half], problem_json=[_pj(problems[1])])[0]
    assert got == pytest.approx(sum(a * b for a, b in zip(w, bits)) / sum(w))
    with pytest.raises(ValueError, match="six|6"):
        VerifierReward("weighted", weights=[1, 2])
    with pytest.raises(ValueError, match="weighted"):
        VerifierReward("fraction", weights=[1] * 6)
    with pytest.raises(ValueError, match="variant"):
        VerifierReward("nope")


def test_conversational_completion_and_per_bit_metrics(problems, traces):
    logged: dict[str, list[float]] = {}
    r = VerifierReward()
    comps = [[{"role": "assistant", "content": traces[2]}],
             [{"role": "assistant", "content": [{"type": "text", "text": "GRAPH: A -> B"}]}]]
    out = r(prompts=[[{"role": "user", "content": "q"}]] * 2, completions=comps,
            problem_json=[_pj(problems[2])] * 2, trainer_state=None,
            log_metric=lambda k, v: logged.setdefault(k, []).append(v), log_extra=lambda *a: None)
    assert out[0] == 1.0
    b2 = score("GRAPH: A -> B", problems[2]).bits
    for i, slot in enumerate(SLOTS):
        assert logged[f"verifier/{slot.lower()}"] == [pytest.approx((1 + b2[i]) / 2)]
    assert logged["verifier/unscorable"] == [0.0]
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"
    assert completion_text(42) is None


def test_unscorable_items_are_none_and_counted(problems, traces):
    r = VerifierReward()
    bad_task = json.dumps({"task": "no_such_task", "query": {}})
    malformed = json.dumps({"query": {}})
    comps = [traces[0]] * 5 + [42]
    pj = ["{not json", bad_task, malformed, None, _pj(problems[0]), _pj(problems[0])]
    logged = {}
    out = r(None, comps, problem_json=pj, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out[:4] == [None] * 4 and out[4] == 1.0 and out[5] is None
    assert r.unscorable == 5 and r.scored == 1 and logged["verifier/unscorable"] == 5.0
    reasons = " | ".join(r.unscorable_reasons)
    assert "not JSON" in reasons and "unregistered task" in reasons and "malformed" in reasons
    assert "unreadable completion" in reasons and "no problem_json" in reasons
    # no column at all: everything unscorable, never a silent 0
    assert VerifierReward()(None, ["x", "y"]) == [None, None]


def test_problem_cache_and_hand_made_problem():
    g = parse_graph("Z -> X, Z -> Y, X -> Y")
    p = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y"}, graph=g, id="hand")
    from calver.verifier import get_family

    trace = get_family("backdoor_set").canonical_trace(p, frozenset({"Z"}))
    r = VerifierReward()
    pj = _pj(p)
    assert r(None, [trace, trace], problem_json=[pj, pj]) == [1.0, 1.0]
    assert len(r._problems) == 1
    assert r.stats()["bit_pass_rates"]["answer"] == 1.0
