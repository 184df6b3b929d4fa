"""Fuzzing corpus and mutation operators for ``score``, shared by ``tests/test_verifier_fuzz.py`` and
``benchmarks/fuzz_bench.py`` (the operators of the verifier audit, §3 "Fuzzing").

``build_corpus`` returns canonical six-slot traces for every registered family: generator problems
(two configs; ADMGs where a family takes them), the graph families' GRAPH slot re-rendered in the
json / dot / graphml / matrix / prose / clear encodings, and L1 constructed-mode problems.
``OPS`` maps an operator name to ``op(rng, trace, pool) -> trace``; ``fuzz_case`` stacks a few of
them (or returns pure random input). Everything is driven by the ``random.Random`` passed in, so
a case is reproducible from its seed.
"""

from __future__ import annotations

import random
import re
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Sequence

ENCODINGS = ("json", "dot", "graphml", "matrix", "prose", "clear")
LABELS = ("GRAPH", "CONSTRAINTS", "QUERY", "STRATEGY", "DERIVATION", "RESULT", "ANSWER")
DECOR = "#*_`-+"
# Lines that start like a slot word but are not headers: the prefilter lets them reach the header regex.
SLOT_PREFIXES = ("gra", "Graphs", "que", "Question", "str", "Strategy is simple", "der", "Derived", "res", " Results",
                 "Answer is {Z}", "ans", "con", "Conclusion", " Conclusion", "constant", "com", "Computing ...", "fin",
                 " Final thoughts", "ste", "Step 2: ...", "GRAPH", "ANSWER", "FINAL ANSWER", "RESULT")
CASEFOLD = ("İ", "ı", "ſ", "\u212a", "\u212b", "ﬀ", "ß")  # letters whose case mapping is not ASCII-closed
LOOKALIKES = {
    "A": "АΑＡ\u212b", "S": "ſＳß", "I": "İıІＩ", "K": "\u212aＫ", "E": "ЕΕＥ", "R": "Ｒ", "O": "ОΟＯ", "N": "ΝＮ",
    "T": "ТΤＴ", "G": "Ｇ", "F": "ﬀＦ", "C": "СϹＣ", "P": "РΡＰ", "H": "НΗ", "Y": "ΥУ", "D": "Ｄ", "Q": "Ｑ",
    "U": "Ｕ", "V": "Ｖ", "W": "Ｗ", "L": "Ｌ",
}
SPECIAL_CHARS = ("\x00", "\ud800", "\udc00", "\udfff", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00a0",
                 "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\r", "\t", "→", "↔", "←", "∅", "≈", "Ｘ", "ｚ",
                 *CASEFOLD, "{", "}", "[", "]", "(", ")", "=", ":", ";", ",", "*", "#", "`", "\\", '"', "'", "\n")
