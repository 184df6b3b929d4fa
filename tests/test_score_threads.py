"""Thread-safe scoring (verl, OpenRLHF and TRL's async GRPO call the reward from threads): one corpus
scored from 8 threads and from one gives identical results and no exception over >= 100k calls, with a
memo budget small enough that the memos are dropped thousands of times mid-run."""

from __future__ import annotations

import random
import threading

import pytest

from calver.data_gen.generators import GenConfig, generate
from calver.data_gen.knights import generate_kk
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import strip_problem
from calver.verifier import memo, prepare, score
from calver.verifier.registry import get_family

TASKS = ("backdoor_set", "separation_set", "mediator", "frontdoor_set", "intervention_reachability",
         "cycle_witness", "ate_threshold", "knights_knaves")
THREADS, CALLS = 8, 100_000


def corpus(seed: int = 0) -> list[tuple[object, str]]:
    """(problem, trace): canonical traces and one-slot damage, on plain Problems and PreparedProblems, so
    that scoring prepares problems (adding to the live set) while other threads drop the memos."""
    rng = random.Random(seed)
    problems = [p for t in TASKS if t != "knights_knaves" for p in generate(t, 4, GenConfig(seed=seed))]
    problems += [generate_kk(4, i, seed) for i in range(4)]
    out = []
    for p in problems:
        fam = get_family(p.task)
        gold = fam.canonical_trace(p)
        views = (p, strip_problem(p), prepare(p))
        for k in range(6):
            tr = gold if k == 0 else replace_slot(gold, rng.choice(("GRAPH", "STRATEGY", "ANSWER", "RESULT")),
                                                  f"junk {rng.randrange(10 ** 6)}")
            out.append((views[k % 3], tr))
    return out


def as_tuple(s) -> tuple:
    return tuple(s.bits), tuple(sorted(s.reasons.items())), repr(s.answer), s.grounded


@pytest.mark.slow
def test_eight_threads_score_like_one_over_100k_calls_with_a_tiny_memo_budget():
    items = corpus()
    want = [as_tuple(score(tr, p)) for p, tr in items]
    before = memo.usage()[1]
    memo.set_budget(64_000)
    errors: list[BaseException] = []
    mismatches: list[int] = []
    per_thread = -(-CALLS // THREADS)

    def work(k: int) -> None:
        rng = random.Random(k)
        try:
            for _ in range(per_thread):
                i = rng.randrange(len(items))
                p, tr = items[i]
                if as_tuple(score(tr, p)) != want[i]:
                    mismatches.append(i)
        except BaseException as e:  # noqa: BLE001 - the test reports whatever escaped score()
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        memo.set_budget(before)
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:10]
    assert per_thread * THREADS >= CALLS
