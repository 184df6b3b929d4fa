"""The tiny model and its tokenizer reload through the Auto classes and round-trip text exactly."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testing_utils import require_torch

from calver.train.tiny_model import CHAT_TEMPLATE, EOT, IM_END, IM_START, build_tiny_model

pytestmark = require_torch

TEXTS = [
    "GRAPH: A -> B, B -> C",
    "STRATEGY: {A, B}",
    "SLOT adjust_3 = Z; p=0.125",
    "  leading and trailing  spaces \t tabs\n\nnewlines\r\n",
    "héllo wörld 🙂 日本語 Ωμέγα",
    '{"nodes": ["A", "B"], "edges": ["A -> B"], "n": -42}',
    f"{IM_START}user\nGRAPH: A -> B{IM_END}\n{IM_START}assistant\nSTRATEGY: {{A}}{IM_END}{EOT}",
    "",
]


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_model_reloads(tiny_model_dir, tok):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    cfg = model.config
    assert type(model).__name__ == "Qwen2ForCausalLM"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (128, 2, 2)
    assert cfg.hidden_size // cfg.num_attention_heads == 64 and getattr(cfg, "head_dim", 64) == 64
    assert cfg.vocab_size % 64 == 0 and cfg.vocab_size >= len(tok)
    ids = torch.tensor([tok.encode("GRAPH: A -> B")])
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], cfg.vocab_size) and torch.isfinite(logits).all()
    assert tok.convert_tokens_to_ids(IM_END) in model.generation_config.eos_token_id


def test_special_tokens(tok):
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert tok.eos_token == IM_END and tok.pad_token == EOT and tok.pad_token_id is not None
    for t in (EOT, IM_START, IM_END):
        assert tok.encode(t, add_special_tokens=False) == [tok.convert_tokens_to_ids(t)]
    assert tok.encode("abc", add_special_tokens=True) == tok.encode("abc", add_special_tokens=False)


def test_ids_identical_across_load_paths(tiny_model_dir, tok):
    """AutoTokenizer rebuilds a Qwen2Tokenizer from vocab/merges; the raw tokenizer.json must agree."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    generic = PreTrainedTokenizerFast.from_pretrained(tiny_model_dir)
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == raw.encode(text, add_special_tokens=False).ids == generic.encode(text, add_special_tokens=False)
    assert json.loads((tiny_model_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "Qwen2Tokenizer"


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok, text):
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_round_trip_random_text(tok, text):
    text = unicodedata.normalize("NFC", text)  # the tokenizer normalizes to NFC, like Qwen2's
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_chat_template_generation_markers_and_assistant_mask(tok):
    from trl.chat_template_utils import (
        get_training_chat_template,
        has_generation_markers,
        is_chat_template_stop_token_trained,
    )

    assert tok.chat_template == CHAT_TEMPLATE
    assert "{%- generation %}" in tok.chat_template and "{%- endgeneration %}" in tok.chat_template
    assert has_generation_markers(tok.chat_template)
    assert get_training_chat_template(tok) is None  # TRL needs no patching
    assert is_chat_template_stop_token_trained(tok)

    msgs = [
        {"role": "system", "content": "You verify."},
        {"role": "user", "content": "GRAPH: A -> B"},
        {"role": "assistant", "content": "STRATEGY: {A}"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "STRATEGY: {}"},
    ]
    text = tok.apply_chat_template(msgs, tokenize=False)
    assert text == (
        f"{IM_START}system\nYou verify.{IM_END}\n{IM_START}user\nGRAPH: A -> B{IM_END}\n"
        f"{IM_START}assistant\nSTRATEGY: {{A}}{IM_END}\n{IM_START}user\nagain{IM_END}\n"
        f"{IM_START}assistant\nSTRATEGY: {{}}{IM_END}\n"
    )
    out = tok.apply_chat_template(msgs, return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    assert len(ids) == len(mask) and set(mask) == {0, 1}
    spans, cur = [], []
    for i, m in zip(ids, mask):
        if m:
            cur.append(i)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    assert [tok.decode(s) for s in spans] == [f"STRATEGY: {{A}}{IM_END}", f"STRATEGY: {{}}{IM_END}"]
    prompt = tok.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(f"{IM_START}assistant\n")


def test_custom_corpus(tmp_path):
    corpus = ["CONTRACTSLOT CONTRACTSLOT CONTRACTSLOT"] * 50 + ["GRAPH: X -> Y"] * 50
    path = build_tiny_model(tmp_path / "m", corpus=corpus, vocab_size=400, hidden_size=64, num_heads=1, seed=1)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    assert len(tok.encode("CONTRACTSLOT", add_special_tokens=False)) <= 2
    assert tok.decode(tok.encode("GRAPH: X -> Y ü")) == "GRAPH: X -> Y ü"
