"""The verifier as an OpenRLHF reward function file.

OpenRLHF loads a ``.py`` file given as its remote reward URL (``--reward.remote_url FILE.py``, before
0.10.2 ``--remote_rm_url FILE.py``) and calls its ``reward_func(queries, prompts, labels)``, where
``queries`` are the decoded prompt + response *with* special tokens, ``prompts`` the chat-templated
prompts and ``labels`` the dataset's ``--data.label_key`` column: here ``problem_json`` of a
``calver gen`` dataset. It returns a dict of tensors (OpenRLHF's contract)::

    {"rewards": tensor[n],    # the reward variant's value per sample (fraction S/6 by default)
     "scores":  tensor[n],    # the same (in [0, 1]: what --dynamic_filtering reads)
     "extra_logs": {"calver/graph": tensor[n], ..., "calver/answer": tensor[n], "calver/unscorable": tensor[n]}}

torch is imported inside the call, only to build those tensors (OpenRLHF always has it); without torch the
values are lists of floats. An unscorable row gets reward 0.0, bits 0 and ``calver/unscorable`` 1 (see
:mod:`calver.reward.spec` for why). Never raises for a row. OpenRLHF's HTTP mode
(``--reward.remote_url http://HOST:PORT/get_reward``) is served by :mod:`calver.integrations.openrlhf_server`
with the same logic.

The response is cut out of the query with the model's chat-template markers: the text after the prompt
(or after its assistant header), up to the first end-of-turn token, with any other special token removed.
The markers default to ChatML (Qwen2-style ``<|im_start|>assistant\\n ... <|im_end|>``); set
``CALVER_CHAT_TOKENIZER=/path/to/model`` to derive them from that tokenizer's chat template
(:func:`markers_from_tokenizer`), or build your own function with :func:`make_reward_func`. Whatever the
markers, the response is also cut at the first end-of-turn token of any major chat template
(:data:`calver.reward.completions.END_OF_TURN_MARKERS`: Llama 3, Mistral, Gemma, Phi, DeepSeek, ...), so a
non-ChatML policy does not lose its ANSWER bit to a trailing ``<|eot_id|>``.

Reward options (OpenRLHF passes no kwargs to a reward file): the ``CALVER_REWARD_*`` environment
(:mod:`calver.reward.options`), read when OpenRLHF loads this file: a bad value stops the load, naming it.

The path to give OpenRLHF: ``python -c "import calver.integrations.openrlhf as m; print(m.__file__)"``.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, NamedTuple, Sequence

from calver.reward import RewardOptions, RewardSpec, score_batch
from calver.reward.completions import rows
from calver.verifier import BIT_KEYS, RowResult, Unscorable

logger = logging.getLogger(__name__)

ENV_TOKENIZER = "CALVER_CHAT_TOKENIZER"
LOG_PREFIX = "calver/"


class ChatMarkers(NamedTuple):
    """What separates a response in a decoded chat: the header that opens the assistant turn (the
    template's generation prompt), the token that ends a turn, and every special token to drop.

    (A NamedTuple, not a dataclass: OpenRLHF executes this file without registering it in
    ``sys.modules``, where ``dataclasses`` cannot resolve string annotations.)"""

    assistant_header: str
    end_of_turn: str
    special_tokens: tuple[str, ...] = ()


CHATML = ChatMarkers("<|im_start|>assistant\n", "<|im_end|>", ("<|im_start|>", "<|im_end|>", "<|endoftext|>"))


def _special_tokens(tokenizer: Any) -> list[str]:
    toks: set[str] = set()
    try:
        toks.update(t for t in (getattr(tokenizer, "all_special_tokens", None) or ()) if isinstance(t, str))
    except (AttributeError, TypeError, ValueError):  # a tokenizer without the attribute
        pass
    try:
        for added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(added, "special", False) and isinstance(getattr(added, "content", None), str):
                toks.add(added.content)
    except (AttributeError, TypeError, ValueError):
        pass
    return sorted((t for t in toks if t), key=lambda t: (-len(t), t))


def markers_from_tokenizer(tokenizer: Any) -> ChatMarkers:
    """The markers of ``tokenizer``'s chat template: the assistant header is what
    ``add_generation_prompt=True`` appends to a one-user-message chat; the end of turn is the first special
    token (else the text) that follows an assistant message's content. Falls back to ChatML's parts."""
    user = [{"role": "user", "content": "calver-probe-question"}]
    mark = "calver-probe-reply"
    with_gen = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    without = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=False)
    header = with_gen[len(without):] if with_gen.startswith(without) else ""
    full = tokenizer.apply_chat_template(user + [{"role": "assistant", "content": mark}], tokenize=False)
    tail = full[full.rfind(mark) + len(mark):] if mark in full else ""
    special = _special_tokens(tokenizer)
    hits = [(tail.find(t), t) for t in special if t in tail]
    end = min(hits)[1] if hits else (tail.strip() or str(getattr(tokenizer, "eos_token", "") or ""))
    return ChatMarkers(header or CHATML.assistant_header, end or CHATML.end_of_turn, tuple(special))


def response_text(query: Any, prompt: Any = None, markers: ChatMarkers = CHATML) -> str | None:
    """The response inside a decoded ``query`` (prompt + response, special tokens kept); None if ``query``
    is not text. The response starts after ``prompt`` when the query begins with it (else after the
    prompt's last 256 characters, else after as many assistant headers as the prompt holds) and ends at
    the first end-of-turn token; other special tokens are removed."""
    if not isinstance(query, str):
        return None
    header = markers.assistant_header
    resp = None
    if isinstance(prompt, str) and prompt:
        if query.startswith(prompt):
            resp = query[len(prompt):]
        else:  # a re-tokenized or left-truncated prompt: find its (very specific) tail
            tail = prompt[-256:]
            idx = query.find(tail)
            if idx >= 0:
                resp = query[idx + len(tail):]
    if resp is None and header and header in query:
        k = max(1, prompt.count(header)) if isinstance(prompt, str) else 1
        idx = -len(header)
        for _ in range(min(k, query.count(header))):
            idx = query.find(header, idx + len(header))
        resp = query[idx + len(header):]
    if resp is None:
        resp = query
    if markers.end_of_turn:
        j = resp.find(markers.end_of_turn)
        if j >= 0:
            resp = resp[:j]
    for tok in sorted(set(markers.special_tokens) | {markers.end_of_turn} - {""}, key=len, reverse=True):
        resp = resp.replace(tok, "")
    return resp


def _column(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:
        return [float(v) for v in values]
    return torch.tensor(values, dtype=torch.float32)


def columns(results: Sequence[RowResult], spec: RewardSpec) -> tuple[list[float], dict[str, list[float]]]:
    """Rewards and per-bit log columns of scored rows (0.0 and all bits 0 for an unscorable row)."""
    rewards = [spec.number(r) for r in results]
    logs = {LOG_PREFIX + k: [0.0 if isinstance(r, Unscorable) else float(r.bits[i]) for r in results]
            for i, k in enumerate(BIT_KEYS)}
    logs[LOG_PREFIX + "unscorable"] = [float(isinstance(r, Unscorable)) for r in results]
    return rewards, logs


def _result(results: Sequence[RowResult], spec: RewardSpec) -> dict[str, Any]:
    rewards, logs = columns(results, spec)
    return {"rewards": _column(rewards), "scores": _column(rewards),
            "extra_logs": {k: _column(v) for k, v in logs.items()}}


def make_reward_func(tokenizer: Any = None, markers: ChatMarkers | None = None,
                     **options: Any) -> Callable[..., dict[str, Any]]:
    """An OpenRLHF ``reward_func(queries, prompts, labels)`` whose markers come from ``markers``, else
    ``tokenizer``'s chat template, else ChatML. ``options``: :class:`calver.reward.RewardOptions` fields
    (``variant``, ``weights``, ``allow_ungrounded``, ``budget_s``, ``workers``; a bad one raises here)."""
    if markers is None:
        markers = markers_from_tokenizer(tokenizer) if tokenizer is not None else CHATML
    opts = RewardOptions.parse(options)

    def reward_func(queries: Sequence[Any], prompts: Sequence[Any] | None = None,
                    labels: Sequence[Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        return _result(*score_queries(queries, prompts, labels, markers, opts))

    return reward_func


def score_queries(queries: Any, prompts: Any, labels: Any, markers: ChatMarkers,
                  options: RewardOptions) -> tuple[list[RowResult], RewardSpec]:
    """Each decoded query's response scored against its label (a problem JSON). Never raises: a batch
    that cannot be read gives one unscorable row per query it could count."""
    qs = rows(queries)
    n = len(qs) if qs is not None else 0
    try:
        ps = (rows(prompts) or [])[:n]
        ls = (rows(labels) or [])[:n]
        ps += [None] * (n - len(ps))
        ls += [None] * (n - len(ls))
        texts = []
        for q, p in zip(qs or [], ps):
            try:
                texts.append(response_text(q, p, markers))
            except (TypeError, ValueError, AttributeError):  # an odd prompt: score the whole query
                texts.append(q if isinstance(q, str) else None)
        return score_batch(texts, ls, options), options.spec
    except Exception as e:  # noqa: BLE001 - OpenRLHF drops a sample's reward when this raises; never do
        logger.exception("calver OpenRLHF reward: unexpected error")
        return [Unscorable(f"adapter error: {type(e).__name__}: {e}"[:300])] * n, options.spec


_default_markers: ChatMarkers | None = None
_markers_lock = threading.Lock()


def default_markers() -> ChatMarkers:
    """ChatML, or the markers of the tokenizer named by ``CALVER_CHAT_TOKENIZER`` (loaded once; a tokenizer
    that fails to load falls back to ChatML with a warning)."""
    global _default_markers
    with _markers_lock:
        if _default_markers is None:
            path = os.environ.get(ENV_TOKENIZER, "").strip()
            found = CHATML
            if path:
                try:
                    from transformers import AutoTokenizer

                    found = markers_from_tokenizer(AutoTokenizer.from_pretrained(path))
                except (OSError, ValueError, ImportError, TypeError, KeyError) as e:
                    logger.warning("calver OpenRLHF reward: cannot read the chat template of %s (%s); using "
                                   "ChatML markers", path, e)
            _default_markers = found
        return _default_markers


ENV_OPTIONS = RewardOptions.from_env()  # read when OpenRLHF loads this file: a bad value stops the load


def reward_func(queries: Sequence[Any], prompts: Sequence[Any] | None = None, labels: Sequence[Any] | None = None,
                **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's entry point (see the module docstring): options from the ``CALVER_REWARD_*`` environment.
    Never raises."""
    return _result(*score_queries(queries, prompts, labels, default_markers(), ENV_OPTIONS))
