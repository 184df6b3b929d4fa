"""Each adapter called through its trainer's own code on CPU (``tests/trainer_code.py`` loads it): verl's
custom-reward loader and reward manager, OpenRLHF's agent executor with the reward file and with the HTTP
server, TRL's reward helpers and its async GRPO OpenEnv harness. Bits must equal ``calver.verifier.score``."""

from __future__ import annotations

import asyncio
import random
import types

import pytest
from testing_utils import require_modules
from trainer_code import CharTokenizer, load_openrlhf_agent, load_verl, verl_row

from calver.data_gen.export import problem_json
from calver.data_gen.generators import GenConfig, canonical_trace, generate
from calver.data_gen.prompts import render_prompt
from calver.evaluation.audits import replace_slot
from calver.reward import RewardSpec
from calver.verifier import BIT_KEYS, score

pytestmark = pytest.mark.usefixtures("reward_worker_pools")


@pytest.fixture(scope="module")
def problems():
    cfg = GenConfig(seed=11, n_nodes=(4, 7))
    return [p for t in ("backdoor_set", "mediator", "frontdoor_set", "cycle_witness") for p in generate(t, 3, cfg)]


def _rows(problems):
    rng = random.Random(5)
    out = []
    for p in problems:
        gold = canonical_trace(p)
        for text in (gold, replace_slot(gold, "ANSWER", "{}"), "\n".join(gold.splitlines()[:3]),
                     "".join(rng.choice("GRAPH:ANSWER->{}, \n") for _ in range(300))):
            out.append((p, text))
    return out


@require_modules("torch")
@pytest.mark.parametrize("name,kwargs", [("compute_score", {}), ("compute_score_async", {}),
                                         ("compute_score", {"variant": "strict"}),
                                         ("compute_score_async", {"variant": "validity", "budget_s": 20.0})])
def test_verl_loader_and_reward_manager_give_score_bits(problems, monkeypatch, name, kwargs):
    """verl 0.9.1: ``reward.custom_reward_function`` -> ``get_custom_reward_fn`` (its loader, reward_kwargs
    merged) -> ``NaiveRewardManager.run_single`` for every rollout at once (``asyncio.gather``, as verl's
    reward loop does)."""
    verl = load_verl(monkeypatch)
    config = types.SimpleNamespace(reward={"custom_reward_function": {
        "path": "pkg://calver.integrations.verl", "name": name, "reward_kwargs": kwargs}})
    fn = verl.get_custom_reward_fn(config)
    rows = _rows(problems)

    async def run():
        manager = verl.NaiveRewardManager(config=None, tokenizer=CharTokenizer(), compute_score=fn)
        assert manager.is_async_reward_score == name.endswith("_async")
        return await asyncio.gather(*(manager.run_single(verl_row(t, problem_json(p))) for p, t in rows))

    outs = asyncio.run(run())
    spec = RewardSpec(kwargs.get("variant", "fraction"))
    for (p, text), out in zip(rows, outs):
        bits = score(text, p).bits
        info = out["reward_extra_info"]
        assert [info[k] for k in BIT_KEYS] == bits and info["unscorable"] == 0
        assert out["reward_score"] == pytest.approx(spec.value(bits))


def _engine(response: str, tok):
    class Engine:  # vLLM's async engine as OpenRLHF calls it: generate(prompt ids, params) -> token ids
        async def generate(self, prompt_token_ids, params, multi_modal_data=None):
            ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
            out = types.SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=None)
            return types.SimpleNamespace(outputs=[out])

    return Engine()


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("transformers")
    from calver.train.tiny_model import build_tokenizer

    return build_tokenizer()  # Qwen2Tokenizer with the tiny model's ChatML template


def _executor_outputs(agent, url, rows, tok):
    params = types.SimpleNamespace(max_tokens=1024, logprobs=None)

    async def run():
        ex = agent.SingleTurnAgentExecutor(remote_rm_url=url)
        outs = []
        for p, text in rows:
            prompt = tok.apply_chat_template(render_prompt(p), tokenize=False, add_generation_prompt=True)
            outs.append(await ex.execute(prompt, problem_json(p), params, 4096, tok, _engine(text, tok)))
        return outs

    return asyncio.run(run())


def _flat(x):
    return float(x.flatten()[0].item()) if hasattr(x, "flatten") else float(x[0])


@require_modules("torch", "transformers")
def test_openrlhf_executor_with_the_reward_file(problems, monkeypatch, tok):
    import calver.integrations.openrlhf as co

    agent = load_openrlhf_agent(monkeypatch)
    rows = _rows(problems)[::2]
    for (p, text), out in zip(rows, _executor_outputs(agent, co.__file__, rows, tok)):
        bits = score(text, p).bits
        assert [_flat(out["extra_logs"][f"calver/{k}"]) for k in BIT_KEYS] == bits
        assert _flat(out["reward"]) == pytest.approx(sum(bits) / 6)


@require_modules("torch", "transformers")
def test_openrlhf_http_client_against_serve_reward(problems, monkeypatch, tok):
    """OpenRLHF's HTTP mode (``--reward.remote_url http://.../get_reward``): its own aiohttp client posts
    ``{"query", "prompts", "labels"}``; ``calver serve-reward`` answers with the reward file's numbers."""
    from calver.integrations.openrlhf_server import RewardServer, serve_in_thread
    from calver.reward import RewardOptions

    agent = load_openrlhf_agent(monkeypatch)
    server = RewardServer(("127.0.0.1", 0), RewardOptions(variant="strict"))
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/get_reward"
        rows = _rows(problems)[1::2]
        outs = _executor_outputs(agent, url, rows, tok)
    finally:
        server.shutdown()
        server.server_close()
    for (p, text), out in zip(rows, outs):
        bits = score(text, p).bits
        assert [_flat(out["extra_logs"][f"calver/{k}"]) for k in BIT_KEYS] == bits
        assert _flat(out["reward"]) == float(all(bits)) and _flat(out["scores"]) == float(all(bits))


@require_modules("trl")
def test_trl_sees_the_async_reward_as_async_and_names_every_reward():
    import pickle

    from trl.trainer.utils import get_callable_name, is_async_callable

    import calver.train.rewards as r

    assert is_async_callable(r.verifier_reward_async) and not is_async_callable(r.verifier_reward)
    names = [get_callable_name(f) for f in (r.verifier_reward, r.verifier_reward_async, r.verifier_reward_validity,
                                            *r.BIT_REWARDS)]
    assert names[:3] == ["verifier_reward", "verifier_reward_async", "verifier_reward_validity"]
    copy = pickle.loads(pickle.dumps(r.verifier_reward_async))  # async GRPO pickles its rewards
    assert is_async_callable(copy)


@require_modules("trl", "openenv")
def test_trl_async_grpo_openenv_harness_imports_with_the_pinned_openenv():
    """Ecosystem review: with openenv-core 0.3.0 this import failed (no ``openenv.core.harness``)."""
    import importlib

    harness = importlib.import_module("trl.experimental.async_grpo.openenv_harness")
    assert hasattr(harness, "HarnessRolloutOutcome")
