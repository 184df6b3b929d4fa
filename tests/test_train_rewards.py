"""VerifierReward: TRL reward-function semantics on canonical / corrupted traces (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    from calver.reward.problems import PROBLEM_CACHE

    assert r(None, [trace, trace], problem_json=[pj, pj]) == [1.0, 1.0]
    assert (pj, "problem_json", False) in PROBLEM_CACHE  # cached once, in the verifier's byte budget
    assert r.stats()["bit_pass_rates"]["answer"] == 1.0


# ---- hostile shapes: the reward returns None for an unscorable row and never raises (audit F6) -----------
REPRO = Path(__file__).parent / "data" / "repro-2026-12-01"
GOOD_PJ = (REPRO / "backdoor_problem.json").read_text()
GOOD_TRACE = (REPRO / "backdoor_trace.txt").read_text()
DEEP = "[" * 100_000 + "]" * 100_000
BLOCK = {"role": "assistant", "content": [{"type": "text", "text": None}]}

ODD_KEYS = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans(), st.floats(),
                     st.tuples(st.integers()), st.sampled_from(["task", "query", "graph", "text", "type", "role"]))
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=10**20), st.floats(),
                   st.text(max_size=12), st.binary(max_size=8), st.sampled_from(["assistant", "text", "backdoor_set"]))
JSON_LIKE = st.recursive(LEAVES, lambda kids: st.lists(kids, max_size=4)
                         | st.dictionaries(ODD_KEYS, kids, max_size=4), max_leaves=16)
JSON_TEXT = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                         | st.text(max_size=12),
                         lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                   max_size=4),
                         max_leaves=16).map(json.dumps)
# message-shaped completions and problem-shaped cells reach the deeper code paths
MESSAGES = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["assistant", "user"]) | JSON_LIKE,
     "content": JSON_LIKE | st.lists(st.fixed_dictionaries({"type": st.just("text") | JSON_LIKE, "text": JSON_LIKE}),
                                     max_size=3)}), max_size=3)
QUERIES = st.fixed_dictionaries({"treatment": JSON_LIKE | st.just("X"), "outcome": JSON_LIKE | st.just("Y")},
                                optional={"varient": JSON_LIKE})
PROBLEMS = st.fixed_dictionaries(
    {"task": st.sampled_from(["backdoor_set", "mediator", "knights_knaves", "ate_threshold"]) | JSON_LIKE,
     "query": JSON_LIKE | QUERIES},
    optional={"graph": JSON_LIKE | st.just("X -> Y"), "data": JSON_LIKE, "id": JSON_LIKE, "meta": JSON_LIKE})
SPECIAL = [DEEP, '{"task": "backdoor_set", "id": ' + "9" * 5000 + "}", GOOD_PJ.encode()]
COMPLETIONS = st.one_of(JSON_LIKE, MESSAGES, st.just(GOOD_TRACE), st.text(max_size=40))
CELLS = st.one_of(JSON_LIKE, JSON_TEXT, PROBLEMS,
                  PROBLEMS.map(lambda d: json.dumps(d, default=repr, skipkeys=True)),
                  st.integers(0, len(SPECIAL) - 1).map(lambda i: SPECIAL[i]))  # not inlined: a 200 kB repr


def _check_batch(out, n):
    assert isinstance(out, list) and len(out) == n
    assert all(r is None or isinstance(r, float) for r in out), out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=st.lists(st.tuples(COMPLETIONS, JSON_LIKE, CELLS), max_size=5), at=st.integers(0, 5))
def test_reward_never_raises_on_hostile_rows(rows, at):
    at = min(at, len(rows))
    rows.insert(at, (GOOD_TRACE, None, GOOD_PJ))  # a good row in the same batch keeps its reward
    comps, prompts, cells = (list(c) for c in zip(*rows))
    r = VerifierReward()
    out = r(prompts=prompts, completions=comps, problem_json=cells, log_metric=lambda k, v: None)
    _check_batch(out, len(rows))
    assert out[at] == 1.0
    assert r.scored + r.unscorable == len(rows) and r.unscorable == out.count(None)


@pytest.mark.parametrize("comp, cell", [
    ([BLOCK], GOOD_PJ),
    ([{"role": "assistant", "content": [{"type": "text", "text": 3}]}], GOOD_PJ),
    ([{"role": "assistant", "content": [{"type": "text", "text": GOOD_TRACE}, {"type": "text", "text": ["x"]}]}],
     GOOD_PJ),
    (GOOD_TRACE, DEEP),
    (GOOD_TRACE, {"task": "backdoor_set", 1: "x"}),
    (GOOD_TRACE, {"task": "backdoor_set", "query": {"treatment": {"X"}}}),
    (GOOD_TRACE, '{"task": "backdoor_set", "id": ' + "9" * 5000 + "}"),
    (GOOD_TRACE, GOOD_PJ.encode()),
    (GOOD_TRACE, GOOD_PJ.replace('"variant"', '"varient"')),
], ids=["text-None", "text-int", "text-list", "deep-json", "int-key", "set-value", "bigint", "bytes", "typo-key"])
def test_audit_shapes_are_unscorable_not_raised(comp, cell):
    r = VerifierReward()
    out = r(None, [comp, GOOD_TRACE], problem_json=[cell, GOOD_PJ])
    assert out == [None, 1.0]
    assert r.unscorable == 1 and sum(r.unscorable_reasons.values()) == 1


def test_reward_column_shapes():
    r = VerifierReward()
    assert r(None, [GOOD_TRACE] * 2, problem_json=[GOOD_PJ]) == [None, None]  # cannot pair rows with problems
    assert r(None, [GOOD_TRACE] * 2, problem_json=GOOD_PJ) == [None, None]  # a str is not a column
    assert r(None, None, problem_json=[]) == [] and r(None, 5) == []
    assert r(None, (GOOD_TRACE,), problem_json=(GOOD_PJ,)) == [1.0]
    assert any("values for 2 completions" in k for k in r.unscorable_reasons)


# ---- module-level rewards for TRL's CLI (`trl grpo --reward_funcs calver.train.rewards.<name>`) ----------
CLI_NAMES = ["verifier_reward", "verifier_reward_strict", "verifier_bit_graph", "verifier_bit_query",
             "verifier_bit_strategy", "verifier_bit_derivation", "verifier_bit_result", "verifier_bit_answer"]


def _resolve(dotted: str):
    """What trl/scripts/grpo.py does with a dotted --reward_funcs value."""
    import importlib

    module_path, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module_path), name)


def test_module_level_rewards_resolve_like_trl_and_score(problems, traces):
    half = "\n".join(traces[0].splitlines()[:3])
    comps, pj = [traces[0], half, "junk"], [_pj(problems[0])] * 3
    bits = [score(c, problems[0]).bits for c in comps]
    funcs = {n: _resolve(f"calver.train.rewards.{n}") for n in CLI_NAMES}
    for name, f in funcs.items():
        assert f.__name__ == name  # TRL logs rewards/<__name__>/mean
    got = {n: f(prompts=[None] * 3, completions=comps, problem_json=pj) for n, f in funcs.items()}
    assert got["verifier_reward"] == pytest.approx([sum(b) / 6 for b in bits])
    assert got["verifier_reward_strict"] == [1.0, 0.0, 0.0]
    for i, slot in enumerate(SLOTS):
        assert got[f"verifier_bit_{slot.lower()}"] == [float(b[i]) for b in bits]
    # TRL's reward_weights over the six bit rewards (nansum of w_i * b_i) rebuild the S/6 reward
    per_bit = [got[f"verifier_bit_{s.lower()}"] for s in SLOTS]
    assert [sum(col) / 6 for col in zip(*per_bit)] == pytest.approx(got["verifier_reward"])


def test_module_level_reward_pickles_without_its_pool(problems, traces):
    import pickle

    from calver.train.rewards import verifier_reward

    pj = _pj(problems[1])
    assert verifier_reward(None, [traces[1]], problem_json=[pj]) == [1.0]
    copy = pickle.loads(pickle.dumps(verifier_reward))
    assert copy.engine.pool is None and copy.__name__ == "verifier_reward"
    assert copy(None, [traces[1], "x"], problem_json=[pj, pj]) == verifier_reward(None, [traces[1], "x"],
                                                                                 problem_json=[pj, pj])


def test_metrics_without_log_metric_go_to_log_extra_or_stats(problems, traces, caplog):
    pj = _pj(problems[2])
    comps = [traces[2], "GRAPH: A -> B", 42]
    extra: dict[str, list] = {}
    r = VerifierReward()
    r(None, comps, problem_json=[pj] * 3, log_extra=lambda col, vals: extra.setdefault(col, []).extend(vals))
    b1 = score("GRAPH: A -> B", problems[2]).bits
    for i, slot in enumerate(SLOTS):
        assert extra[f"verifier/{slot.lower()}"] == [1, b1[i], None]  # per sample: the column mean is the rate
    assert extra["verifier/unscorable_reason"][:2] == [None, None] and "unreadable" in extra[
        "verifier/unscorable_reason"][2]
    assert r.unlogged_calls == 0
    quiet = VerifierReward()
    with caplog.at_level("WARNING", logger="calver.train.rewards"):
        quiet(None, comps[:2], problem_json=[pj] * 2)
        quiet(None, comps[:2], problem_json=[pj] * 2)
    assert sum("kept in .stats()" in m for m in caplog.messages) == 1  # said once, not per call
    s = quiet.stats()
    assert s["unlogged_calls"] == 2 and s["last_metrics"]["verifier/graph"] == pytest.approx((1 + b1[0]) / 2)
    assert s["bit_pass_rates"]["graph"] == pytest.approx((1 + b1[0]) / 2)


def test_env_options_for_module_level_rewards(monkeypatch):
    from calver.reward import RewardOptions

    env: dict[str, str] = {}
    assert RewardOptions.from_env(env) == RewardOptions()
    env.update(CALVER_REWARD_BUDGET_S="2.5", CALVER_REWARD_WORKERS="3", CALVER_REWARD_VARIANT="strict")
    got = RewardOptions.from_env(env)
    assert (got.budget_s, got.workers, got.variant) == (2.5, 3, "strict")
    for var, bad in (("CALVER_REWARD_BUDGET_S", "soon"), ("CALVER_REWARD_BUDGET_S", "-1"),
                     ("CALVER_REWARD_BUDGET_S", "inf"), ("CALVER_REWARD_WORKERS", "two"),
                     ("CALVER_REWARD_VARIANT", "fractoin"), ("CALVER_REWARD_WEIGHTS", "1,2"),
                     ("CALVER_REWARD_ALLOW_UNGROUNDED", "maybe")):
        with pytest.raises(ValueError, match=var):
            RewardOptions.from_env({**env, var: bad})
    assert RewardOptions.from_env({"CALVER_REWARD_VARIANT": "weighted",
                                   "CALVER_REWARD_WEIGHTS": "1,0,0,0,0,1"}).spec.value([1, 0, 0, 0, 0, 0]) == 0.5
    assert VerifierReward(budget_s=1.0).workers == 1  # a budget needs a process to kill
    # the module-level rewards read the environment at import: a bad value stops the import, naming it
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-c", "import calver.train.rewards"], capture_output=True, text=True,
                         env={**__import__("os").environ, "CALVER_REWARD_WORKERS": "two"})
    assert bad.returncode != 0 and "CALVER_REWARD_WORKERS" in bad.stderr


def test_rewards_module_is_torch_free():
    import subprocess
    import sys

    code = "import sys, calver.train.rewards, calver.reward.workers; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_problem_cache_stays_inside_the_memo_budget():
    """Audit L3: the reward's problem cache held up to 50,000 prepared problems outside the 64 MB budget."""
    from calver.reward.problems import PROBLEM_CACHE
    from calver.train.common import generate_problems, problem_json
    from calver.verifier import memo

    before = memo.usage()[1]
    memo.set_budget(300_000)
    try:
        r = VerifierReward()
        for p in generate_problems(["backdoor_set", "mediator"], 200, seed=9, n_nodes=(6, 8)):
            r(None, ["x"], problem_json=[problem_json(p)])
            charged, budget = memo.usage()
            assert charged <= budget
        assert 0 < len(PROBLEM_CACHE) < 400  # dropped with the other memos, refilled on demand
    finally:
        memo.set_budget(before)


