"""The PRM's ranking option without a model: the within-problem pair accuracy against a brute-force count
(and, for two-level labels, against AUROC), and the batches of whole problems."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from calver.evaluation.metrics import auroc
from calver.train.common import ConfigError
from calver.train.prm import ProblemBatchSampler, pair_accuracy, problem_groups


def _brute(p, y, g):
    right = total = 0.0
    for i, j in itertools.permutations(range(len(p)), 2):
        if g[i] == g[j] and y[i] > y[j]:
            total += 1
            right += 1.0 if p[i] > p[j] else 0.5 if p[i] == p[j] else 0.0
    return right / total if total else float("nan")


def test_pair_accuracy_counts_same_problem_pairs_only():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(2, 30)
        p = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(n)]
        y = [float(rng.randint(0, 6)) for _ in range(n)]
        g = [rng.randint(0, 4) for _ in range(n)]
        want = _brute(p, y, g)
        got = pair_accuracy(p, y, g)
        assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want)
    # one problem, two label levels: the pair accuracy is that problem's AUROC
    p, y = [0.1, 0.9, 0.4, 0.4, 0.7], [0, 6, 0, 6, 6]
    assert pair_accuracy(p, y, [0] * 5) == pytest.approx(auroc(p, [v == 6 for v in y]))
    # a perfect ranking within problems, whatever the scale across them
    assert pair_accuracy([5, 6, -10, -9], [0, 6, 0, 6], [0, 0, 1, 1]) == 1.0
    assert np.isnan(pair_accuracy([1, 2], [3, 3], [0, 0]))


def test_batches_hold_whole_problems_and_cover_every_example_once():
    examples = [{"problem_id": f"p{i % 7}"} for i in range(40)] + [{"problem_id": "big"}] * 11
    groups = problem_groups(examples)
    assert groups[:8] == [0, 1, 2, 3, 4, 5, 6, 0]
    sampler = ProblemBatchSampler(groups, batch_size=8, seed=0)
    first, second = list(sampler), list(sampler)
    for epoch in (first, second):
        flat = sorted(i for b in epoch for i in b)
        assert flat == list(range(len(examples)))
        assert all(len(b) <= 8 for b in epoch)
        for b in epoch:  # a problem's candidates share a batch unless it has more than 8
            for g in {groups[i] for i in b}:
                size = groups.count(g)
                if size <= 8:
                    assert sum(groups[i] == g for i in b) == size
    assert first != second and len(sampler) == len(first)
    with pytest.raises(ConfigError, match="batch_size >= 2"):
        ProblemBatchSampler(groups, batch_size=1)
