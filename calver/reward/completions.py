"""What a trainer hands the reward as a completion, read as text: plain strings, chat messages (TRL's
conversational format), content blocks; and the end-of-turn markers a decoded response may still carry.

Trainers that decode with special tokens kept (OpenRLHF decodes prompt + response with them) leave the
template's end-of-turn token on the ANSWER line, which then does not parse. :func:`strip_end_of_turn`
cuts a response at the first end-of-turn marker of :data:`END_OF_TURN_MARKERS`, the markers of the major
chat templates (``RewardEngine(end_markers=...)`` for others). Where the tokenizer is known, OpenRLHF's
adapter first cuts at its chat template's own end of turn
(:func:`calver.integrations.openrlhf.markers_from_tokenizer`).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

# End-of-turn / end-of-text markers of the major chat templates (ChatML/Qwen, Llama 3, Llama 2 / Mistral,
# Gemma, Phi-3, DeepSeek, GPT-OSS harmony, SmolLM2). None is valid contract text.
END_OF_TURN_MARKERS: tuple[str, ...] = (
    "<|im_end|>", "<|endoftext|>",                # ChatML (Qwen2/2.5/3, SmolLM2)
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>",  # Llama 3.x
    "</s>",                                       # Llama 2, Mistral, Mixtral
    "<end_of_turn>", "<eos>",                     # Gemma
    "<|end|>",                                    # Phi-3 / Phi-4
    "<\uff5cend\u2581of\u2581sentence\uff5c>",   # DeepSeek V2/V3/R1
    "<|return|>",                                 # GPT-OSS (harmony)
)


def strip_end_of_turn(text: str, markers: Sequence[str] = END_OF_TURN_MARKERS) -> str:
    """``text`` up to its first end-of-turn marker (all of it when none occurs)."""
    cut = len(text)
    for m in markers:
        if m:
            k = text.find(m, 0, cut)
            if k >= 0:
                cut = k
    return text[:cut] if cut < len(text) else text


def completion_text(completion: Any) -> str | None:
    """The text of a TRL completion: a string, or (conversational) a list of message dicts whose
    assistant contents are joined; content given as blocks contributes its ``text`` parts. None for
    any other shape (a text block whose ``text`` is not a string included)."""
    return read_completion(completion)[0]


def read_completion(completion: Any) -> tuple[str | None, str]:
    """``(text, "")``, or ``(None, why)`` for a completion that holds no readable text: a message that is no
    dict, a role that is no string, content that is neither text nor a list of content blocks (dicts), a
    text block whose text is no string, or no assistant message at all. Text comes back as an exact ``str``
    (a subclass's overridden methods never run later, in a worker pool or a length sum)."""
    if isinstance(completion, str):
        return str.__str__(completion), ""
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return None, f"unreadable completion (a {type(completion).__name__})"
    parts: list[str] = []
    spoke = False
    for msg in completion:
        if not isinstance(msg, dict):
            return None, f"unreadable completion (a message is a {type(msg).__name__})"
        role = msg.get("role", "assistant")
        if not isinstance(role, str):  # isinstance first: == on an odd object may raise
            return None, f"unreadable completion (a role is a {type(role).__name__})"
        if role != "assistant":
            continue
        spoke = True
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(str.__str__(content))
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    return None, f"unreadable completion (a content block is a {type(b).__name__})"
                kind = b.get("type", "text")
                if isinstance(kind, str) and kind == "text":
                    text = b.get("text", "")
                    if not isinstance(text, str):  # joining it would raise: the row is unscorable, not the batch
                        return None, f"unreadable completion (a text block holds a {type(text).__name__})"
                    parts.append(str.__str__(text))
        elif content is not None:
            return None, f"unreadable completion (content is a {type(content).__name__})"
    if not spoke:
        return None, "unreadable completion (no assistant message)"
    return "\n".join(parts), ""


MAX_ROWS = 1_000_000  # rows of one call read from an iterator (a list or tuple is taken as it is)


def rows(value: Any) -> list[Any] | None:
    """A batch column as a list, or None when it is not a column of rows (a str, bytes, a mapping, an
    iterator past :data:`MAX_ROWS`)."""
    if isinstance(value, list):
        return value
    if isinstance(value, (str, bytes, bytearray, dict)):
        return None
    if isinstance(value, Sequence):
        return list(value)
    if isinstance(value, Iterable):  # a generator: read once, bounded
        try:
            rows = list(itertools.islice(value, MAX_ROWS + 1))
        except Exception:  # noqa: BLE001 - a column whose iteration fails is no column; the call must not raise
            return None
        return rows if len(rows) <= MAX_ROWS else None
    return None


__all__ = ["END_OF_TURN_MARKERS", "completion_text", "read_completion", "rows", "strip_end_of_turn"]
