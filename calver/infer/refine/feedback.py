"""Slot-level feedback for a trace, generated from the verifier's own reasons and the registry.

``feedback_for(trace, problem)`` scores the trace (:func:`calver.verifier.score`), and for every
failed bit writes one line: the slot, the family's reason (each family explains its own failures,
e.g. ``Z contains M, a descendant of treatment X (X -> M)`` for the backdoor set ``{M}``), and the
slot's contract text (the same per-family slot doc the system prompt shows, from
:func:`calver.verifier.contract_instructions`), so any registered family gets feedback with no extra
code.

No label can leak: the caller passes the firewall-stripped problem (:func:`calver.infer.firewall.
strip_problem`), so in constructed mode every reason is computed on the trace's *own* GRAPH, and
a reason that would name a valid object other than the trace's own (``... is valid but not
minimal: {A} is also valid``, ``the correct decision is yes``, a recomputed effect that decides a
threshold question) is redacted (:func:`redact`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from calver.verifier import SLOTS, Problem, Verdict, contract_instructions, get_family, score

HEADER = (
    "A symbolic verifier checked your answer slot by slot; {n} of 6 checks failed. Revise your answer: "
    "keep what passed, fix the slots below, and answer again with all six labelled slots."
)


@lru_cache(maxsize=64)
def slot_docs(task: str) -> dict[str, str]:
    """Slot -> the contract text the family's system prompt shows for it (GRAPH/CONSTRAINTS keyed as GRAPH)."""
    fam = get_family(task)
    labels = {fam.graph_label.upper(): "GRAPH", **{s: s for s in SLOTS[1:]}}
    out: dict[str, str] = {}
    for line in contract_instructions(task).splitlines():
        m = re.match(r"^\s{2}([A-Z]+):\s*(.*)$", line)
        if m and m.group(1) in labels:
            out[labels[m.group(1)]] = m.group(2).strip()
    return out


# ---- redaction -------------------------------------------------------------------------------------
_DECISION = re.compile(r"the correct decision is (yes|no)", re.IGNORECASE)
_RECOMPUTED = re.compile(r"(differs from [^=]*?)=\s*-?\d+(?:\.\d+)?(?:e-?\d+)?")
_MISSES = re.compile(r"\bmisses [^;.]+")


def _own_keys(fam, ts: Verdict) -> set[Any]:
    keys = set()
    for slot in ("STRATEGY", "ANSWER"):
        text = ts.slots.values.get(slot) if ts.slots is not None else None
        if not text:
            continue
        try:
            keys.add(fam.canonical_answer_key((fam.parse_answer if slot == "ANSWER" else fam.parse_object)(text)))
        except Exception:  # noqa: BLE001 - an unparsable own object simply has no key
            pass
    return keys


def redact(reason: str, trace: str, problem: Problem, ts: Verdict | None = None) -> str:
    """``reason`` with every named object that is valid on the verification graph, other than the
    trace's own STRATEGY/ANSWER, replaced by "another set" (the family says where its objects are
    written: :meth:`~calver.verifier.family.TaskFamily.object_mentions`); decisions and recomputed
    values that would answer the question are withheld."""
    fam = get_family(problem.task)
    out = _DECISION.sub("the returned decision is wrong", reason)
    out = _MISSES.sub("misses at least one required node", out)
    if fam.is_decision:
        out = _RECOMPUTED.sub(lambda m: m.group(1).rstrip() + " (recompute it yourself)", out)
    spans = fam.object_mentions(out)
    if not spans:
        return out
    ts = ts if ts is not None else score(trace, problem)
    if ts.g_ver is None:
        return out
    try:
        query = fam.normalize_query(problem)
    except (ValueError, KeyError, TypeError):  # a malformed query (ProblemError is a ValueError)
        return out
    own = _own_keys(fam, ts)

    def sub(text: str) -> str:
        try:
            obj = fam.parse_object(text)
            if fam.canonical_answer_key(obj) in own:
                return text
            ok = fam.is_valid_on(ts.g_ver, query, obj, problem)
        except Exception:  # noqa: BLE001 - not an object of this family: keep the text
            return text
        return "another set" if ok else text

    parts, last = [], 0
    for start, end in spans:
        parts += [out[last:start], sub(out[start:end])]
        last = end
    return "".join(parts) + out[last:]


# ---- feedback ----------------------------------------------------------------------------------------
def failed_slots(ts: Verdict) -> list[str]:
    return [s for s, b in zip(SLOTS, ts.bits) if not b]


def slot_feedback(trace: str, problem: Problem, ts: Verdict | None = None) -> dict[str, str]:
    """Failed slot -> one feedback sentence (the family's reason, redacted, plus the slot's contract text)."""
    ts = ts if ts is not None else score(trace, problem)
    try:
        docs = slot_docs(problem.task)
        label = get_family(problem.task).graph_label
    except KeyError:
        docs, label = {}, "GRAPH"
    out: dict[str, str] = {}
    for slot in failed_slots(ts):
        reason = redact(ts.reasons.get(slot, f"the {slot} check failed"), trace, problem, ts)
        name = label if slot == "GRAPH" else slot
        hint = docs.get(slot)
        out[slot] = f"{name}: {reason.rstrip('.')}." + (f" Expected in {name}: {hint}." if hint else "")
    return out


def feedback_for(trace: str, problem: Problem, ts: Verdict | None = None) -> str:
    """The revision request for ``trace``: one line per failed slot; "" if the trace is max-score.

    ``problem`` must be label-free (the firewall view's problem): feedback is built only from what
    :func:`calver.verifier.score` reads.
    """
    if problem.mode != "supplied" and problem.graph is not None:
        from calver.infer.firewall import FirewallError

        # The scorer judges a constructed-mode trace on the source graph when it has one, so its
        # reasons would describe that hidden graph to the policy.
        raise FirewallError(f"problem {problem.id!r}: feedback needs the firewall-stripped problem "
                            "(constructed mode with its source graph would leak that graph)")
    ts = ts if ts is not None else score(trace, problem)
    lines = slot_feedback(trace, problem, ts)
    if not lines:
        return ""
    return "\n".join([HEADER.format(n=len(lines))] + [f"- {v}" for v in lines.values()])


__all__ = ["HEADER", "failed_slots", "feedback_for", "redact", "slot_docs", "slot_feedback"]