LINE_SEPARATORS = ("\u2028", "\u2029", "\x85", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")
EXTRA_HEADERS = ("Answer: let me think", "Result - pending", "Strategy:", "Final answer:", "GRAPH:", "QUERY: task=",
                 "Derivation = ?", "RESULT: valid", "ANSWER: {}", "Computed result: 0.5", "Constraints: none",
                 "STEP 1: GRAPH", "**Answer**", "## Strategy", "Derivation record -", "answer = yes")
TOKENS = ("{", "}", "[", "]", "(", ")", "->", "<-", "<->", "|", ",", ";", "=", ":", "valid", "invalid", "yes", "no",
          "none", "knight", "knave", "consistent", "models=1", "task=", "treatment=", "0.5", "-1", "backdoor_check(",
          "find_path(", "and", "or", "not", "iff", "¬", "∧", "∨", "{}", "∅", '"', "'", "`", "*", "\\", "\n", " ")
ODD_NUMBERS = ("nan", "NaN", "inf", "-inf", "1e999", "-1e999", "1e-999", "0x10", "1_000", "+.e5", "∞", "1e308",
               "4.9e-324", "--1", "1..2", "-0", "١٢", "½")
# a0..aK causes b0..bK: quadratic pairs before the fix (K = 1,500: ~0.2 GB, 1 s). Inputs stay at the
# ~20 KB scale of the audit's other cases (19,000 digits, 20k spaces); its 110 KB case is a repro test.
PROSE_K_MAX = 1500

_HEADER_LINE = re.compile(r"^(GRAPH|CONSTRAINTS|QUERY|STRATEGY|DERIVATION|RESULT|ANSWER):[ \t]?")
_HEADER_WORD = re.compile(r"(?i)final answer|graph|constraints|query|strategy|derivation|result|answer")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Item:
    family: str
    label: str  # e.g. "backdoor_set/seed0", "backdoor_set/dot", "backdoor_set/L1"
    problem: Any  # calver.verifier.Problem
    trace: str


# ---- corpus --------------------------------------------------------------------------------
def build_corpus(per_family: int = 3, seed: int = 0, encodings: Sequence[str] = ENCODINGS,
                 constructed: bool = True) -> list[Item]:
    """Canonical traces for every registered family (``per_family`` problems per config)."""
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import available_tasks, canonical_trace, generate
    from calver.data_gen.text_levels import constructed_problems
    from calver.verifier import GraphClass, families, render_graph

    fams = families()
    tasks = [t for t in available_tasks() if t in fams]
    configs = [GenConfig(seed=seed), GenConfig(seed=seed + 1, n_nodes=(6, 9), density=0.4, latent=0.3,
                                               extra={"knights_knaves": {"n_people": 6},
                                                      "ate_threshold": {"n_nodes": 7}})]
    items: list[Item] = []
    for task in tasks:
        fam = fams[task]
        supplied = []
        for i, cfg in enumerate(configs):
            if (cfg.latent and fam.graph_classes and GraphClass.ADMG not in fam.graph_classes
                    and task != "ate_threshold"):
                cfg = GenConfig(seed=cfg.seed, n_nodes=cfg.n_nodes, density=cfg.density, extra=cfg.extra)
            for p in generate(task, per_family, cfg):
                items.append(Item(task, f"{task}/cfg{i}", p, canonical_trace(p)))
                supplied.append(p)
        graphs = [p for p in supplied if p.graph is not None and p.mode == "supplied" and fam.graph_label == "GRAPH"]
        for p in graphs[:1] + graphs[-1:]:
            lines = canonical_trace(p).split("\n")
            for enc in encodings:
                lines[0] = f"GRAPH: {render_graph(p.graph, enc)}"
                items.append(Item(task, f"{task}/{enc}", p, "\n".join(lines)))
        if constructed and task not in ("ate_threshold", "knights_knaves"):
            kept, _ = constructed_problems(graphs, 1, random.Random(f"fuzz-L1/{seed}/{task}"))
            items += [Item(task, f"{task}/L1", cp, canonical_trace(cp)) for cp in kept[:2]]
    return items


# ---- helpers -------------------------------------------------------------------------------
def _pos(rng: random.Random, t: str) -> int:
    """A position: half the time near a line start (where headers live), else uniform."""
    if not t:
        return 0
    if rng.random() < 0.5:
        starts = [0] + [m.end() for m in re.finditer("\n", t[:200_000])]
        return min(len(t), rng.choice(starts) + rng.randint(0, 12))
    return rng.randint(0, len(t))


def _chars(rng: random.Random, k: int) -> str:
    return "".join(rng.choice(SPECIAL_CHARS) if rng.random() < 0.7 else chr(rng.randint(32, 0x2FFFF)) for _ in range(k))


def _header_lines(lines: list[str], slot: str | None = None) -> list[int]:
    out = []
    for i, ln in enumerate(lines):
        m = _HEADER_LINE.match(ln)
        if m and (slot is None or m.group(1) == slot or (slot == "GRAPH" and m.group(1) == "CONSTRAINTS")):
            out.append(i)
    return out


def _set_value(rng: random.Random, t: str, value: str, slots: Sequence[str] | None = None) -> str:
    """Replace the value of one (random, or one of ``slots``) canonical header line; else insert a line."""
    lines = t.split("\n")
    slot = rng.choice(slots) if slots else None
    idx = _header_lines(lines, slot)
    if not idx:
        lines.insert(rng.randint(0, len(lines)), f"{slot or rng.choice(LABELS)}: {value}")
        return "\n".join(lines)
    i = rng.choice(idx)
    label = _HEADER_LINE.match(lines[i]).group(1)
    lines[i] = f"{label}: {value}"
    return "\n".join(lines)


def _value(t: str, slot: str) -> str:
    for ln in t.split("\n"):
        m = _HEADER_LINE.match(ln)
        if m and m.group(1) == slot:
            return ln[m.end():]
    return ""


def _names(t: str) -> list[str]:
    found = [n for n in _NAME.findall(_value(t, "GRAPH") or _value(t, "CONSTRAINTS"))[:50]
             if n not in ("knight", "knave", "and", "or", "not")]
    return found or ["A", "B", "C"]


def banner(rng: random.Random, max_run: int = 64) -> str:
    """A decoration run (1..max_run chars) followed by a slot-word prefix: ``******** Conclusion``."""
    k = rng.randint(1, max_run)
    style = rng.random()
    if style < 0.5:
        run = rng.choice(DECOR) * k
    elif style < 0.8:
        run = "".join(rng.choice(DECOR) for _ in range(k))
    else:
        run = "".join(rng.choice(DECOR + " \t") for _ in range(k))
    word = rng.choice(SLOT_PREFIXES)
    return (run + rng.choice(("", " ", "\t")) + word
            + (rng.choice(DECOR) * rng.randint(0, 8) if rng.random() < 0.3 else ""))


def casefold_header(rng: random.Random, label: str) -> str:
    """``label`` with one or two letters swapped for a non-ASCII case-fold special or a look-alike."""
    chars = list(label)
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(chars))
        pool = LOOKALIKES.get(chars[i].upper(), "") + "".join(CASEFOLD)
        chars[i] = rng.choice(pool) if pool else chars[i]
    return "".join(chars)


