"""Per-candidate facts of a frozen pool (:class:`UnitFacts`): CALVER bits/score, canonical answer
key, correctness.

Scores and answer keys are computed from the candidate text and the firewall-stripped problem only:
:func:`load_units` reads them from the pool's score table (:mod:`calver.infer.score_table`, built and
stored when missing or stale), so a pool is scored once. Correctness is reattached afterwards through
:mod:`calver.evaluation.grading` (the task predicate on the *source* graph, which in constructed-graph
mode comes from the labels).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

import numpy as np

from calver.evaluation.grading import grading_problem, grading_problems, is_correct
from calver.infer.firewall import strip_problem
from calver.infer.pool import Pool
from calver.infer.score_table import ScoreTable, score_table
from calver.verifier import Problem, Verdict, score
from calver.verifier.verdict import answer_key as _key_rule


@dataclass
class UnitFacts:
    """One (problem, seed) unit: K candidates in sampling order."""

    problem_id: str
    source_id: str
    seed: int
    texts: list[str]
    totals: np.ndarray  # (K,) int CALVER scores
    bits: np.ndarray  # (K, 6) int
    correct: np.ndarray  # (K,) bool, graded on the source graph
    answer_keys: list[Hashable | None]  # canonical answer keys for exact voting (None: unparsed)
    problem: Problem | None = None  # the selector-visible problem
    grading_problem: Problem | None = None  # the problem with its source graph reattached
    answers: list[Any] = field(default_factory=list)
    # the verifier's Verdict per candidate (full when scored in this process, else rebuilt from
    # the score table: no slots / parsed graphs); empty for hand-built units
    scores: list[Verdict] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.problem_id, self.seed)

    @property
    def k(self) -> int:
        return len(self.totals)

    def prefix(self, k: int) -> "UnitFacts":
        return dataclasses.replace(
            self, texts=self.texts[:k], totals=self.totals[:k], bits=self.bits[:k], correct=self.correct[:k],
            answer_keys=self.answer_keys[:k], answers=self.answers[:k], scores=self.scores[:k],
        )


def answer_key(problem: Problem, answer: Any) -> Hashable | None:
    """Canonical, hashable answer key used by exact plurality: the selectors' rule
    (:func:`calver.verifier.verdict.answer_key`; None when the answer is unparsed)."""
    return _key_rule(problem.task, answer)


def unit_facts(problem: Problem, texts: Sequence[str], *, problem_id: str = "", source_id: str = "",
               seed: int = 0, labels: dict[str, Any] | None = None, grading: Problem | None = None,
               scores: Sequence[Verdict] | None = None) -> UnitFacts:
    """Score every candidate on ``problem`` (no labels read; ``scores``: their verdicts, when already
    known), then grade the parsed answers on the source graph
    (``grading``, or ``problem`` with the labels' source graph attached)."""
    scores = list(scores) if scores is not None else [score(t, problem) for t in texts]
    if len(scores) != len(texts):
        raise ValueError(f"unit {problem_id or problem.id}: {len(scores)} scores for {len(texts)} texts")
    gp = grading if grading is not None else grading_problem(problem, labels)
    answers = [s.answer for s in scores]
    return UnitFacts(
        problem_id=problem_id or problem.id,
        source_id=source_id or problem.source_id or problem.id,
        seed=int(seed),
        texts=list(texts),
        totals=np.array([s.total for s in scores], dtype=np.int64),
        bits=np.array([s.bits for s in scores], dtype=np.int64).reshape(len(scores), 6),
        correct=np.array([is_correct(gp, a) for a in answers], dtype=bool),
        answer_keys=[s.answer_key for s in scores],
        problem=problem,
        grading_problem=gp,
        answers=answers,
        scores=scores,
    )


def load_units(pool: Pool | str, k: int | None = None, *, table: ScoreTable | None = None,
               log=lambda m: None) -> list[UnitFacts]:
    """UnitFacts for every unit of a pool (optionally its K-prefix view). Scores come from ``table``
    (default: the pool's score table, scored on the firewall-stripped problem, stored when missing
    or stale); the full problem (plus labels) is used only to grade."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    table = table if table is not None else score_table(pool, log=log)
    problems = pool.problems()
    graded = grading_problems(pool)
    views: dict[str, Problem] = {}
    out = []
    for u in pool.units(k):
        if u.problem_id not in views:
            views[u.problem_id] = strip_problem(problems[u.problem_id])
        key, n = (u.problem_id, u.seed), len(u.texts)
        table.check(key, u.texts)
        out.append(unit_facts(views[u.problem_id], u.texts, problem_id=u.problem_id, source_id=u.source_id,
                              seed=u.seed, grading=graded[u.problem_id], scores=table.verdicts(key)[:n]))
    return out


def from_arrays(totals: Sequence[Sequence[int]], correct: Sequence[Sequence[bool]],
                answer_keys: Sequence[Sequence[Hashable | None]],
                sources: Sequence[str] | None = None) -> list[UnitFacts]:
    """Hand-built units for tests and synthetic studies (no texts, no problems)."""
    out = []
    for i, (t, c, a) in enumerate(zip(totals, correct, answer_keys)):
        t = np.asarray(t, dtype=np.int64)
        out.append(UnitFacts(
            problem_id=f"u{i}", source_id=(sources[i] if sources is not None else f"u{i}"), seed=0,
            texts=[""] * len(t), totals=t, bits=np.zeros((len(t), 6), dtype=np.int64),
            correct=np.asarray(c, dtype=bool), answer_keys=list(a), answers=list(a),
        ))
    return out
