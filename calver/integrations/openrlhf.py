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
:mod:`calver.integrations` for why). Never raises.

The response is cut out of the query with the model's chat-template markers: the text after the prompt
(or after its assistant header), up to the first end-of-turn token, with any other special token removed.
The markers default to ChatML (Qwen2-style ``<|im_start|>assistant\\n ... <|im_end|>``); set
``CALVER_CHAT_TOKENIZER=/path/to/model`` to derive them from that tokenizer's chat template
(:func:`markers_from_tokenizer`), or build your own function with :func:`make_reward_func`.

Reward options (OpenRLHF passes no kwargs to a reward file): ``CALVER_REWARD_VARIANT``
(fraction|strict), ``CALVER_REWARD_BUDGET_S`` and ``CALVER_REWARD_WORKERS`` (the time-budgeted path of
``calver.train.rewards.VerifierReward``, when it has one).

The path to give OpenRLHF: ``python -c "import calver.integrations.openrlhf as m; print(m.__file__)"``.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, NamedTuple, Sequence

from calver.integrations import BIT_KEYS, UNSCORABLE_REWARD, env_options, score_batch

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
    except Exception:  # noqa: BLE001 - a tokenizer without the attribute
        pass
    try:
        for added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
            if getattr(added, "special", False) and isinstance(getattr(added, "content", None), str):
                toks.add(added.content)
    except Exception:  # noqa: BLE001
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


def _rows(value: Any) -> list[Any] | None:
    if isinstance(value, (str, bytes, bytearray, dict)) or value is None:
        return None
    try:
        return list(value)
    except Exception:  # noqa: BLE001
        return None


def _column(values: list[float]) -> Any:
    try:
        import torch
    except ImportError:
        return [float(v) for v in values]
    return torch.tensor(values, dtype=torch.float32)


def _result(rewards: list[float], bits: list[tuple[int, ...]], unscorable: list[int]) -> dict[str, Any]:
    logs = {LOG_PREFIX + k: _column([float(b[i]) for b in bits]) for i, k in enumerate(BIT_KEYS)}
    logs[LOG_PREFIX + "unscorable"] = _column([float(u) for u in unscorable])
    return {"rewards": _column(rewards), "scores": _column(rewards), "extra_logs": logs}


def make_reward_func(tokenizer: Any = None, markers: ChatMarkers | None = None,
                     **options: Any) -> Callable[..., dict[str, Any]]:
    """An OpenRLHF ``reward_func(queries, prompts, labels, **kwargs)`` whose markers come from ``markers``,
    else ``tokenizer``'s chat template, else ChatML. ``options``: ``variant``, ``weights``,
    ``allow_ungrounded``, ``budget_s``, ``workers`` (as :func:`calver.integrations.score_batch`)."""
    if markers is None:
        markers = markers_from_tokenizer(tokenizer) if tokenizer is not None else CHATML

    def reward_func(queries: Sequence[Any], prompts: Sequence[Any] | None = None,
                    labels: Sequence[Any] | None = None, **kwargs: Any) -> dict[str, Any]:
        return _score(queries, prompts, labels, markers, {**options, **_opts(kwargs)})

    return reward_func


def _opts(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in ("variant", "weights", "allow_ungrounded", "budget_s", "workers")
            if kwargs.get(k) is not None}


def _score(queries: Any, prompts: Any, labels: Any, markers: ChatMarkers, options: dict[str, Any]) -> dict[str, Any]:
    qs = _rows(queries)
    n = len(qs) if qs is not None else 0
    try:
        ps = _rows(prompts) or []
        ls = _rows(labels) or []
        ps += [None] * (n - len(ps))
        ls += [None] * (n - len(ls))
        texts = []
        for q, p in zip(qs or [], ps):
            try:
                texts.append(response_text(q, p, markers))
            except Exception:  # noqa: BLE001 - an odd prompt: score the whole query
                texts.append(q if isinstance(q, str) else None)
        verdicts = score_batch(texts, ls[:n], **options)
        if len(verdicts) != n:
            raise RuntimeError(f"{len(verdicts)} verdicts for {n} queries")
        return _result([v.reward for v in verdicts], [v.bits for v in verdicts],
                       [int(v.unscorable) for v in verdicts])
    except Exception:  # noqa: BLE001 - OpenRLHF drops a sample's reward when this raises; never do
        logger.exception("calver OpenRLHF reward: unexpected error")
        return _result([UNSCORABLE_REWARD] * n, [(0,) * len(BIT_KEYS)] * n, [1] * n)


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
                except Exception as e:  # noqa: BLE001
                    logger.warning("calver OpenRLHF reward: cannot read the chat template of %s (%s); using "
                                   "ChatML markers", path, e)
            _default_markers = found
        return _default_markers


def reward_func(queries: Sequence[Any], prompts: Sequence[Any] | None = None, labels: Sequence[Any] | None = None,
                **kwargs: Any) -> dict[str, Any]:
    """OpenRLHF's entry point (see the module docstring). Options from the ``CALVER_REWARD_*`` environment,
    overridden by ``kwargs``. Never raises."""
    try:
        markers = default_markers()
        options = {**env_options(), **_opts(kwargs)}
    except Exception:  # noqa: BLE001
        markers, options = CHATML, {}
    return _score(queries, prompts, labels, markers, options)
