"""The scorer's per-problem memos (GRAPH/QUERY checks, the DERIVATION bit, the predicate on a returned
object) never change a score: a pool scored on one warm Problem equals each trace scored cold.

Oracle: the same trace scored against a fresh copy of the problem (empty memo). Traces are the fuzz
corpus's canonical traces of every family, mutated so that pools repeat some slots and vary others
(the case the memos are for), plus swaps of whole slots between traces of one problem.
"""

from __future__ import annotations

import copy
import random

import fuzz_corpus as fc

from calver.verifier import score

CORPUS = fc.build_corpus(per_family=2, seed=1)
POOL = [it.trace for it in CORPUS]


def _cold(trace, problem):
    return score(trace, copy.deepcopy(problem))


def _same(a, b) -> bool:
    return (a.bits, a.reasons, a.grounded) == (b.bits, b.reasons, b.grounded)


def test_warm_pool_scores_equal_cold_scores():
    rng = random.Random(7)
    by_problem: dict[int, list] = {}
    for it in CORPUS:
        by_problem.setdefault(id(it.problem), []).append(it)
    checked = 0
    for items in by_problem.values():
        problem = items[0].problem
        warm = copy.deepcopy(problem)  # one object for the whole pool: its memo fills up
        traces = []
        for it in items:
            traces.append(it.trace)
            for _ in range(12):
                _ops, text = fc.fuzz_case(rng, it.trace, POOL, max_ops=2)
                traces.append(text)
        traces += traces[: len(traces) // 2]  # repeats: the memo hits
        for t in traces:
            w = score(t, warm)
            c = _cold(t, problem)
            assert _same(w, c), (problem.task, t[:300], w.bits, c.bits, w.reasons, c.reasons)
            checked += 1
    assert checked > 1000


def test_slot_swaps_within_one_problem_match_cold_scores():
    """A DERIVATION seen with one STRATEGY, then with another: the memo key must separate them."""
    rng = random.Random(3)
    from calver.evaluation.audits import replace_slot
    from calver.verifier.contract import split_slots

    for it in CORPUS[:80]:
        warm = copy.deepcopy(it.problem)
        others = [o for o in CORPUS if o.problem is it.problem] or [it]
        base = it.trace
        for _ in range(6):
            donor = rng.choice(others + [rng.choice(CORPUS)])
            slot = rng.choice(("STRATEGY", "ANSWER", "RESULT", "DERIVATION", "GRAPH"))
            value = split_slots(donor.trace).get(slot)
            if value is None:
                continue
            t = replace_slot(base, slot, value)
            assert _same(score(t, warm), _cold(t, it.problem)), (it.problem.task, slot)
