"""calver.integrations.openrlhf: OpenRLHF's ``reward_func(queries, prompts, labels)`` on queries decoded the
way OpenRLHF decodes them (prompt + response, special tokens kept) with a Qwen2-style chat template: the
response is cut out, the bits equal ``score()`` on gold, wrong and garbage traces, and it never raises."""

from __future__ import annotations

import importlib.util
import random
import sys

import pytest
from testing_utils import require_modules

from calver import reward as reward_core
from calver.data_gen.export import problem_json
from calver.data_gen.generators import GenConfig, canonical_trace, generate
from calver.data_gen.prompts import render_prompt
from calver.evaluation.audits import replace_slot
from calver.integrations import openrlhf as co
from calver.verifier import SLOTS, score

TASKS = ("backdoor_set", "mediator", "cycle_witness")
pytestmark = pytest.mark.usefixtures("reward_worker_pools")  # stop the budgeted path's workers
LOG_KEYS = tuple(f"calver/{s.lower()}" for s in SLOTS) + ("calver/unscorable",)



@pytest.fixture(scope="module")
def problems():
    cfg = GenConfig(seed=7, n_nodes=(4, 6))
    return [p for t in TASKS for p in generate(t, 2, cfg)]


@pytest.fixture(scope="module")
def tok():
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    from calver.train.tiny_model import build_tokenizer

    return build_tokenizer()  # Qwen2Tokenizer with the tiny model's ChatML template (no model, no torch)


def _traces(p) -> list[str]:
    gold = canonical_trace(p)
    return [gold, "\n".join(gold.splitlines()[:3]), replace_slot(gold, "ANSWER", "{}"),
            replace_slot(gold, "GRAPH", "A -> B"), "", "no slots at all", "GRAPH: ->-> <|im_start|>",
            "".join(random.Random(1).choice("GRAPH:ANSWER->{}, \n") for _ in range(2000))]


def _openrlhf_query(tok, prompt: str, response: str, pad: int = 2) -> str:
    """What OpenRLHF's SingleTurnAgentExecutor hands reward_func: decode(prompt ids + action ids) with
    special tokens kept; the action ends with <|im_end|> (then, here, a little padding)."""
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<|im_end|>")]
    a_ids += [tok.convert_tokens_to_ids("<|endoftext|>")] * pad
    return tok.decode(p_ids + a_ids, skip_special_tokens=False)


def _bits(out, i):
    return [int(out["extra_logs"][k][i]) for k in LOG_KEYS[:-1]]


def _check_shape(out, n):
    assert set(out) == {"rewards", "scores", "extra_logs"} and set(out["extra_logs"]) == set(LOG_KEYS)
    for col in (out["rewards"], out["scores"], *out["extra_logs"].values()):
        assert len(col) == n
        if "torch" in sys.modules and not isinstance(col, list):
            assert tuple(col.shape) == (n,)


def test_markers_from_the_chat_template(tok):
    m = co.markers_from_tokenizer(tok)
    assert m.assistant_header == "<|im_start|>assistant\n" and m.end_of_turn == "<|im_end|>"
    assert {"<|im_start|>", "<|im_end|>", "<|endoftext|>"} <= set(m.special_tokens)
    assert (m.assistant_header, m.end_of_turn) == (co.CHATML.assistant_header, co.CHATML.end_of_turn)


@require_modules("tokenizers", "transformers")
def test_bits_equal_score_on_decoded_queries(tok, problems):
    queries, prompts, labels, expect = [], [], [], []
    for p in problems:
        prompt = tok.apply_chat_template(render_prompt(p), tokenize=False, add_generation_prompt=True)
        assert prompt.endswith("<|im_start|>assistant\n")
        for t in _traces(p):
            queries.append(_openrlhf_query(tok, prompt, t))
            prompts.append(prompt)
            labels.append(problem_json(p))
            expect.append(score(t, p))
    for fn in (co.reward_func, co.make_reward_func(tok)):
        out = fn(queries, prompts, labels)
        _check_shape(out, len(queries))
        for i, ts in enumerate(expect):
            assert _bits(out, i) == list(ts.bits), i
            assert float(out["rewards"][i]) == pytest.approx(ts.total / 6)
            assert float(out["scores"][i]) == float(out["rewards"][i])
            assert float(out["extra_logs"]["calver/unscorable"][i]) == 0.0
    # one at a time, as OpenRLHF calls it (batch of 1): gold is 1.0
    gold = canonical_trace(problems[0])
    q = _openrlhf_query(tok, prompts[0], gold)
    one = co.reward_func([q], [prompts[0]], [labels[0]])
    _check_shape(one, 1)
    assert float(one["rewards"][0]) == 1.0


