"""Slot splitter safety (issue 12): linear-time header regexes, ASCII-only slot names, reading the
last complete block, and CALVER ties preferring a parsed ANSWER."""

from __future__ import annotations

import json
import re
import signal
import time
import unicodedata
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.evaluation.audits import replace_slot
from calver.verifier import Problem, contract, grade, score, select, select_from_scores
from calver.verifier.contract import SLOT_ALIASES, SLOTS, parse_call, parse_kv, slot_spans, split_slots

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = Problem.from_dict(json.loads((ROOT / "docs/examples/backdoor_problem.json").read_text()))
GOLD = (ROOT / "docs/examples/backdoor_trace.txt").read_text()
GOLD_SLOTS = split_slots(GOLD).values

# The header regex before issue 12 (reference for the equivalence property; exponential on
# decoration runs, so it is only ever run on short ones here).
OLD_NAMES = "|".join(sorted((re.escape(k).replace(r"\ ", r"[ _]") for k in SLOT_ALIASES), key=len, reverse=True))
OLD_HEADER = re.compile(
    r"^[ \t>]*(?:[#*_`\-+]+[ \t]*)*(?:step[ \t]*\d+[ \t]*[:.)\-]?[ \t]*)?(?:\d+[.)][ \t]*)?"
    r"(?:[*_`]+[ \t]*)?(?P<name>" + OLD_NAMES + r")(?:[ \t]+slot)?[ \t]*(?:[*_`]+[ \t]*)?"
    r"(?:[:=\-][ \t]*(?:[*_`]+[ \t]*)?|$)",
    re.IGNORECASE | re.MULTILINE,
)
DECO = "#*_`-+"


@contextmanager
def deadline(seconds: int):
    """Turn a hang (the failure mode under test) into a test failure."""
    def boom(*_):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cpu(fn, *args) -> float:
    t0 = time.thread_time()
    try:
        fn(*args)
    except ValueError:  # a rejected input is fine; only the time matters here
        pass
    return time.thread_time() - t0


# ---- B1: no super-linear backtracking -------------------------------------------------------------

WORDS = ["gra", "que", "str", "der", "res", "ans", "con", "com", "fin", "ste", "Conclusion", "Results", "graphs",
         "Final thoughts", "Answer is {Z}", "Strategy is simple", "constant", "Step two", "steps 3", "derivative",
         "GRAPHS:", "ANSWERED -", "1. resu"]
RUNS = list(DECO) + ["*-", "#*_", "-+`", "* ", "#\t", "_ -"]


def banner(run: str, n: int, sep: str, word: str) -> str:
    return (run * n)[:n] + sep + word


def test_banner_lines_split_in_linear_time():
    by_len: dict[int, float] = {32: 0.0, 64: 0.0}
    with deadline(60):
        for n in (8, 16, 24, 32, 48, 64):
            for run in RUNS:
                for sep in ("", " "):
                    for word in WORDS:
                        trace = banner(run, n, sep, word) + "\n" + GOLD
                        t = cpu(split_slots, trace)
                        assert t < 0.05, (n, run, sep, word, t)
                        if n in by_len:
                            by_len[n] += t
                        # a banner is never a slot header: the trace's slots are untouched
                        sp = split_slots(trace)
                        assert sp.values == GOLD_SLOTS and not sp.problems, (run, n, word)
    # exponential backtracking doubles per character (2^32 from 32 to 64); linear at most doubles
    assert by_len[64] <= 4 * by_len[32] + 0.05, by_len


def test_other_contract_regexes_are_linear():
    with deadline(60):
        for n in (2_000, 20_000):
            assert cpu(parse_call, "op()" + " " * n + "x") < 0.05  # was cubic: 20 s at n=2,000
            assert cpu(parse_call, "op(a=1)" + " \t" * n + "` ." + " " * n + "y") < 0.05
            assert cpu(parse_kv, ("a" + " " * n) * 3 + "b") < 0.05
            assert cpu(split_slots, "GRAPH: x" + "*" * (10 * n) + "x*") < 0.05  # was quadratic (strip regex)
            assert cpu(split_slots, ("*" * n + " gra\n") * 10) < 0.05
    assert parse_call("  `op(a=1, b={X, Y})` .  ") == ("op", {"a": "1", "b": "{X, Y}"})
    assert split_slots("ANSWER: **{Z}**").values["ANSWER"] == "{Z}"


