"""A tiny random-init Qwen2 causal LM plus a trained byte-level BPE tokenizer.

Used by tests, CI and CPU smoke runs: nothing is downloaded. The tokenizer uses exactly Qwen2's
pipeline (NFC normalizer, Split(regex) + ByteLevel pre-tokenizer, ByteLevel decoder, no unk, no
byte fallback), so ``transformers.Qwen2Tokenizer`` (what ``AutoTokenizer`` picks for model_type
qwen2 in transformers 5, rebuilding the backend from vocab/merges) yields the same ids as the raw
``tokenizer.json``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [EOT, IM_START, IM_END]

# Same regex as transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# ChatML; assistant content *and* its <|im_end|> sit inside {% generation %} so TRL's
# assistant_only_loss trains the model to stop (trl.chat_template_utils.is_chat_template_stop_token_trained).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_WORDS = (
    "the a of to and is in that cause effect graph node edge parent child path block open "
    "adjust adjustment set backdoor frontdoor confounder collider mediator treatment outcome "
    "intervene observe contract strategy verify answer because therefore given query identify "
    "slot value true false yes no none valid invalid step check"
).split()


def default_corpus(n_lines: int = 3000, seed: int = 0) -> list[str]:
    """Deterministic synthetic corpus: arrow graphs, slot names, sets, digits, prose, ChatML."""
    rng = random.Random(seed)
    letters = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    lines: list[str] = []
    for i in range(n_lines):
        nodes = rng.sample(letters, rng.randint(2, 7))
        edges = [f"{a} -> {b}" for a, b in zip(nodes, nodes[1:])]
        edges += [f"{rng.choice(nodes)} -> {rng.choice(nodes)}" for _ in range(rng.randint(0, 3))]
        subset = ", ".join(sorted(rng.sample(nodes, rng.randint(0, len(nodes)))))
        kind = i % 6
        if kind == 0:
            lines.append("GRAPH: " + ", ".join(edges))
        elif kind == 1:
            lines.append("STRATEGY: {" + subset + "}")
        elif kind == 2:
            slot = rng.choice(["treatment", "outcome", "adjust", "query", "answer", "mediator"])
            lines.append(f"SLOT {slot}_{rng.randint(0, 99)} = {rng.choice(nodes)}; p={rng.random():.3f}")
        elif kind == 3:
            lines.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 16))).capitalize() + ".")
        elif kind == 4:
            lines.append(f"{IM_START}user\nGRAPH: {', '.join(edges)}\nQ: effect of {nodes[0]} on "
                         f"{nodes[-1]}?{IM_END}\n{IM_START}assistant\nSTRATEGY: {{{subset}}}{IM_END}")
        else:
            lines.append(json.dumps({"nodes": nodes, "edges": edges, "n": rng.randint(-1000, 1000)}))
    # Every printable ASCII char (and tab/newline) at least once.
    lines.append("".join(chr(c) for c in range(32, 127)) + "\t\n")
    return lines


def build_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 2000, phrases: Iterable[str] = (),
                    prompt_phrases: Iterable[str] = ()):
    """Train a Qwen2-pipeline byte-level BPE and wrap it as ``Qwen2Tokenizer`` (a PreTrainedTokenizerFast).

    ``phrases``: fixed strings (a task's contract instructions, a graph header) added as one token
    each. A tiny policy then reads a 200-token instruction block as one symbol and spends its
    compute, and its sequence length, on the graph and the trace. Text that does not contain a
    phrase verbatim tokenizes as before. ``prompt_phrases`` are text only prompts hold (instructions,
    headers): added as special tokens, so a decode with ``skip_special_tokens`` (what the samplers
    do) drops one that a model emits instead of handing its six ``LABEL:`` lines to the parser.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text: Iterator[str] = iter(default_corpus() if corpus is None else corpus)
    tok.train_from_iterator(text, trainer=trainer)
    model_json = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model_json["merges"]]
    # Build through Qwen2Tokenizer itself, so the saved tokenizer.json is byte-for-byte what
    # transformers rebuilds on reload (ids cannot drift between load paths).
    hf_tok = Qwen2Tokenizer(
        vocab=model_json["vocab"],
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token=IM_END,
        pad_token=EOT,
        add_prefix_space=False,
        extra_special_tokens=[IM_START, IM_END],
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    from tokenizers import AddedToken

    prompt_only = sorted({p for p in prompt_phrases if p and p not in SPECIAL_TOKENS})
    extra = sorted({p for p in phrases if p and p not in SPECIAL_TOKENS} - set(prompt_only))
    if prompt_only:
        hf_tok.add_tokens([AddedToken(p, normalized=False, special=True) for p in prompt_only], special_tokens=True)
    if extra:
        hf_tok.add_tokens([AddedToken(p, normalized=False, special=False) for p in extra])
    return hf_tok


def dataset_corpus(sft_jsonl: str | Path, edges: bool = True) -> tuple[list[str], set[str], set[str]]:
    """``(corpus, phrases, prompt_phrases)`` from an SFT JSONL of chat rows: every message text; every
    edge of the traces' GRAPH slots (``A -> B``, alone and after ``", "``, so copying an edge list is
    plain induction over distinct tokens); and the prompts' fixed strings, read as one token each:
    the system turns (contract instructions) and the user turns' first lines (graph headers)."""
    import re

    corpus, phrases, prompt_phrases = [], set(), set()
    edge = re.compile(r"\b(\w{1,32}) (->|<->) (\w{1,32})\b")
    for line in Path(sft_jsonl).read_text(encoding="utf-8").splitlines():
        msgs = json.loads(line)["messages"]
        corpus += [m["content"] for m in msgs]
        prompt_phrases.add(msgs[0]["content"])
        prompt_phrases.add(msgs[1]["content"].split("\n", 1)[0])
        for a, arrow, b in edge.findall(msgs[-1]["content"].split("\n", 1)[0]) if edges else ():
            phrases.update((f"{a} {arrow} {b}", f", {a} {arrow} {b}"))
    corpus += ["system user assistant"] * 20
    return corpus, phrases, prompt_phrases


def build_tiny_model(
    out_dir: str | Path,
    *,
    hidden_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 2,
    num_kv_heads: int | None = None,
    intermediate_size: int = 256,
    vocab_size: int = 2000,
    max_position_embeddings: int = 2048,
    corpus: Iterable[str] | None = None,
    phrases: Iterable[str] = (),
    prompt_phrases: Iterable[str] = (),
    seed: int = 0,
) -> Path:
    """Save a random-init Qwen2ForCausalLM and its tokenizer to ``out_dir``; return the path.

    head_dim = hidden_size // num_heads must be a size vLLM's CPU attention accepts (64 works, 16 does not).
    ``vocab_size`` is the BPE target; the embedding is padded up to a multiple of 64. ``phrases`` become
    single tokens, ``prompt_phrases`` special ones (:func:`build_tokenizer`).
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    if hidden_size % num_heads:
        raise ValueError("hidden_size must be divisible by num_heads")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size, phrases=phrases, prompt_phrases=prompt_phrases)
    n_tok = len(tokenizer)
    eot_id, im_end_id = tokenizer.convert_tokens_to_ids(EOT), tokenizer.convert_tokens_to_ids(IM_END)
    config = Qwen2Config(
        vocab_size=((n_tok + 63) // 64) * 64,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads or num_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=eot_id,
        eos_token_id=im_end_id,
        pad_token_id=eot_id,
        use_cache=True,
    )
    config.dtype = torch.float32
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=eot_id, eos_token_id=[im_end_id, eot_id], pad_token_id=eot_id, do_sample=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_random_lora(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    r: int = 8,
    alpha: int = 16,
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
    seed: int = 0,
) -> Path:
    """Save a PEFT LoRA adapter with random (non-zero) A and B for the model in ``model_dir``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=list(target_modules), lora_dropout=0.0,
                     bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
    peft_model = get_peft_model(base, cfg)
    out = Path(out_dir)
    peft_model.save_pretrained(out)
    return out


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "runs/tiny_model"))