@require_modules("tokenizers", "transformers")
def test_response_found_without_an_exact_prompt(tok, problems):
    p = problems[1]
    gold = canonical_trace(p)
    prompt = tok.apply_chat_template(render_prompt(p), tokenize=False, add_generation_prompt=True)
    q = _openrlhf_query(tok, prompt, gold)
    assert co.response_text(q, prompt) == gold
    assert co.response_text(q, None) == gold  # after the assistant header
    assert co.response_text(q, "a different prompt<|im_start|>assistant\n") == gold
    assert co.response_text(q[200:], prompt) == gold  # left-truncated prompt: found by its tail
    assert co.response_text(gold + "<|im_end|><|endoftext|>") == gold  # no prompt at all
    # a model that opens a new turn after its answer: only its first turn counts
    assert co.response_text(prompt + gold + "<|im_end|>\n<|im_start|>assistant\nANSWER: x", prompt) == gold
    assert co.response_text(None) is None and co.response_text(5, prompt) is None


def test_unscorable_rows_and_garbage_never_raise(problems):
    gold = canonical_trace(problems[0])
    pj = problem_json(problems[0])
    reward_core.reset_stats()
    out = co.reward_func([gold, gold, None, 7, gold], ["", None, "", "", 3],
                         [pj, "not json", pj, pj, {"task": "nope"}])
    _check_shape(out, 5)
    assert [float(x) for x in out["rewards"]] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [float(x) for x in out["extra_logs"]["calver/unscorable"]] == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert _bits(out, 1) == [0] * 6
    assert reward_core.stats()["unscorable"] == 4
    for q, pr, lb in ((None, None, None), ("abc", "a", "b"), ([gold], None, None), ([gold], [1, 2, 3], [pj, pj]),
                      ([gold, gold], [""], [pj]), (iter([gold]), iter([""]), iter([pj])), ({"a": 1}, [], [])):
        res = co.reward_func(q, pr, lb)
        assert set(res) == {"rewards", "scores", "extra_logs"}
    short = co.reward_func([gold, gold], [""], [pj])  # labels shorter than queries: the rest unscorable
    assert [float(x) for x in short["rewards"]] == [1.0, 0.0]