# ---- the operators -------------------------------------------------------------------------
def op_insert_chars(rng, t, pool):
    for _ in range(rng.randint(1, 6)):
        i = _pos(rng, t)
        t = t[:i] + _chars(rng, rng.randint(1, 4)) + t[i:]
    return t


def op_delete_chars(rng, t, pool):
    for _ in range(rng.randint(1, 3)):
        i = _pos(rng, t)
        t = t[:i] + t[i + rng.randint(1, 30):]
    return t


def op_replace_chars(rng, t, pool):
    for _ in range(rng.randint(1, 4)):
        # re-found each round: an earlier replacement may have shortened the text
        words = list(_HEADER_WORD.finditer(t[:200_000]))[:40] if rng.random() < 0.5 else []
        if words:  # a case-fold special inside a header word
            m = rng.choice(words)
            i = rng.randrange(m.start(), m.end())
            t = t[:i] + rng.choice(LOOKALIKES.get(t[i].upper(), "") + "".join(CASEFOLD)) + t[i + 1:]
        else:
            i = _pos(rng, t)
            t = t[:i] + _chars(rng, rng.randint(1, 4)) + t[i + rng.randint(1, 4):]
    return t


def op_duplicate_lines(rng, t, pool):
    lines = t.split("\n")
    for _ in range(rng.randint(1, 3)):
        ln = rng.choice(lines)
        if rng.random() < 0.4:
            ln += rng.choice((" X", "}", " (again)", ", Q"))
        lines.insert(rng.randint(0, len(lines)), ln)
    return "\n".join(lines)


def op_shuffle_lines(rng, t, pool):
    lines = t.split("\n")
    if rng.random() < 0.5:
        rng.shuffle(lines)
    elif len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


