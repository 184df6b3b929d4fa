"""Batched scoring with HF sequence-classification models: the distilled PRM and reward models.

One scorer, :class:`SeqClsScorer`, serves both: logit 0 of ``AutoModelForSequenceClassification``
(``num_labels=1``) is the score, and a *text builder* turns (problem text, trace) into the model's
input string. The builders differ in one respect:

- :func:`chat_text` (reward models, e.g. Skywork-Reward-V2): the chat [user: prompt, assistant: trace].
- :func:`prm_text` (the distilled PRM of ``calver train prm``): a user turn + the generation prompt,
  then the raw trace. Training (``calver.train.prm``) builds its inputs with this same function, so
  train and inference cannot drift apart; :data:`INPUT_FORMAT` names it in the PRM's meta file.

:func:`load_prm` reads a directory written by ``calver train prm`` (it holds :data:`PRM_META_FILE`)
as a PRM and any other directory as a reward model. torch/transformers/peft load lazily.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

PRM_META_FILE = "calver_prm.json"
INPUT_FORMAT = "calver-prm/user-turn+trace/1"

TextBuilder = Callable[[Any, Optional[str], str], str]  # (tokenizer, problem text or None, trace) -> input


def prm_text(tokenizer, problem_text: str | None, trace: str) -> str:
    """The PRM input string: a user turn + generation prompt (chat template when there is one), then the trace."""
    if problem_text is None:
        return trace
    if getattr(tokenizer, "chat_template", None):
        head = tokenizer.apply_chat_template([{"role": "user", "content": problem_text}], tokenize=False,
                                             add_generation_prompt=True)
        return head + trace
    return f"{problem_text}\n\n{trace}"


def chat_text(tokenizer, problem_text: str | None, trace: str) -> str:
    """A reward model's input: the chat [user: problem text, assistant: trace]; the trace alone without a prompt."""
    if problem_text is None:
        return trace
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": problem_text}, {"role": "assistant", "content": trace}], tokenize=False
        )
    return f"{problem_text}\n\n{trace}"


def load_seq_cls(path: str, tokenizer, **kw):
    """A one-logit regression head on ``path`` with the tokenizer's pad id (training and inference load alike)."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, problem_type="regression", **kw)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.config.problem_type = "regression"
    return model


class SeqClsScorer:
    """An HF sequence-classification model scoring (problem text, trace) pairs in batches: logit 0.

    ``text`` builds each input (default :func:`chat_text`). ``base_model``: ``path`` holds a PEFT
    adapter (with its score head) for that base, merged in at load. Inputs are left-truncated to
    ``max_length`` (capped by the model's positions), keeping the trace's end where RESULT/ANSWER
    sit. A non-finite logit becomes NaN: a score that could not be computed, which never wins.
    """

    def __init__(self, path: str | Path, *, text: TextBuilder = chat_text, base_model: str | None = None,
                 trust_remote_code: bool = False, device: str | None = None, batch_size: int = 8,
                 max_length: int = 4096) -> None:
        import torch
        from transformers import AutoTokenizer

        self.path = str(path)
        self.text_builder = text
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tok = AutoTokenizer.from_pretrained(self.path, trust_remote_code=trust_remote_code)
        self.tok.truncation_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        if base_model is None:
            model = load_seq_cls(self.path, self.tok, dtype=dtype, trust_remote_code=trust_remote_code)
        else:
            from peft import PeftModel

            model = load_seq_cls(base_model, self.tok, dtype=dtype, trust_remote_code=trust_remote_code)
            model = PeftModel.from_pretrained(model, self.path).merge_and_unload()
        self.model = model.to(self.device).eval()
        limit = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length = min(int(max_length), int(limit))
        self.batch_size = batch_size

    def text(self, problem_text: str | None, trace: str) -> str:
        return self.text_builder(self.tok, problem_text, trace)

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        import torch

        out: list[float] = []
        for i in range(0, len(texts), self.batch_size):
            enc = self.tok(list(texts[i : i + self.batch_size]), return_tensors="pt", padding=True, truncation=True,
                           max_length=self.max_length, add_special_tokens=False).to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits.float()
            out += [float(x) for x in logits[:, 0].tolist()]
        return [x if math.isfinite(x) else math.nan for x in out]

    def score_many(self, pairs: Sequence[tuple[str | None, str]]) -> list[float]:
        return self.score_texts([self.text(p, t) for p, t in pairs])

    def score(self, problem_text: str | None, trace: str) -> float:
        return self.score_many([(problem_text, trace)])[0]


@runtime_checkable
class PRMScorer(Protocol):
    """The distilled process reward model's interface: one scalar per (problem text, trace)."""

    def score(self, problem_text: str, trace: str) -> float: ...


def load_prm(path: str | Path, **kwargs: Any) -> SeqClsScorer:
    """Load a PRM from ``path``.

    A directory written by ``calver train prm`` (it holds :data:`PRM_META_FILE`) scores with
    :func:`prm_text`, on its recorded base model (a LoRA run) and ``max_length``; any other directory
    is read as an HF sequence-classification model scoring :func:`chat_text`. ``kwargs`` go to
    :class:`SeqClsScorer` (``device``, ``batch_size``, ``max_length``, ``base_model`` ...).
    """
    meta_path = Path(path) / PRM_META_FILE
    if not meta_path.exists():
        return SeqClsScorer(path, **kwargs)
    meta = json.loads(meta_path.read_text())
    fmt = meta.get("input_format", INPUT_FORMAT)
    if fmt != INPUT_FORMAT:  # a PRM trained on other inputs would score garbage, silently
        raise ValueError(f"{meta_path}: input_format {fmt!r}, this calver reads {INPUT_FORMAT!r}")
    kw: dict[str, Any] = {"max_length": int(meta.get("max_length", 2048)),
                          "trust_remote_code": bool(meta.get("trust_remote_code", False)),
                          "base_model": None if meta.get("mode") == "full" else meta["base_model"]}
    kw.update({k: v for k, v in kwargs.items() if v is not None})  # None: keep what the PRM recorded
    return SeqClsScorer(path, text=prm_text, **kw)