def _load_as_openrlhf_does():
    spec = importlib.util.spec_from_file_location("reward_func", co.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_options_from_the_environment(problems, monkeypatch):
    """OpenRLHF passes a reward file no options: they come from CALVER_REWARD_*, read when it loads the file."""
    p = problems[0]
    half = "\n".join(canonical_trace(p).splitlines()[:4])
    monkeypatch.setenv("CALVER_REWARD_VARIANT", "strict")
    out = _load_as_openrlhf_does().reward_func([half, canonical_trace(p)], [None, None], [problem_json(p)] * 2)
    assert [float(x) for x in out["rewards"]] == [0.0, 1.0]
    assert _bits(out, 0) == list(score(half, p).bits)
    monkeypatch.setenv("CALVER_REWARD_BUDGET_S", "20")
    monkeypatch.setenv("CALVER_REWARD_WORKERS", "2")
    again = _load_as_openrlhf_does().reward_func([half, canonical_trace(p)], [None, None], [problem_json(p)] * 2)
    assert [float(x) for x in again["rewards"]] == [0.0, 1.0] and _bits(again, 0) == _bits(out, 0)


@pytest.mark.parametrize("var,bad", [("CALVER_REWARD_BUDGET_S", "not-a-number"), ("CALVER_REWARD_WORKERS", "-3"),
                                     ("CALVER_REWARD_VARIANT", "strcit")])
def test_a_bad_environment_stops_the_load_naming_it(monkeypatch, var, bad):
    monkeypatch.setenv(var, bad)
    with pytest.raises(ValueError, match=var):
        _load_as_openrlhf_does()


# How each major chat template ends an assistant turn (the strings their tokenizers decode with special
# tokens kept). OpenRLHF decodes prompt + response with them, and the reward file gets no tokenizer.
TEMPLATES = {
    "chatml_qwen": ("<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>\n<|endoftext|>"),
    "llama3": ("<|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>assistant"
               "<|end_header_id|>\n\n", "<|eot_id|>"),
    "mistral": ("<s>[INST] Q [/INST]", "</s>"),
    "gemma": ("<bos><start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n", "<end_of_turn>\n<eos>"),
    "phi3": ("<|user|>\nQ<|end|>\n<|assistant|>\n", "<|end|>\n<|endoftext|>"),
    "deepseek": ("<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Q<\uff5cAssistant\uff5c>",
                 "<\uff5cend\u2581of\u2581sentence\uff5c>"),
}


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_end_of_turn_markers_of_every_major_template_are_cut(problems, template):
    """Audit: gold traces ending in Llama/Mistral/Gemma/Phi end tokens scored 5/6 (ANSWER did not parse)."""
    prompt, end = TEMPLATES[template]
    p = problems[0]
    gold = canonical_trace(p)
    out = co.reward_func([prompt + gold + end], [prompt], [problem_json(p)])
    assert _bits(out, 0) == [1] * 6 and float(out["rewards"][0]) == 1.0, template


def test_lists_without_torch(problems, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    p = problems[0]
    out = co.reward_func([canonical_trace(p)], [None], [problem_json(p)])
    assert out["rewards"] == [1.0] and out["extra_logs"]["calver/graph"] == [1.0]


@require_modules("torch")
def test_tensors_with_torch(problems):
    import torch

    p = problems[0]
    out = co.reward_func([canonical_trace(p), "x"], [None, None], [problem_json(p)] * 2)
    assert isinstance(out["rewards"], torch.Tensor) and out["rewards"].dtype == torch.float32
    assert out["rewards"].tolist() == [1.0, 0.0]
    assert out["extra_logs"]["calver/graph"].flatten()[0].item() == 1.0  # what OpenRLHF logs per sample


def test_loads_the_way_openrlhf_does(problems):
    """OpenRLHF: spec_from_file_location("reward_func", PATH) and ``module.reward_func``."""
    spec = importlib.util.spec_from_file_location("reward_func", co.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = problems[2]
    out = mod.reward_func([canonical_trace(p)], [""], [problem_json(p)])
    assert float(out["rewards"][0]) == 1.0


def test_serve_reward_answers_the_protocol_and_refuses_what_is_not(problems):
    import json as _json
    import urllib.error
    import urllib.request

    from calver.integrations.openrlhf_server import RewardServer, serve_in_thread
    from calver.reward import RewardOptions

    server = RewardServer(("127.0.0.1", 0), RewardOptions(), max_body_bytes=200_000, max_rows=8)
    serve_in_thread(server)
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def post(body: bytes, path: str = "/get_reward"):
        req = urllib.request.Request(base + path, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, _json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, _json.loads(e.read())

    try:
        p = problems[0]
        gold = canonical_trace(p)
        status, out = post(_json.dumps({"query": [gold, "junk", gold], "prompts": ["", "", ""],
                                        "labels": [problem_json(p), problem_json(p), "not json"]}).encode())
        assert status == 200 and out["rewards"] == out["scores"] and out["rewards"][0] == 1.0
        assert out["rewards"][2] == 0.0 and out["extra_logs"]["calver/unscorable"] == [0.0, 0.0, 1.0]
        assert set(out["extra_logs"]) == set(LOG_KEYS)
        assert post(b"{not json")[0] == 400
        assert post(_json.dumps({"queries": []}).encode())[0] == 400
        assert post(_json.dumps({"query": ["x"], "labels": "y"}).encode())[0] == 400
        assert post(_json.dumps({"query": ["x"] * 9}).encode())[0] == 413
        assert post(b"[" + b" " * 300_000 + b"]")[0] == 413
        assert post(b"{}", "/step")[0] == 404
        with urllib.request.urlopen(base + "/health", timeout=30) as r:
            assert _json.loads(r.read()) == {"status": "ok"}
    finally:
        server.shutdown()
        server.server_close()
    assert server.server_address[0] == "127.0.0.1"


def test_serve_reward_cli_refuses_bad_options(capsys):
    from calver.cli import main

    assert main(["serve-reward", "--variant", "nope", "--port", "0"]) == 2
    assert "reward option" in capsys.readouterr().err