_DECORATIONS = ("**{L}:** {v}", "**{L}**: {v}", "## {L}\n{v}", "### {L}: {v}", "- {L}: {v}", "* {L} - {v}",
                "> {L}: {v}", "STEP {n}: {L}: {v}", "Step {n} - {L} = {v}", "{n}. {L}: {v}",
                "`{L}`: {v}", "__{L}__: {v}", "{L} slot: {v}", "{L}\n{v}", "{L}= {v}", "{L} -{v}",
                "***{L}***:{v}", "#### **{L}**\n{v}")
_ALIASES = {"ANSWER": ("FINAL ANSWER", "FINAL_ANSWER", "Final  Answer"), "DERIVATION": ("DERIVATION RECORD",),
            "RESULT": ("COMPUTED RESULT", "computed_result")}


def op_decorate_header(rng, t, pool):
    lines = t.split("\n")
    for i in rng.sample(_header_lines(lines), min(len(_header_lines(lines)), rng.randint(1, 3))):
        m = _HEADER_LINE.match(lines[i])
        label, value = m.group(1), lines[i][m.end():]
        if label in _ALIASES and rng.random() < 0.4:
            label = rng.choice(_ALIASES[label])
        case = rng.random()
        if case < 0.25:
            label = label.lower()
        elif case < 0.5:
            label = label.title()
        elif case < 0.6:
            label = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in label)
        lines[i] = rng.choice(_DECORATIONS).format(L=label, v=value, n=rng.randint(1, 12))
    return "\n".join(lines)


def op_banner(rng, t, pool):
    lines = t.split("\n")
    for _ in range(rng.randint(1, 2)):
        lines.insert(rng.randint(0, len(lines)), banner(rng))
    return "\n".join(lines)


def op_splice_slot(rng, t, pool):
    other = rng.choice(pool).split("\n")
    idx = _header_lines(other)
    if not idx:
        return t
    i = rng.choice(idx)
    j = i + 1
    while j < len(other) and not _HEADER_LINE.match(other[j]):
        j += 1
    block = other[i:j]
    lines = t.split("\n")
    same = _header_lines(lines, _HEADER_LINE.match(block[0]).group(1))
    if same and rng.random() < 0.7:
        lines[same[0]:same[0] + 1] = block
    else:
        k = rng.randint(0, len(lines))
        lines[k:k] = block
    return "\n".join(lines)


def op_insert_header(rng, t, pool):
    lines = t.split("\n")
    for _ in range(rng.randint(1, 2)):
        lines.insert(rng.randint(0, len(lines)), rng.choice(EXTRA_HEADERS))
    return "\n".join(lines)


def op_nest_brackets(rng, t, pool):
    d = rng.choice((2, 50, 500, 1000, 3000)) if rng.random() < 0.5 else rng.randint(1, 3000)
    opens = rng.choice(("{", "[", "(", "{[(", "[{"))
    o = (opens * d)[:d]
    c = o[::-1].translate(str.maketrans("{[(", "}])"))
    slot = rng.choice(("GRAPH", "STRATEGY", "DERIVATION", "ANSWER", "QUERY", "RESULT"))
    v = _value(t, slot) or "X"
    form = rng.random()
    new = o + v + c if form < 0.5 else (o + v if form < 0.8 else v + c)
    return _set_value(rng, t, new, (slot,))


def _big_number(rng) -> str:
    if rng.random() < 0.35:
        return rng.choice(ODD_NUMBERS)
    n = rng.choice((20, 400, 5000, 19000))
    digits = "1" * n if rng.random() < 0.5 else "".join(rng.choices("0123456789", k=n))
    return rng.choice(("", "-", "+")) + digits + rng.choice(("", "x", ".5", "e3", ".", "e", "x-0.13"))


def op_huge_number(rng, t, pool):
    num = _big_number(rng)
    r = rng.random()
    if r < 0.35:
        return _set_value(rng, t, num, ("RESULT",))
    if r < 0.55:
        key = rng.choice(("effect=", "p1=", "p0=", "models=", "assignments=", "threshold="))
        i = t.find(key)
        if i >= 0:
            j = i + len(key)
            k = j
            while k < len(t) and t[k] not in ",;)\n":
                k += 1
            return t[:j] + num + t[k:]
    if r < 0.7:
        return _set_value(rng, t, rng.choice(("", "effect=", "ATE = ", "RESULT: ")) + num,
                          ("RESULT", "ANSWER", "STRATEGY"))
    i = _pos(rng, t)
    return t[:i] + num + t[i:]