TOKENS = ["#", "*", "**", "_", "`", "-", "+", " ", "  ", "\t", ">", "> ", "step", "Step ", "STEP", "1", "12", ".",
          ")", ":", "=", " slot", "slot", "x", "Conclusion", "res", "ans", "fin", "{Z}", "'", "/"]


@st.composite
def header_like(draw) -> str:
    names = st.sampled_from(sorted(SLOT_ALIASES)).flatmap(
        lambda n: st.lists(st.booleans(), min_size=len(n), max_size=len(n)).map(
            lambda up: "".join(c.upper() if u else c.lower() for c, u in zip(n, up))))
    name = draw(names)
    if " " in name and draw(st.booleans()):
        name = name.replace(" ", "_")
    pieces = draw(st.lists(st.sampled_from(TOKENS), max_size=6))
    tail = draw(st.lists(st.sampled_from(TOKENS), max_size=5))
    at = draw(st.integers(0, len(pieces)))
    line = "".join(pieces[:at]) + name + "".join(pieces[at:]) if draw(st.booleans()) else "".join(pieces) + name
    line += "".join(tail)
    if draw(st.booleans()):  # a near miss: drop or insert one character
        i = draw(st.integers(0, len(line)))
        line = line[:i] + draw(st.sampled_from(["", "x", ":", "*", " ", "1"])) + line[i + 1:]
    return line


def short_runs(line: str) -> bool:
    return all(len(r) <= 8 for r in re.findall(r"[#*_`\-+ \t]+", line))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header_like())
def test_new_header_regex_accepts_what_the_old_one_did(line):
    if not short_runs(line):
        return
    old, new = OLD_HEADER.match(line), contract._HEADER.match(line)
    assert bool(old) == bool(new), line
    if new:
        assert new.group("name").upper() == old.group("name").upper() and new.end() == old.end(), line
        assert contract._CANDIDATE_LINE.match(line), line  # the prefilter never hides a header


def test_header_regex_oracle_cases():
    yes = ["GRAPH: a", "**GRAPH:** a", "### ANSWER: x", "- RESULT: v", "STEP 3: STRATEGY: s", "1. **Query** -",
           "> *Final_Answer*: y", "Computed Result = 3", "derivation record", "ANSWER slot: x", "** Step 2) 1) ANSWER:"]
    no = ["GRAPHS: a", "Answers: x", "The ANSWER: x", "ANSWER is x", "*** Conclusion", "step two ANSWER:", "ANSWER? x"]
    for line in yes:
        assert contract._HEADER.match(line) and OLD_HEADER.match(line), line
    for line in no:
        assert not contract._HEADER.match(line) and not OLD_HEADER.match(line), line


# ---- B2: only ASCII letters spell a slot name ---------------------------------------------------

NAMES = sorted(SLOT_ALIASES)
POSITIONS = [(n, i) for n in NAMES for i, c in enumerate(n) if c.isalpha()]