# ---- the 2026-12-03 audit's odd shapes (L3) ------------------------------------------------------------------
class _RaisingLen(str):
    def __len__(self):
        raise RuntimeError("len")


@pytest.mark.parametrize("completion,want", [
    ([{"role": "assistant", "content": ["plain", "strings"]}], None),  # content blocks that are no dicts
    ([{"role": None, "content": "GRAPH: A -> B"}], None),  # a role that is no string
    ([{"role": "user", "content": "hi"}], None),  # no assistant message at all
    ([{"role": "assistant", "content": ""}], 0.0),  # an empty answer is an answer: scored, 0/6
])
def test_unreadable_conversational_shapes_are_none_not_zero(completion, want):
    assert VerifierReward()(None, [completion], problem_json=[GOOD_PJ]) == [want]


def test_a_str_subclass_and_a_generator_column_neither_raise_nor_vanish():
    odd = _RaisingLen(GOOD_TRACE)
    assert VerifierReward()(None, [odd], problem_json=[GOOD_PJ]) == [1.0]
    pooled = VerifierReward(budget_s=5.0, workers=1)
    try:
        assert pooled(None, [odd], problem_json=[GOOD_PJ]) == [1.0]
        assert pooled(None, (c for c in [GOOD_TRACE]), problem_json=(p for p in [GOOD_PJ])) == [1.0]
    finally:
        pooled.close()


def test_call_counters_that_the_grpo_summary_reads(problems, traces):
    """run_grpo and scripts/gpu_check.py report the reward's share of a step from ``seconds``; ``calls`` counts
    calls (the reward-core refactor once dropped both, and every GRPO run failed at its summary)."""
    r = VerifierReward()
    r(None, [traces[0]], problem_json=[_pj(problems[0])])
    r(None, [traces[0], "x"], problem_json=[_pj(problems[0])] * 2)
    assert r.calls == 2 and r.seconds > 0.0 and r.stats()["calls"] == 2 and r.stats()["seconds"] == r.seconds