def op_arrow_chain(rng, t, pool):
    k = rng.choice((10, 100, 1000, 3000))
    names = _names(t)
    arrows = ("->", "<-", "<->", "-->", "→", "=>", "->", "->")
    mixed = rng.random() < 0.5
    nodes = [rng.choice(names) if rng.random() < 0.3 else f"V{i}" for i in range(k)]
    chain = nodes[0] + "".join(f" {rng.choice(arrows) if mixed else '->'} {n}" for n in nodes[1:])
    slot = rng.choice(("GRAPH", "GRAPH", "STRATEGY", "ANSWER", "DERIVATION"))
    if slot == "GRAPH" and rng.random() < 0.5:
        return _set_value(rng, t, (_value(t, "GRAPH") + ", " + chain).lstrip(", "), ("GRAPH",))
    if slot == "DERIVATION":
        return _set_value(rng, t, f"find_path(source={nodes[0]}, target={nodes[-1]}, path={chain})", (slot,))
    return _set_value(rng, t, chain, (slot,))


def op_fence_separators(rng, t, pool):
    r = rng.random()
    if r < 0.3:
        return f"```{rng.choice(('', 'text', 'json', 'python'))}\n{t}\n```"
    if r < 0.5:
        lines = t.split("\n")
        i = rng.randrange(len(lines))
        lines[i:i + 1] = ["```", lines[i], "```"]
        return "\n".join(lines)
    sep = rng.choice(LINE_SEPARATORS)
    if r < 0.75:
        return t.replace("\n", sep)
    return "".join(sep if ch == "\n" and rng.random() < 0.5 else ch for ch in t)


def op_lookalike_header(rng, t, pool):
    lines = t.split("\n")
    idx = _header_lines(lines)
    for i in rng.sample(idx, min(len(idx), rng.randint(1, 2))):
        m = _HEADER_LINE.match(lines[i])
        label = m.group(1)
        if label in _ALIASES and rng.random() < 0.3:
            label = rng.choice(_ALIASES[label])
        lines[i] = f"{casefold_header(rng, label)}: {lines[i][m.end():]}"
    return "\n".join(lines)


def op_random_slot_value(rng, t, pool):
    names = _names(t)
    toks = [rng.choice(names) if rng.random() < 0.35 else rng.choice(TOKENS) for _ in range(rng.randint(1, 40))]
    return _set_value(rng, t, " ".join(toks) if rng.random() < 0.5 else "".join(toks))


def op_kk_pad(rng, t, pool):
    n = rng.choice((100, 5000, 19000, 20000))
    names = _names(t)
    a, b = names[0], names[-1]
    form = rng.random()
    if form < 0.4:
        value = f"{a}=knight" + " " * n + "!"
    elif form < 0.7:
        value = f"{a}=knight," + " " * n + f"{b}=knave"
    else:
        value = f"{a}=" + " " * n + "knight"
    return _set_value(rng, t, value, ("ANSWER", "STRATEGY"))


def quadratic_prose(k: int, verb: str = "causes", k2: int | None = None) -> str:
    """``a0, ..., a{k-1} <verb> b0, ..., b{k2-1} and bz.``: one sentence naming k * (k2 + 1) pairs."""
    k2 = k if k2 is None else k2
    return ", ".join(f"a{i}" for i in range(k)) + f" {verb} " + ", ".join(f"b{i}" for i in range(k2)) + " and bz."