def folding_specials() -> list[str]:
    """Code points that case-fold, case-map or NFKC-normalize to ASCII letters (İ ı ſ K Å ﬀ Ａ ...)."""
    out = ["\u212b", "\u00c5", "\u00e5", "\u2126"]  # case specials that do not reach ASCII (Å, Ω)
    for cp in range(0x80, 0x10000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        forms = c.upper() + c.lower() + c.casefold() + unicodedata.normalize("NFKC", c)
        if re.search("[A-Za-z]", forms) or re.fullmatch("[a-z]", c, re.IGNORECASE):
            out.append(c)
    return out


SPECIALS = folding_specials()


# İ ı ſ K(Kelvin) Å(Angstrom) ﬀ ﬁ ﬆ Ａ(fullwidth) ß, and Cyrillic А (a look-alike, no case mapping)
KNOWN = "\u0130\u0131\u017f\u212a\u212b\ufb00\ufb01\ufb06\uff21\u00df\u0410"


def test_specials_include_the_known_offenders():
    for c in KNOWN[:-1]:
        assert c in SPECIALS


def _mutated_trace(slot_name: str, pos: int, c: str, lower: bool) -> tuple[str, str]:
    """GOLD with the header of ``slot_name``'s slot renamed to ``slot_name`` with letter ``pos`` -> ``c``."""
    slot = SLOT_ALIASES[slot_name]
    name = slot_name.lower() if lower else slot_name
    name = name[:pos] + c + name[pos + 1:]
    lines = [name + ": " + ln.split(":", 1)[1] if ln.startswith(slot + ":") else ln for ln in GOLD.splitlines()]
    return "\n".join(lines), slot


def test_folding_specials_never_make_a_header_or_raise():
    # the known offenders at every letter position of every alias; every other special at 8 of them
    todo = [(c, k) for c in KNOWN for k in range(len(POSITIONS))]
    todo += [(c, (8 * i + j) % len(POSITIONS)) for i, c in enumerate(SPECIALS) for j in range(8)]
    with deadline(120):
        for c, k in todo:
            name, pos = POSITIONS[k]
            trace, slot = _mutated_trace(name, pos, c, lower=bool(k % 2))
            sp = split_slots(trace)  # must not raise (İ raised KeyError)
            assert "missing" in sp.problems.get(slot, ""), (name, pos, c)
        for c in KNOWN:  # and score() neither
            trace, slot = _mutated_trace("DERIVATION", 5, c, lower=False)
            assert score(trace, PROBLEM).bits[SLOTS.index(slot)] == 0


def test_every_bmp_code_point_in_a_header_letter_is_not_a_header():
    with deadline(120):
        for cp in range(0x80, 0x10000):
            name, pos = POSITIONS[cp % len(POSITIONS)]
            line = name[:pos] + chr(cp) + name[pos + 1:] + ": x"
            assert not contract._headers(line), hex(cp)
            assert set(split_slots(line).problems) == set(SLOTS)


def test_header_names_are_ascii_case_insensitive():
    assert split_slots("derivation: d").values["DERIVATION"] == "d"
    for bad in ("DER\u0130VATION: d", "ANſWER: a", "DERıVATION: d", "\u0410NSWER: a", "ＡNSWER: a"):
        assert not split_slots(bad).values, bad


# ---- D5: the last complete block ----------------------------------------------------------------

def values_and_problems(trace: str):
    sp = split_slots(trace)
    return sp.values, sp.problems


def assert_spans_agree(trace: str) -> None:
    sp, spans = split_slots(trace), slot_spans(trace)
    assert set(spans) == set(sp.values)
    for slot, (a, b) in spans.items():
        assert contract._clean_value(trace[a:b]) == sp.values[slot]


REASONING = ["Answer: let me think", "Result - not obvious yet", "Strategy:", "Final answer: soon",
             "Graph: I will restate it", "**Derivation**: below", "QUERY: what is asked?"]


@pytest.mark.parametrize("prose", REASONING + ["\n".join(REASONING)])
def test_reasoning_before_the_block_is_ignored(prose):
    trace = prose + "\n" + GOLD
    assert values_and_problems(trace) == (GOLD_SLOTS, {})
    s = score(trace, PROBLEM)
    assert s.bits == [1] * 6 and s.answer == frozenset({"Z"})
    assert_spans_agree(trace)
    edited = split_slots(replace_slot(trace, "ANSWER", "{W}"))
    assert edited.values["ANSWER"] == "{W}" and not edited.problems


def _block(answer: str, graph: str = "M -> Y, W -> Z, X -> M, X -> Y, Z -> X, Z -> Y") -> str:
    return GOLD[GOLD.index("GRAPH:"):].replace("ANSWER: {Z}", f"ANSWER: {answer}").replace(
        GOLD_SLOTS["GRAPH"], graph)


BLOCKS = [_block("{Z}"), _block("{W}"), _block("{Z, W}", "X -> Y"), _block("{M}")]


@pytest.mark.parametrize("first", range(len(BLOCKS)))
@pytest.mark.parametrize("last", range(len(BLOCKS)))
def test_two_blocks_score_as_the_last_one_alone(first, last):
    a, b = BLOCKS[first], BLOCKS[last]
    for sep in ("\n", "\n\nOn reflection:\n"):
        trace = a + sep + b
        assert values_and_problems(trace) == values_and_problems(b)
        sa, sb = score(trace, PROBLEM), score(b, PROBLEM)
        assert (sa.bits, sa.answer) == (sb.bits, sb.answer)
        assert_spans_agree(trace)


def test_headers_after_the_block_still_fail_closed():
    cases = {
        "\nGRAPH: X -> Y\nANSWER: {W}": {"GRAPH": "conflicting", "ANSWER": "conflicting"},  # trailing partial block
        "\nANSWER: {Z}": {"ANSWER": "duplicated"},
        "\nFinal answer: {W}": {"ANSWER": "conflicting"},
        "\nGRAPH: M -> Y": {"GRAPH": "conflicting"},
        # a second block missing RESULT does not start a new block: both blocks are read
        "\n" + _block("{W}").replace("RESULT: valid\n", ""): {"GRAPH": "duplicated", "ANSWER": "conflicting"},
    }
    for tail, want in cases.items():
        trace = "Answer: let me think\n" + GOLD + tail
        sp = split_slots(trace)
        for slot, word in want.items():
            assert word in sp.problems.get(slot, ""), (tail, slot, sp.problems)
        s = score(trace, PROBLEM)
        for slot in want:
            assert s.bits[SLOTS.index(slot)] == 0
        assert_spans_agree(trace)


def test_duplicates_inside_the_block_fail_closed():
    trace = GOLD.replace("STRATEGY: {Z}", "STRATEGY: {Z}\nSTRATEGY: {W}")
    assert "conflicting" in split_slots("Answer: x\n" + trace).problems["STRATEGY"]


def test_no_complete_block_reads_every_header():
    no_result = "\n".join(ln for ln in GOLD.splitlines() if not ln.startswith("RESULT"))
    sp = split_slots("Answer: let me think\n" + no_result)
    assert "missing" in sp.problems["RESULT"] and "conflicting" in sp.problems["ANSWER"]
    # a block must start at GRAPH: QUERY first means no complete block, as before
    lines = GOLD.splitlines()
    qi = next(i for i, ln in enumerate(lines) if ln.startswith("QUERY"))
    gi = lines.index("GRAPH: " + GOLD_SLOTS["GRAPH"])
    lines[qi], lines[gi] = lines[gi], lines[qi]
    reordered = "\n".join(lines)
    assert not split_slots(reordered).problems
    assert "conflicting" in split_slots("Answer: let me think\n" + reordered).problems["ANSWER"]
    assert_spans_agree("Answer: let me think\n" + reordered)


def test_constraints_alias_starts_a_block():
    trace = "Answer: I guess\nCONSTRAINTS: a\nQUERY: b\nSTRATEGY: c\nDERIVATION: d\nRESULT: e\nANSWER: f"
    sp = split_slots(trace)
    assert sp.values == dict(zip(SLOTS, "abcdef")) and not sp.problems and sp.header_names["GRAPH"] == "CONSTRAINTS"


# ---- D7: ties prefer a parsed answer -------------------------------------------------------------

ANSWERLESS = GOLD.replace("ANSWER: {Z}", "ANSWER: {Z")  # 5/6 through the STRATEGY fallback, no answer
GRAPH_DEFECT = GOLD.replace("X -> Y, ", "")  # correct answer, GRAPH misses an edge: 5/6


def test_d7_premise():
    a, b = score(ANSWERLESS, PROBLEM), score(GRAPH_DEFECT, PROBLEM)
    assert (a.total, a.answer) == (5, None) and a.bits[5] == 0
    assert (b.total, b.answer) == (5, frozenset({"Z"})) and b.bits[0] == 0 and grade(PROBLEM, b.answer)


def test_tie_goes_to_the_parsed_answer():
    assert select([ANSWERLESS, GRAPH_DEFECT], PROBLEM) == 1
    assert select([GRAPH_DEFECT, ANSWERLESS], PROBLEM) == 0
    assert select([ANSWERLESS, ANSWERLESS], PROBLEM) == 0  # nothing parsed: the earliest
    assert select([ANSWERLESS, GRAPH_DEFECT, GOLD], PROBLEM) == 2  # a higher score still wins
    assert select([ANSWERLESS, GRAPH_DEFECT], PROBLEM, "best") == 1
    assert select([ANSWERLESS, GRAPH_DEFECT], PROBLEM, "worst") == 0
    # callers with scores: parsed given, or computed from traces + problem
    assert select_from_scores([5, 5], traces=[ANSWERLESS, GRAPH_DEFECT], problem=PROBLEM) == 1
    assert select_from_scores([5, 5], "best", traces=[ANSWERLESS, GRAPH_DEFECT], problem=PROBLEM) == 1


@pytest.mark.parametrize("totals,parsed,want", [
    ([5, 6, 6, 6], [True, False, False, True], 3),
    ([6, 6], [False, False], 0),
    ([6, 5, 6], [False, True, False], 0),
    ([4, 6], [True, False], 1),
    ([6, 6, 6], None, 0),
])
def test_select_from_scores_first_rule(totals, parsed, want):
    assert select_from_scores(totals, parsed=parsed) == want


def test_tie_audit_rules_keep_their_meaning():
    # best: the earliest tied correct; worst: the earliest tied incorrect; neither: the first rule
    assert select_from_scores([6, 6, 6], "best", correct=[False, False, True], parsed=[False, True, True]) == 2
    assert select_from_scores([6, 6, 6], "worst", correct=[True, False, True], parsed=[True, True, True]) == 1
    assert select_from_scores([6, 6, 6], "worst", correct=[True, True, True], parsed=[False, True, True]) == 1
    assert select_from_scores([6, 6], "best", correct=[False, False], parsed=[False, True]) == 1
    with pytest.raises(ValueError):
        select_from_scores([6, 6], "best")
    with pytest.raises(ValueError):
        select_from_scores([6, 6], "median")


def test_every_calver_implementation_breaks_ties_the_same_way():
    from calver.evaluation.metrics import BUILTIN_SELECTORS, TIE_AUDIT
    from calver.evaluation.units import unit_facts
    from calver.infer.firewall import SelectorView, strip_problem
    from calver.infer.refine.refine import Cand, calver_pick
    from calver.infer.selectors import SELECTORS

    for texts, want in (([ANSWERLESS, GRAPH_DEFECT], 1), ([GRAPH_DEFECT, ANSWERLESS], 0),
                        ([ANSWERLESS, ANSWERLESS, GRAPH_DEFECT, GOLD], 3), ([ANSWERLESS, ANSWERLESS], 0)):
        view = SelectorView("p", 0, strip_problem(PROBLEM), tuple(texts), tuple(range(len(texts))), {})
        assert SELECTORS["calver"](view).index == want
        u = unit_facts(PROBLEM, texts)
        assert BUILTIN_SELECTORS["calver"](u) == want and TIE_AUDIT["calver_first"](u) == want
        cands = [Cand(t, 0, "pool", 0, s.total, s.bits, s.answer) for t, s in ((t, score(t, PROBLEM)) for t in texts)]
        assert calver_pick(cands) == want


# ---- the canonical fast path equals the general splitter ----------------------------------------------


def _general_split(trace: str):
    """split_slots with the canonical fast path switched off (the reference)."""
    from unittest import mock

    from calver.verifier import contract

    with mock.patch.object(contract, "_split_canonical", lambda t: None):
        return contract.split_slots(trace)


# the earlier pieces, and the 2026-12-01 audit's decorations (tools/fastpath.py: 562 of 30,000 differed)
_PIECES = st.sampled_from(["", " ", "  ", "**", "*x*", "`a`", "_", "\r", "x\u2028y", "{A, B}", "A -> B", "GRAPH: x",
                           "task=x; y=1", "```", "- z", ":", "\t", "{Z}", "{}", "X -> Y", "`", "valid", "x\r",
                           "\u2028", "\x85", "\x0c", "\x1c", "\x1d", "\x1e", "\x0b", "…", "RESULT", "STEP 1:",
                           "a\u2029b", "GRAPH: a", "ANSWER:", ".", "`{Z}`."])


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(st.lists(st.lists(_PIECES, max_size=4).map("".join), min_size=6, max_size=6),
       st.sampled_from(["GRAPH", "CONSTRAINTS"]), st.booleans())
def test_canonical_fast_path_equals_general_path(values, graph_label, newline):
    from calver.verifier.contract import SLOTS, _split_canonical

    labels = [graph_label, *SLOTS[1:]]
    trace = "\n".join(f"{lab}: {v}" for lab, v in zip(labels, values)) + ("\n" if newline else "")
    fast = _split_canonical(trace)
    assert fast is not None  # the shape is canonical, so the fast path must take it
    ref = _general_split(trace)
    assert (fast.values, fast.problems, fast.header_names) == (ref.values, ref.problems, ref.header_names)
