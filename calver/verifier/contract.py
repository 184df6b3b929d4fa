"""The six-slot trace contract: slot names, the tolerant slot splitter, and key=value argument parsing.

A trace is free text holding six labelled slots, in this order::

    GRAPH: A -> B, B -> C
    QUERY: task=backdoor_set; treatment=A; outcome=C; graph=DAG; variant=any
    STRATEGY: {B}
    DERIVATION: backdoor_check(treatment=A, outcome=C, adjustment={B}, blocked=[...])
    RESULT: valid
    ANSWER: {B}

Harmless variation is tolerated (case, markdown bold/headers/bullets, ``STEP n`` prefixes, code
fences, prose before/after/between slots). Missing or duplicated slots are reported so that the
scorer can fail exactly those slots' bits, each with a reason.

A header is a line whose first word (after decoration) is a slot name in ASCII letters, any case,
followed by ``:``, ``-``, ``=`` or the end of the line. Look-alike letters (``İ``, ``ı``, ``ſ``,
Cyrillic ``А`` ...) do not make a header: such a line is text of the slot before it.

**The slots are read from the last complete block**: the last GRAPH (or CONSTRAINTS) header after
which every one of the six slots has a header. Everything before that header is reasoning and is
ignored, so a line such as ``Answer: let me think`` written before the slots is harmless. Inside
the block a repeated slot still fails closed (duplicated or conflicting), and so does a header after
the block (``FINAL ANSWER: ...`` repeated after ANSWER, a trailing partial block): only the last
*complete* block is read, so writing two blocks never scores more than writing the last one alone.
If no complete block exists, every header of the trace is read and missing or repeated slots are
reported.

Every regex here is linear in its input (possessive quantifiers where a pattern could otherwise
split a run in several ways): the splitter runs inside a reward function on adversarial text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Mapping

from calver.verifier.memo import memoized, text_cost

SLOTS: tuple[str, ...] = ("GRAPH", "QUERY", "STRATEGY", "DERIVATION", "RESULT", "ANSWER")
# Other names a slot may go by (the K&K family writes its formal object under CONSTRAINTS).
SLOT_ALIASES: dict[str, str] = {
    "GRAPH": "GRAPH",
    "CONSTRAINTS": "GRAPH",
    "QUERY": "QUERY",
    "STRATEGY": "STRATEGY",
    "DERIVATION": "DERIVATION",
    "DERIVATION RECORD": "DERIVATION",
    "RESULT": "RESULT",
    "COMPUTED RESULT": "RESULT",
    "ANSWER": "ANSWER",
    "FINAL ANSWER": "ANSWER",
}
CONTRACT_VERSION = "calver-contract/1"

# A slot header: at line start, optional quote marks and markdown decoration / "STEP n" / numbering,
# the slot name, optional closing bold, then ':' (or '-' / '=' / '**:'), the value starting on that
# line. Every repetition is possessive (*+, ++, ?+): each part stops where the next must begin
# (decoration, digits, separators and names use disjoint characters), so giving characters back
# never helps a match and one line costs O(its length). The old `(?:[#*_`\-+]+[ \t]*)*` was
# exponential on a run of decoration before a near-miss word. re.ASCII: only ASCII letters spell a
# slot name ('İ'.upper() is no alias, and 'ſ'/'K' must not pass for s/k).
_NAMES = "|".join(sorted((re.escape(k).replace(r"\ ", r"[ _]") for k in SLOT_ALIASES), key=len, reverse=True))
_HEADER = re.compile(
    r"^[ \t>]*+(?:[#*_`\-+][#*_`\-+ \t]*+)?+"
    r"(?:step[ \t]*+\d++[ \t]*+(?:[:.)\-][ \t]*+)?+)?+(?:\d++[.)][ \t]*+)?+"
    r"(?:[*_`]++[ \t]*+)?+(?P<name>" + _NAMES + r")(?:[ \t]++slot)?+[ \t]*+(?:[*_`]++[ \t]*+)?+"
    r"(?:[:=\-][ \t]*+(?:[*_`]++[ \t]*+)?+|$)",
    re.ASCII | re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$", re.MULTILINE)


def slot_safe(name: str) -> bool:
    """Whether a node name may stand bare at a line's start or end inside a slot: no slot header reads it
    (``QUERY:``, ``Strategy - x``) and no decoration the splitter strips begins or ends it (``_``, ``**b**``,
    backticks). Renderers quote the others."""
    return not _HEADER.match(name) and name[0] not in "#*_`>~-+" and name[-1] not in "*_`~"


_MAX_TRACE_CHARS = 1_000_000  # traces beyond this are scanned only up to it (fail-closed, fast)
# A longer slot value is rejected: no honest slot is that long (GRAPH holds 1,000-node graphs).
_MAX_SLOT_CHARS = {"GRAPH": 300_000}
_MAX_OTHER_SLOT_CHARS = 20_000


@dataclass
class SlotParse:
    """Result of splitting a trace into slots."""

    values: dict[str, str] = field(default_factory=dict)  # slot -> raw text (first occurrence)
    problems: dict[str, str] = field(default_factory=dict)  # slot -> why it is unusable
    header_names: dict[str, str] = field(default_factory=dict)  # slot -> name used (e.g. CONSTRAINTS)

    def get(self, slot: str) -> str | None:
        return None if slot in self.problems else self.values.get(slot)


_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def _clean_value(value: str) -> str:
    if "```" in value:
        value = _FENCE.sub("", value)
    value = value.strip()
    if "\n" in value:
        # A slot's value is its first paragraph: prose after a blank line is not part of the slot.
        value = _PARAGRAPH.split(value, maxsplit=1)[0]
        value = "\n".join(ln.strip() for ln in value.splitlines() if ln.strip())
    if value[-2:] in ("`.", "*.", "_."):  # `{Z}`. : the sentence's period after the decoration
        value = value[:-1]
    if value and (value[0] in "*_`" or value[-1] in "*_`"):
        # str.strip, not a regex: `[*_`]+$` retried at each star of a long run is quadratic.
        value = value.strip("*_`").strip()
    return value


# Lines whose first word could start a slot header (a C-speed prefilter for the full header regex:
# every character _HEADER allows before the name is in the class, and every name or "step" starts
# with one of the prefixes).
_CANDIDATE_LINE = re.compile(
    r"^[ \t>#*_`\-+0-9.)]*+(?:gra|que|str|der|res|ans|con|com|fin|ste)", re.ASCII | re.IGNORECASE | re.MULTILINE
)


def _slot_of(m: re.Match) -> str | None:
    """The slot a header names; None for a name that is no alias (never raises)."""
    name = m.group("name").upper()
    return SLOT_ALIASES.get(name) or SLOT_ALIASES.get(name.replace("_", " "))


def _headers(trace: str) -> list[tuple[re.Match, str]]:
    """(header match, slot) of the headers that are read: those of the last complete block, or of
    the whole trace when it has none (see the module docstring). The full regex is tested only on
    lines whose first word could be a slot name."""
    found: list[tuple[re.Match, str]] = []
    for c in _CANDIDATE_LINE.finditer(trace):
        start = c.start()
        end = trace.find("\n", start)
        m = _HEADER.match(trace, start, len(trace) if end < 0 else end)
        if m:
            slot = _slot_of(m)
            if slot is not None:
                found.append((m, slot))
    # Walking back, the first GRAPH whose suffix names all six slots starts the last complete block.
    # Headers after it stay in the block, so trailing junk cannot hide behind a new partial block.
    suffix: set[str] = set()
    for i in range(len(found) - 1, -1, -1):
        suffix.add(found[i][1])
        if found[i][1] == "GRAPH" and len(suffix) == len(SLOTS):
            return found[i:]
    return found


def slot_spans(trace: str) -> dict[str, tuple[int, int]]:
    """Character span of each slot's raw value (first occurrence), as :func:`split_slots` sees it."""
    trace = trace[:_MAX_TRACE_CHARS]
    headers = _headers(trace)
    spans: dict[str, tuple[int, int]] = {}
    for i, (m, slot) in enumerate(headers):
        end = headers[i + 1][0].start() if i + 1 < len(headers) else len(trace)
        spans.setdefault(slot, (m.end(), end))
    return spans


