"""The one sequence-classification scorer: PRM vs reward-model inputs, how ``load_prm`` reads a directory,
and batched scoring on the tiny model."""

from __future__ import annotations

import json
import math

import pytest

from calver.infer.selectors.scorers import INPUT_FORMAT, PRM_META_FILE, chat_text, load_prm, prm_text


class ChatTok:
    """A tokenizer stub whose chat template is visible in the output."""

    chat_template = "stub"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        body = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return body + ("<assistant>" if add_generation_prompt else "")


class PlainTok:
    chat_template = None


def test_prm_input_is_an_open_assistant_turn_and_reward_input_a_closed_one():
    assert prm_text(ChatTok(), "P", "T") == "<user>P</user><assistant>T"
    assert chat_text(ChatTok(), "P", "T") == "<user>P</user><assistant>T</assistant>"
    for build in (prm_text, chat_text):
        assert build(PlainTok(), "P", "T") == "P\n\nT"
        assert build(ChatTok(), None, "T") == "T"  # trace-only variant


def test_load_prm_refuses_a_prm_trained_on_other_inputs(tmp_path):
    (tmp_path / PRM_META_FILE).write_text(json.dumps({"mode": "full", "input_format": "calver-prm/other/9"}))
    with pytest.raises(ValueError, match="input_format"):
        load_prm(tmp_path)


@pytest.fixture(scope="module")
def full_prm_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model dressed as a full-fine-tuned calver PRM (links to its files + a meta file)."""
    d = tmp_path_factory.mktemp("prm_full")
    for f in tiny_model_dir.iterdir():
        (d / f.name).symlink_to(f)
    (d / PRM_META_FILE).write_text(json.dumps({"mode": "full", "input_format": INPUT_FORMAT, "max_length": 64,
                                               "base_model": "unused-for-full"}))
    return d


def test_load_prm_reads_a_calver_prm_and_any_other_dir_as_a_reward_model(tiny_model_dir, full_prm_dir):
    pytest.importorskip("transformers")
    prm = load_prm(full_prm_dir, batch_size=2)
    assert prm.text_builder is prm_text and prm.max_length == 64 and prm.batch_size == 2
    assert load_prm(full_prm_dir, max_length=32).max_length == 32  # an explicit argument wins
    rm = load_prm(tiny_model_dir)
    assert rm.text_builder is chat_text and rm.max_length == 2048  # capped by the model's positions


def test_batched_scores_equal_one_at_a_time(full_prm_dir):
    pytest.importorskip("transformers")
    prm = load_prm(full_prm_dir, batch_size=3)
    pairs = [("Which set?", "STRATEGY: x"), ("Which set?", "a much longer trace " * 5), (None, "ANSWER: {Z}"),
             ("Q", "")]
    batched = prm.score_many(pairs)
    single = [prm.score(p, t) for p, t in pairs]
    assert all(math.isfinite(x) for x in batched)
    assert batched == pytest.approx(single, abs=1e-4)
    assert len(set(round(x, 6) for x in batched)) > 1  # the inputs reach the model
