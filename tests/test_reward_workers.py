"""Scoring in worker processes: per-completion budgets, crashes, cleanup, and bits equal to ``score()``.

The slow and crashing scorers below are module-level so worker processes can import them (the
``scorer`` hook of ``WorkerPool`` / ``VerifierReward``); a worker receives this process's ``sys.path``,
so it finds this file's module as pytest imported it.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import threading
import time

import pytest

pytest.importorskip("networkx")

from calver.reward import workers as rw  # noqa: E402
from calver.train.rewards import VerifierReward  # noqa: E402
from calver.verifier import Problem, Unscorable, Verdict, score  # noqa: E402

STALL = "<<stall-the-scorer>>"
CRASH = "<<crash-the-worker>>"
BUDGET = 1.0
MARGIN = 2.0  # the parent's reaction plus a SIGKILL and reap: milliseconds, with room for a loaded runner


def slow_scorer(text: str, problem):
    """``score``, except that a completion holding STALL hangs (as a pathological input might)."""
    if STALL in text:
        time.sleep(120)
    return score(text, problem)


def crash_scorer(text: str, problem):
    """``score``, except that a completion holding CRASH kills its worker (as a segfault would)."""
    if CRASH in text:
        os._exit(7)
    return score(text, problem)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def cases():
    """(problem JSON, gold trace, wrong traces, garbage) for three generated backdoor problems."""
    from calver.data_gen.generators import canonical_trace
    from calver.train.common import generate_problems, problem_json

    probs = generate_problems(["backdoor_set"], 3, seed=5, n_nodes=(4, 5))
    golds = [canonical_trace(p) for p in probs]
    out = []
    for i, p in enumerate(probs):
        wrong = ["\n".join(golds[i].splitlines()[:3]), golds[(i + 1) % len(probs)]]  # truncated; another's trace
        out.append((problem_json(p), golds[i], wrong, ["no slots at all", "", "ANSWER: {"]))
    return out


def _rows(cases) -> list[tuple[str, str]]:
    return [(text, pj) for pj, gold, wrong, junk in cases for text in [gold, *wrong, *junk]]


def _bits(text: str, pj: str) -> list[int]:
    return list(score(text, Problem.from_dict(json.loads(pj))).bits)


def test_pool_bits_equal_in_process_score(cases):
    rows = _rows(cases) * 3
    with rw.WorkerPool(workers=2, budget_s=30.0) as pool:
        out = pool.map(rows)
        assert pool.map([]) == []
        pids = pool.pids()
        assert len(pids) == 2
    assert [r.bits for r in out] == [_bits(t, pj) for t, pj in rows]
    assert all(isinstance(r, Verdict) for r in out)
    assert any(r.bits == [1] * 6 for r in out) and any(r.bits != [1] * 6 for r in out)
    assert not any(_alive(p) for p in pids)  # closed: killed and reaped


def test_reward_with_workers_equals_in_process(cases):
    rows = _rows(cases)
    comps, pjs = [t for t, _ in rows], [pj for _, pj in rows]
    inproc = VerifierReward()
    pooled = VerifierReward(workers=2)
    try:
        logged: dict[str, float] = {}
        got = pooled(None, comps + [42], problem_json=pjs + [pjs[0]], log_metric=logged.__setitem__)
        assert got == inproc(None, comps + [42], problem_json=pjs + [pjs[0]])
        assert pooled.stats()["bit_pass_rates"] == inproc.stats()["bit_pass_rates"]
        assert got[-1] is None and pooled.unscorable == 1  # an unreadable completion never reaches a worker
        assert "verifier/timeouts" not in logged  # no budget: nothing to time out
        # the adapters' entry point: the six bits (and why not) per row, on the same pool
        assert [r.bits for r in pooled.score(comps, pjs)] == [_bits(t, pj) for t, pj in rows]
    finally:
        pooled.close()


def test_over_budget_completion_gets_the_floor_within_budget_and_is_counted(cases):
    pj, gold, wrong, junk = cases[0]
    reward = VerifierReward(budget_s=BUDGET, workers=2, scorer=slow_scorer)
    try:
        assert reward(None, [gold], problem_json=[pj]) == [1.0]  # starts the pool: not part of the timed call
        before = set(reward.engine.pool.pids())
        comps = [gold + "\n" + STALL, gold, *wrong, *junk]
        logged: dict[str, float] = {}
        t0 = time.monotonic()
        out = reward(None, comps, problem_json=[pj] * len(comps), log_metric=logged.__setitem__)
        elapsed = time.monotonic() - t0
        assert elapsed < BUDGET + MARGIN, elapsed
        assert out[0] == 0.0  # the floor, as in verl and OpenRLHF: a slow trace escapes no penalty
        assert out[1:] == [sum(_bits(c, pj)) / 6 for c in comps[1:]]
        assert reward.unscorable_reasons["timeout"] == 1 and reward.stats()["timeouts"] == 1
        assert logged["verifier/timeouts"] == 1.0 and logged["verifier/unscorable"] == 1.0
        pool = reward.engine.pool
        assert pool.timeouts == 1 and pool.restarts == 1
        killed = before - set(pool.pids())
        assert len(killed) == 1 and not any(_alive(p) for p in killed)  # the stuck worker is gone
        assert len(pool.pids()) == 2  # and replaced
        assert reward(None, [gold], problem_json=[pj]) == [1.0]  # the pool still scores
    finally:
        reward.close()


def test_budget_holds_off_the_main_thread(cases):
    """No SIGALRM: a call from a worker thread (as TRL's async GRPO makes it) is bounded the same way.
    One worker: the rows after the stuck one wait for its replacement to start."""
    pj, gold, wrong, _ = cases[1]
    box: dict[str, object] = {}

    def call() -> None:
        reward = VerifierReward(budget_s=BUDGET, workers=1, scorer=slow_scorer)
        try:
            t0 = time.monotonic()
            box["out"] = reward(None, [gold, STALL + gold, wrong[0]], problem_json=[pj] * 3)
            box["elapsed"] = time.monotonic() - t0
            box["stats"] = reward.stats()
        finally:
            reward.close()

    th = threading.Thread(target=call)
    th.start()
    th.join(timeout=60)
    assert not th.is_alive()
    assert box["out"] == [1.0, 0.0, sum(_bits(wrong[0], pj)) / 6]  # over budget: the floor
    # budget + margin, plus one worker start-up (the first call also starts the pool)
    assert box["elapsed"] < BUDGET + MARGIN + 20, box["elapsed"]
    assert box["stats"]["timeouts"] == 1


def test_crashed_worker_costs_one_row_and_is_replaced(cases):
    rows = _rows(cases)
    rows.insert(3, (CRASH, cases[0][0]))
    with rw.WorkerPool(workers=2, scorer=crash_scorer) as pool:
        out = pool.map(rows)
        assert out[3] == Unscorable(rw.CRASHED)
        assert [r.bits for r in out[:3] + out[4:]] == [_bits(t, pj) for t, pj in rows[:3] + rows[4:]]
        assert pool.crashes == 1 and pool.restarts == 1 and len(pool.pids()) == 2


def test_workers_are_cleaned_up():
    pool = rw.WorkerPool(workers=2)
    pids = pool.pids()
    assert all(_alive(p) for p in pids)
    del pool
    gc.collect()  # the finalizer kills and reaps them (it also runs at interpreter exit)
    assert not any(_alive(p) for p in pids)
    shared = rw.shared_pool(1, 5.0)
    assert rw.shared_pool(1, 5.0) is shared  # same config, one pool
    pid = shared.pids()[0]
    rw.close_shared_pools()
    assert shared.closed and not _alive(pid)
    with pytest.raises(RuntimeError, match="closed"):
        shared.map([("x", "{}")])


def test_pickle_drops_pool_and_cache(cases):
    pj, gold, _, _ = cases[2]
    reward = VerifierReward(budget_s=10.0, scorer=slow_scorer, name="r")
    try:
        assert reward(None, [gold], problem_json=[pj]) == [1.0]
        reward.problem(pj)  # the in-process cache (workers keep their own)
        assert reward.engine.pool is not None
        copy = pickle.loads(pickle.dumps(reward))
        assert copy.engine.pool is None and copy.__name__ == "r"
        assert copy.scored == 1 and copy.budget_s == 10.0 and copy.scorer is slow_scorer
        assert copy(None, [gold, "junk"], problem_json=[pj, pj]) == [1.0, sum(_bits("junk", pj)) / 6]
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(reward.engine.pool)
    finally:
        reward.close()
        rw.close_shared_pools()


@pytest.mark.parametrize("kw", [{"budget_s": 0}, {"budget_s": -1.0}, {"budget_s": float("nan")},
                                {"budget_s": True}, {"budget_s": "1"}, {"workers": -1}, {"workers": 1.5},
                                {"scorer": lambda t, p: score(t, p)}, {"scorer": 3}])
def test_bad_settings_are_refused(kw):
    with pytest.raises(ValueError):
        VerifierReward(**kw)


def test_bad_scorer_bits_are_unscorable_not_raised(cases):
    pj, gold, _, _ = cases[0]
    r = VerifierReward(scorer=bad_bits_scorer)
    assert r(None, [gold], problem_json=[pj]) == [None]
    assert any("not six 0/1 values" in k for k in r.unscorable_reasons)


class _Bits:
    bits = [1, 2, 0, 0, 0, 0]


def bad_bits_scorer(text: str, problem) -> _Bits:
    return _Bits()


def test_workers_refuse_ungrounded_problems_like_in_process():
    """Workers prepare problems themselves; the grounding stop still reaches the caller."""
    from test_grounding import _constructed, strip_problem

    from calver.train.rewards import UngroundedProblemError
    from calver.verifier import get_family

    p = _constructed("backdoor_set", n=10)[0]
    fam = get_family("backdoor_set")
    trace = fam.canonical_trace(p, fam.validity_class(p.graph, fam.normalize_query(p))[0])
    stripped = json.dumps(strip_problem(p).to_dict())
    r = VerifierReward(workers=1)
    try:
        with pytest.raises(UngroundedProblemError, match="allow_ungrounded"):
            r(["q"], [trace], problem_json=[stripped])
        assert VerifierReward(workers=1, allow_ungrounded=True)(["q"], [trace], problem_json=[stripped]) == [1.0]
        assert r(["q"], [trace, trace], problem_json=[json.dumps(p.to_dict()), '{"task": 1}']) == [1.0, None]
    finally:
        r.close()


NAP = "<<nap>>"


def napping_scorer(text: str, problem):
    """``score``, after a 0.25 s sleep for a completion holding NAP (a slow but finite row)."""
    if NAP in text:
        time.sleep(0.25)
    return score(text, problem)


def test_concurrent_callers_share_the_workers(cases):
    """Ecosystem review: 8 threads each scoring one row on 4 workers took 8 x 0.25 s, one call at a time.
    The pool now serves every caller's rows at once: 8 naps on 4 workers take about 2 x 0.25 s."""
    rows = _rows(cases)[:8]
    texts = [NAP + t for t, _ in rows]
    want = [_bits(NAP + t, pj) for t, pj in rows]
    with rw.WorkerPool(workers=4, budget_s=30.0, scorer=napping_scorer) as pool:
        pool.map([(texts[0], rows[0][1])])  # warm
        got: dict[int, list] = {}
        threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, pool.map([(texts[i], rows[i][1])])))
                   for i in range(len(rows))]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
    assert [got[i][0].bits for i in range(len(rows))] == want
    assert elapsed < 0.8 * len(rows) * 0.25, f"{elapsed:.2f}s: callers were served one at a time"


def test_a_caller_arriving_mid_drive_is_served(cases):
    rows = _rows(cases)
    with rw.WorkerPool(workers=1, scorer=napping_scorer) as pool:
        box: dict[str, list] = {}
        first = threading.Thread(target=lambda: box.__setitem__("a", pool.map([(NAP + rows[0][0], rows[0][1])] * 4)))
        first.start()
        time.sleep(0.1)  # the first caller is driving, blocked in wait(): the second must wake it
        box["b"] = pool.map([(rows[1][0], rows[1][1])])
        first.join(60)
    assert [r.bits for r in box["a"]] == [_bits(NAP + rows[0][0], rows[0][1])] * 4
    assert box["b"][0].bits == _bits(*rows[1])