# The canonical six lines exactly (what SFT teaches and most policy samples are): split without
# the per-line header search. One unambiguous pass; the result equals the general path's (tested).
_CANONICAL = re.compile(
    r"(GRAPH|CONSTRAINTS): ([^\n]*)\nQUERY: ([^\n]*)\nSTRATEGY: ([^\n]*)\nDERIVATION: ([^\n]*)\n"
    r"RESULT: ([^\n]*)\nANSWER: ([^\n]*)\n?"
)
_CANONICAL_MAX = 15_000  # below every slot limit, so no length check can differ
# What _HEADER consumes after the colon (blanks, then one decoration run and blanks): the fast path
# skips exactly that, so both paths hand _clean_value the same text.
_AFTER_COLON = re.compile(r"[ \t]*+(?:[*_`]++[ \t]*+)?+")


def _split_canonical(trace: str) -> SlotParse | None:
    if len(trace) > _CANONICAL_MAX:
        return None
    m = _CANONICAL.fullmatch(trace)
    if m is None:
        return None
    out = SlotParse()
    groups = m.groups()
    out.header_names = dict(zip(SLOTS, (groups[0],) + SLOTS[1:]))
    for slot, raw in zip(SLOTS, groups[1:]):
        lead = _AFTER_COLON.match(raw)  # matches every string (all of it optional)
        value = _clean_value(raw[lead.end() if lead else 0:])
        out.values[slot] = value
        if not value:
            out.problems[slot] = f"{slot} slot is empty"
    return out


