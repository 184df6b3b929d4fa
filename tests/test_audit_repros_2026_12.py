"""The 2026-12-01 verifier audit's findings on serialization, parsing cost, memo memory, K&K b6 and slot
reading (F2, F4, F5, F10, F12 items 3-4), with the audit's data in tests/data/repro-2026-12-01/.

What is right is decided by hand-built facts (the source graph as written, brute-force reading of
the puzzle), never by calver's own ``grade``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import fuzz_corpus as fc
import pytest

from calver.data_gen.export import to_grpo_rows
from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_trace, generate
from calver.train.rewards import VerifierReward
from calver.verifier import Problem, grade, parsers, render_graph, score, select, values
from calver.verifier import memo as memos

REPRO = Path(__file__).parent / "data" / "repro-2026-12-01"


def load(name: str) -> Problem:
    return Problem.from_dict(json.loads((REPRO / name).read_text(encoding="utf-8")))


def backdoor_trace() -> str:
    text = (REPRO / "backdoor_trace.txt").read_text(encoding="utf-8")
    return text[text.index("GRAPH:"):]


GOOD_GRAPH = "GRAPH: M -> Y, W -> Z, X -> M, X -> Y, Z -> X, Z -> Y"


# ---- F2: names survive Problem.to_dict -> problem_json -> VerifierReward ------------------------------
def _bd_trace(graph_text: str, z: str) -> str:
    return (f"GRAPH: {graph_text}\nQUERY: task=backdoor_set; treatment=X; outcome=Y; variant=any; graph=DAG\n"
            f"STRATEGY: {z}\nDERIVATION: backdoor_check(treatment=X, outcome=Y, adjustment={z}, blocked=none)\n"
            f"RESULT: valid\nANSWER: {z}")


def test_dotted_confounder_keeps_its_reward_through_problem_json():
    orig = Problem.from_dict({"task": "backdoor_set", "graph_class": "DAG",
                              "graph": {"edges": [["gdp.growth", "X"], ["gdp.growth", "Y"], ["X", "Y"]]},
                              "query": {"treatment": "X", "outcome": "Y", "variant": "any"}})
    row = to_grpo_rows([orig])[0]
    reloaded = Problem.from_dict(json.loads(row["problem_json"]))
    # the source as written: one confounder named "gdp.growth"
    assert reloaded.graph.directed == {("gdp.growth", "X"), ("gdp.growth", "Y"), ("X", "Y")}
    right = _bd_trace(render_graph(orig.graph, "arrows"), '{"gdp.growth"}')
    mangled = "X -> Y, growth -> X, growth -> Y, gdp"  # what the unquoted text used to reload as
    hack = _bd_trace(mangled, "{growth}")
    reward = VerifierReward()
    got = reward(completions=[right, hack], problem_json=[row["problem_json"]] * 2)
    assert got[0] == 1.0 and got[1] <= 0.5  # it was 0.5 and 1.0 (6/6)
    sc = score(hack, reloaded)
    assert sc.bits[0] == sc.bits[2] == sc.bits[4] == 0  # GRAPH, STRATEGY and RESULT fail on the source
    assert grade(reloaded, '{"gdp.growth"}') and not grade(reloaded, "{growth}")


# ---- F4: a GRAPH slot of bare words parses in linear time -----------------------------------------------
def _word_soup_cost(words: int, letter: str) -> float:
    trace = backdoor_trace().replace(GOOD_GRAPH, "GRAPH: " + " ".join([letter] * words))
    t0 = time.thread_time()
    sc = score(trace, load("backdoor_problem.json"))
    assert sc.bits[0] == 0 and sc.bits[1:] == [1] * 5
    return time.thread_time() - t0


def test_bare_word_graph_slot_scales_linearly():
    """4x the words cost about 4x (the += name builder cost n^1.4: 1.23 s at the 300 KB slot limit)."""
    small = max(min(_word_soup_cost(9_000, "a"), _word_soup_cost(9_000, "b")), 0.002)
    big = min(_word_soup_cost(36_000, "c"), _word_soup_cost(36_000, "d"))
    assert big / small < 8, (small, big)


# ---- F5: every verifier memo is bounded by one byte budget ----------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def _graph_slot(rng: random.Random, k: int) -> str:
    parts, size = [], 0
    while size < 64_000:  # a hallucinated ~2,000-node graph of 64 KB, the audit's shape
        a, b = sorted(rng.sample(range(1999), 2))
        parts.append(f"n{a} -> n{b}")
        size += len(parts[-1]) + 2
    return ", ".join(parts + [f"u{k}"])


def test_distinct_graph_slots_do_not_grow_memory():
    """300 distinct 64 KB GRAPH slots kept ~1.9 MB each (570 MB); under the 64 MiB budget RSS stays flat."""
    memos.clear_all()
    p, good, rng = load("backdoor_problem.json"), backdoor_trace(), random.Random(0)
    for k in range(20):  # warm up the allocator and the memos
        score(good.replace(GOOD_GRAPH, "GRAPH: " + _graph_slot(rng, k)), p)
    base = _rss_mb()
    for k in range(20, 320):
        score(good.replace(GOOD_GRAPH, "GRAPH: " + _graph_slot(rng, k)), p)
    assert _rss_mb() - base < 150
    charged, budget = memos.usage()
    assert charged <= budget


def test_every_memo_respects_a_small_budget_and_results_do_not_change(memo_budget):
    """With a 200 KB budget, the memos are dropped over and over: every score equals the unbounded one."""
    corpus = fc.build_corpus(per_family=1, seed=3)
    rng = random.Random(5)
    cases = []
    for item in corpus:
        cases.append((item.problem, item.trace))
        cases += [(item.problem, fc.fuzz_case(rng, item.trace, [i.trace for i in corpus])[1]) for _ in range(3)]
    want = [score(t, p).bits for p, t in cases]
    memo_budget(200_000)
    rounds = [[score(t, p).bits for p, t in cases] for _ in range(2)]
    assert rounds[0] == want and rounds[1] == want
    assert memos.usage()[0] <= 200_000
    # the module memos the audit named are among those bounded
    for m in (parsers.graph_cache.memo, values.cached_node_set.memo, values.cached_path.memo):
        assert len(m) < len(cases)


def test_distinct_node_sets_are_dropped_under_the_budget(memo_budget):
    memo_budget(1_000_000)
    p, good = load("backdoor_problem.json"), backdoor_trace()
    for k in range(200):  # two distinct ~19 KB sets per trace: ~0.3 MB each unbounded
        s1 = "{" + ", ".join(f"s{i}x{k}" for i in range(1800)) + "}"
        s2 = "{" + ", ".join(f"t{i}x{k}" for i in range(1800)) + "}"
        assert score(good.replace("STRATEGY: {Z}", "STRATEGY: " + s1).replace("ANSWER: {Z}", "ANSWER: " + s2),
                     p).bits[2] == 0
        assert memos.usage()[0] <= 1_000_000
    assert len(values.cached_node_set.memo) < 200


# ---- F10: knights-and-knaves b6 respects RESULT's verdict -------------------------------------------------
def _flip_first(strategy: str) -> str:
    first = strategy.split(", ")[0]
    name, role = first.split("=")
    return strategy.replace(first, f"{name}={'knave' if role == 'knight' else 'knight'}", 1)


def test_kk_answer_its_result_calls_inconsistent_fails_b6():
    n = 0
    for p in generate("knights_knaves", 40, GenConfig(seed=7)):
        good = canonical_trace(p)
        strat = next(ln for ln in good.split("\n") if ln.startswith("STRATEGY: "))[len("STRATEGY: "):]
        flipped = _flip_first(strat)
        # a knights-and-knaves puzzle of the generator has one solution: flipping a role is wrong
        assert not grade(p, flipped)
        bad = good.replace(strat, flipped).replace("RESULT: consistent", "RESULT: inconsistent")
        defective = good.replace("question=roles", "question=who")  # correct, fails b2 only
        sb, sd = score(bad, p), score(defective, p)
        assert sb.bits[5] == 0 and "RESULT does not declare" in sb.reasons["ANSWER"]
        assert sd.total == 5 and sb.total < 5
        assert select([bad, defective], p) == 1
        n += 1
    assert n == 40


# ---- F12-4: an inline-code answer followed by a period -------------------------------------------------------
@pytest.mark.parametrize("answer", ["`{Z}`.", "**{Z}**.", "`{Z}`"])
def test_decorated_answer_with_a_period_parses(answer):
    sc = score(backdoor_trace().replace("ANSWER: {Z}", f"ANSWER: {answer}"), load("backdoor_problem.json"))
    assert sc.bits == [1] * 6 and sc.answer == frozenset({"Z"})