def op_quadratic_prose(rng, t, pool):
    # Square lists test the pair blow-up; lopsided ones (1,000 x 49) stay under an edge cap yet
    # still turn a few KB into ~50,000 edges.
    sizes = (10, 49, 100, 220, 500, 1000, PROSE_K_MAX)
    k = rng.choice(sizes)
    k2 = k if rng.random() < 0.5 else rng.choice(sizes)
    verb = rng.choice(("causes", "affects", "leads to", "is caused by",
                       "and the others share a hidden common cause with"))
    return _set_value(rng, t, quadratic_prose(k, verb, k2), ("GRAPH",))


def op_truncate(rng, t, pool):
    return t[:rng.randint(0, len(t))]


OPS: dict[str, Callable[[random.Random, str, Sequence[str]], str]] = {
    "insert_chars": op_insert_chars, "delete_chars": op_delete_chars, "replace_chars": op_replace_chars,
    "duplicate_lines": op_duplicate_lines, "shuffle_lines": op_shuffle_lines, "decorate_header": op_decorate_header,
    "banner": op_banner, "splice_slot": op_splice_slot, "insert_header": op_insert_header,
    "nest_brackets": op_nest_brackets, "huge_number": op_huge_number, "arrow_chain": op_arrow_chain,
    "fence_separators": op_fence_separators, "lookalike_header": op_lookalike_header,
    "random_slot_value": op_random_slot_value, "kk_pad": op_kk_pad, "quadratic_prose": op_quadratic_prose,
    "truncate": op_truncate,
}


# ---- pure random input ---------------------------------------------------------------------
def random_input(rng: random.Random, pool: Sequence[str]) -> tuple[str, str]:
    """(kind, text): latin-1 bytes, UTF-8 bytes with replacement, random code points, header soup."""
    kind = rng.choice(("latin1", "utf8", "codepoints", "header_soup"))
    n = rng.choice((0, 1, 10, 200, 2000))
    if kind == "latin1":
        return kind, bytes(rng.getrandbits(8) for _ in range(n)).decode("latin-1")
    if kind == "utf8":
        return kind, bytes(rng.getrandbits(8) for _ in range(n)).decode("utf-8", errors="replace")
    if kind == "codepoints":
        return kind, "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(n))
    parts = []
    for _ in range(rng.randint(1, 30)):
        head = rng.choice(LABELS + ("FINAL ANSWER", "Answer", "strategy", "derİvation"))
        head += rng.choice((":", " -", "=", "", "**:"))
        body = " ".join(rng.choice(TOKENS) for _ in range(rng.randint(0, 8)))
        parts.append(rng.choice(("", "**", "## ", "- ", banner(rng, 30) + "\n")) + head + " " + body)
    return kind, "\n".join(parts)


def fuzz_case(rng: random.Random, trace: str, pool: Sequence[str], max_ops: int = 3,
              random_share: float = 0.10, clean_share: float = 0.02) -> tuple[tuple[str, ...], str]:
    """(operator names, text): pure random input, the trace unchanged, or 1..max_ops stacked operators."""
    r = rng.random()
    if r < random_share:
        kind, text = random_input(rng, pool)
        return (f"random:{kind}",), text
    if r < random_share + clean_share:
        return ("none",), trace
    names = tuple(rng.choice(tuple(OPS)) for _ in range(rng.randint(1, max_ops)))
    return names, apply_ops(rng, trace, pool, names)


def apply_ops(rng: random.Random, trace: str, pool: Sequence[str], names: Sequence[str]) -> str:
    for name in names:
        trace = OPS[name](rng, trace, pool)
    return trace


# ---- a per-call watchdog -------------------------------------------------------------------
class Hang(BaseException):
    """Raised by :func:`watchdog` when a call runs past its limit (BaseException: no handler in
    the code under test swallows it)."""


@contextmanager
def watchdog(seconds: float):
    """SIGALRM after ``seconds`` of wall time raises :class:`Hang` in the main thread. Restores any
    outer handler and timer (e.g. pytest-timeout's) afterwards."""
    def fire(signum, frame):
        raise Hang(f"no return within {seconds:g} s")

    old_handler = signal.signal(signal.SIGALRM, fire)
    old_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, old_delay - (time.monotonic() - t0)))