def split_slots(trace: str) -> SlotParse:
    """Split ``trace`` into the six slots. Never raises on any ``str``."""
    if not isinstance(trace, str):
        out = SlotParse()
        for s in SLOTS:
            out.problems[s] = f"trace is {type(trace).__name__}, not text"
        return out
    fast = _split_canonical(trace)
    if fast is not None:
        return fast
    out = SlotParse()
    if len(trace) > _MAX_TRACE_CHARS:
        trace = trace[:_MAX_TRACE_CHARS]
    headers = _headers(trace)
    seen: dict[str, int] = {}
    for i, (m, slot) in enumerate(headers):
        seen[slot] = seen.get(slot, 0) + 1
        if seen[slot] > 2:  # already failed as duplicated/conflicting: skip the work
            continue
        end = headers[i + 1][0].start() if i + 1 < len(headers) else len(trace)
        limit = _MAX_SLOT_CHARS.get(slot, _MAX_OTHER_SLOT_CHARS)
        value = _clean_value(trace[m.end() : min(end, m.end() + limit + 1000)])
        if seen[slot] == 1:
            out.values[slot] = value
            out.header_names[slot] = m.group("name").upper()
            if len(value) > limit:
                out.problems[slot] = f"{slot} slot is longer than {limit} characters"
        elif value != out.values[slot]:
            out.problems[slot] = f"{slot} slot appears more than once with conflicting contents"
        else:
            out.problems[slot] = f"{slot} slot is duplicated"
    for s in SLOTS:
        if s not in out.values:
            out.problems[s] = f"{s} slot is missing"
        elif not out.values[s] and s not in out.problems:
            out.problems[s] = f"{s} slot is empty"
    return out


# Possessive: the key, the blanks and the '='/':' use disjoint characters (linear on any text).
_KEY = re.compile(r"(?:^|[;,\s(\n])([A-Za-z_][A-Za-z0-9_]*+)\s*+(?:=|:(?![:=]))\s*+")
_BRACKET = re.compile(r"[{}\[\]()]")


