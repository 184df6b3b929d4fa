"""The 2026-12-03 audit's attacks on `calver serve-env` (H2, M1, L4), against a real server subprocess on loopback:
one scored step per episode over every transport, no verifier reason in any observation, idle WebSockets
closed and their sessions freed, a per-client session cap, no /mcp sessions, odd /reset arguments answered
with 422 (never a 500), oversized bodies refused."""

from __future__ import annotations

import json
import random
import re
import time
import urllib.error
import urllib.request

import pytest
from test_openenv_env import _client, _get, _post, _start_server, _stop
from testing_utils import require_modules

from calver.data_gen.export import problem_json
from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.data_gen.text_levels import constructed_problems
from calver.evaluation.audits import replace_slot
from calver.verifier import Problem, score

pytestmark = [require_modules("openenv", "websockets"),
              pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager")]
IDLE_S = 2.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    problems = generate("ate_threshold", 2, GenConfig(seed=0)) + generate("knights_knaves", 2, GenConfig(seed=0))
    made, _ = constructed_problems(generate("backdoor_set", 4, GenConfig(seed=1)), 1, random.Random(0))
    problems += made[:2]
    problems = [Problem.from_dict(json.loads(problem_json(p))) for p in problems]
    path = tmp_path_factory.mktemp("attacks") / "problems.jsonl"
    path.write_text("".join(problem_json(p) + "\n" for p in problems))
    proc, url = _start_server(path, ["--max_sessions", "8", "--max_sessions_per_client", "6",
                                     "--idle_timeout_s", str(IDLE_S)])
    yield url, problems, proc
    _stop(proc)
    log = proc.communicate(timeout=10)[0]
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]  # every attack was answered, none crashed


def test_one_scored_step_per_episode_whatever_the_action_says(served):
    from calver.integrations.openenv_env import TraceAction

    url, problems, _ = served
    p = problems[0]
    with _client(url) as env:
        ticket = env.reset(problem_id=p.id).observation.ticket
        results = [env.step(TraceAction(trace=f"ANSWER: try {i}")) for i in range(10)]
        results += [env.step(TraceAction(trace=canonical_trace(p), ticket=ticket)) for _ in range(10)]
    assert sum(not r.observation.unscorable for r in results) == 1 and not results[0].observation.unscorable
    assert all(r.reward is None for r in results[1:])
    # stateless HTTP: a ticket is spent by its first step, whichever transport issued it
    ticket = _post(f"{url}/reset", {"problem_id": p.id})["observation"]["ticket"]
    bodies = [_post(f"{url}/step", {"action": {"trace": canonical_trace(p), "ticket": ticket}}) for _ in range(5)]
    assert [b["reward"] for b in bodies] == [1.0, None, None, None, None]


def test_no_observation_carries_a_reason(served):
    """The ATE reason printed the exact effect and the constructed-mode b1 reason the hidden graph's edges."""
    from calver.integrations.openenv_env import TraceAction

    url, problems, _ = served
    with _client(url) as env:
        for p in problems:
            gold = canonical_trace(p)
            for trace in (gold, replace_slot(gold, "ANSWER", "no" if "ANSWER: yes" in gold else "yes"),
                          replace_slot(gold, "GRAPH", "A -> B"), "garbage"):
                env.reset(problem_id=p.id)
                obs = env.step(TraceAction(trace=trace)).observation
                shown = json.dumps(obs.model_dump(exclude={"reward"}), ensure_ascii=False)
                reasons = score(trace, p).reasons
                assert not any(r[:30] in shown for r in reasons.values()), (p.id, shown)
                assert "θ" not in shown and "missing edge" not in shown and not re.search(r"\d\.\d{3}", shown)
                assert obs.failed == [k for k, b in obs.bits.items() if not b]


def test_trl_adapter_rewards_the_first_submission_so_brute_force_earns_nothing(served):
    """The audit solved K&K by resubmitting every assignment (3/3 puzzles): now only the first counts."""
    from itertools import product

    from calver.integrations.openenv_env import TRLVerifierEnv
    from calver.verifier.registry import get_family

    url, problems, _ = served
    fam = get_family("knights_knaves")
    for p in (q for q in problems if q.task == "knights_knaves"):
        env = TRLVerifierEnv(url, max_calls=50)
        try:
            env.reset(id=p.id)
            people = p.data["people"]
            sol = fam.solution(p)
            first = None
            for roles in product((True, False), repeat=len(people)):
                a = dict(zip(people, roles))
                reply = env.submit_trace(fam.canonical_trace(p, a))
                first = a if first is None else first
            assert env.get_reward() == (1.0 if first == sol else score(fam.canonical_trace(p, first), p).total / 6)
            assert reply.startswith("already submitted")
        finally:
            env._close()


def _ws_open(url: str):
    from websockets.sync.client import connect

    return connect(url.replace("http://", "ws://") + "/ws", open_timeout=10)


def test_idle_websockets_are_closed_and_one_client_cannot_take_every_session(served):
    from websockets.exceptions import InvalidStatus

    url, problems, _ = served
    held = [_ws_open(url) for _ in range(6)]  # the per-client cap
    with pytest.raises(InvalidStatus) as refused:  # the 7th, at the handshake
        _ws_open(url)
    assert refused.value.response.status_code == 403
    time.sleep(IDLE_S + 6.5)  # idle: closed by the server, sessions freed
    for ws in held:
        with pytest.raises(Exception):  # noqa: B017 - the server closed it
            ws.send(json.dumps({"type": "reset", "data": {}}))
            ws.recv(timeout=5)
    with _client(url) as env:
        assert env.reset(problem_id=problems[0].id).observation.problem_id == problems[0].id


def test_mcp_sessions_are_refused(served):
    url, _, _ = served
    for _ in range(3):
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(f"{url}/mcp", {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}})
        assert e.value.code == 404
    from websockets.sync.client import connect

    with pytest.raises(Exception):  # noqa: B017 - refused at the handshake
        connect(url.replace("http://", "ws://") + "/mcp", open_timeout=10).recv(timeout=5)


@pytest.mark.parametrize("body", [{"index": "abc"}, {"index": [1]}, {"index": True}, {"index": 1e400},
                                  {"problem_id": []}, {"problem_id": "no-such-id"}, {"problem_id": "x" * 300},
                                  {"seed": -1}, {"seed": "7"}])
def test_odd_reset_arguments_are_422_with_a_message(served, body):
    url, _, proc = served
    data = json.dumps(body).replace("1e+400", "1e400").encode()
    req = urllib.request.Request(f"{url}/reset", data=data, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code in (400, 422) and json.loads(e.value.read())["detail"]
    assert _get(f"{url}/health")["status"] == "healthy"


def test_oversized_bodies_are_refused(served):
    url, problems, _ = served
    with pytest.raises(urllib.error.HTTPError) as e:
        _post(f"{url}/step", {"action": {"trace": "x" * 400_000}})
    assert e.value.code == 413