@memoized("key=value", lambda text: text_cost(text, 8))
def _parse_kv_cached(text: str) -> tuple[tuple[str, str], ...]:
    from calver.verifier.formats.objects import unquoted

    # Bracket depth only matters at key positions: record it at each bracket, then look up. Brackets,
    # separators and '=' inside a quoted name ("age (years)", "x=y") are no syntax.
    syntax = unquoted(text)
    marks: list[tuple[int, int]] = []
    depth = 0
    for m in _BRACKET.finditer(syntax):
        depth = depth + 1 if m.group() in "{[(" else max(0, depth - 1)
        marks.append((m.start(), depth))
    positions = [p for p, _ in marks]
    found: list[tuple[str, int, int]] = []
    for m in _KEY.finditer(syntax):
        i = bisect_right(positions, m.start(1) - 1) - 1
        if i < 0 or marks[i][1] == 0:
            found.append((m.group(1).lower(), m.start(1), m.end()))
    out: dict[str, str] = {}
    for i, (key, _start, vstart) in enumerate(found):
        vend = found[i + 1][1] if i + 1 < len(found) else len(text)
        value = text[vstart:vend].strip().rstrip(";,").strip()
        if key in out and out[key] != value:
            raise ValueError(f"argument {key!r} is given twice with different values")
        out[key] = value
    return tuple(out.items())


def parse_kv(text: str) -> dict[str, str]:
    """Parse ``key=value`` pairs separated by ``;``, ``,`` or newlines.

    Values may contain commas, arrows and brackets (``adjustment={A, B}``): a value runs until the
    next ``key=`` at bracket depth 0. Raises ``ValueError`` on a duplicated key with another value.
    Memoized: the candidates of one pool repeat their QUERY and DERIVATION slots (only short texts,
    so the memo stays small in bytes however long the slots a policy writes).
    """
    if len(text) > _KV_CACHE_MAX_CHARS:
        return dict(_parse_kv_cached.__wrapped__(text))
    return dict(_parse_kv_cached(text))


_KV_CACHE_MAX_CHARS = 2_000


# The tail after the last ')' is possessive: `\s*`?\s*\.?\s*$` split a blank run three ways, cubic
# on `op() <2,000 blanks> x` (20 s).
_CALL = re.compile(
    r"^\s*+`?+(?P<op>[A-Za-z_][A-Za-z0-9_.]*+)\s*+\((?P<args>.*)\)\s*+`?+\s*+\.?+\s*+$", re.DOTALL
)


def parse_call(text: str) -> tuple[str, dict[str, str]]:
    """Parse a derivation record ``op(key=value, ...)``. Raises ``ValueError`` with a reason."""
    first = text.strip()
    m = _CALL.match(first)
    if not m:
        raise ValueError(f"derivation is not of the form op(key=value, ...): {first[:80]!r}")
    return m.group("op"), parse_kv(m.group("args"))


def format_kv(pairs: Mapping[str, object], sep: str = "; ") -> str:
    return sep.join(f"{k}={v}" for k, v in pairs.items())


def format_set(nodes) -> str:
    """Canonical set rendering: ``{A, B}`` with sorted members, each quoted when the set parser would not
    read it back as that one name (``{"age (years)", "none"}``); ``{}`` for the empty set."""
    from calver.verifier.formats.objects import format_node_set

    return format_node_set(nodes)


def format_path(nodes, types=None) -> str:
    """``X -> M -> Y`` (or with the given edge ``types``), each name quoted when it must be; ``none``
    for no path."""
    from calver.verifier.formats.objects import render_set_name

    if not nodes:
        return "none"
    names = [render_set_name(n) for n in nodes]
    if types is None:
        return " -> ".join(names)
    parts = [names[0]]
    for t, n in zip(types, names[1:]):
        parts += [t, n]
    return " ".join(parts)


def assemble_trace(slots: dict[str, str], graph_label: str = "GRAPH") -> str:
    """Render slot values in canonical order."""
    lines = []
    for s in SLOTS:
        label = graph_label if s == "GRAPH" else s
        lines.append(f"{label}: {slots[s]}")
    return "\n".join(lines)
