"""Selection metrics on frozen pools: built-in selectors, accuracy, coverage, repair decomposition,
the fragmentation condition, and score calibration (precision/recall/FPR/coverage/AUROC).

Everything here reads :class:`~calver.evaluation.units.UnitFacts`; all numbers are unrounded.
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from calver.evaluation.grading import is_correct
from calver.evaluation.units import UnitFacts
from calver.infer.selectors.base import Selection, plurality
from calver.verifier import TIE_RULES, select_from_scores


# ---- selectors computable from per-candidate facts -------------------------------------------------
# Each rule is implemented once, in ``calver.infer.selectors``; these apply it to UnitFacts.
def first_index(u: UnitFacts) -> int:
    return 0


def plurality_index(keys: Sequence[Hashable | None]) -> int:
    """Exact plurality over canonical answer keys (:func:`calver.infer.selectors.plurality`): ties
    go to the answer whose first occurrence is earliest; the returned index is that first
    occurrence. Unparsed answers (None) cast no vote; a pool with no parsed answer returns index 0."""
    return plurality(keys)[0]


def calver_index(totals: Sequence[int], tie: str = "first", correct: Sequence[bool] | None = None,
                 parsed: Sequence[bool] | None = None) -> int:
    """CALVER (:func:`calver.verifier.select_from_scores`, the rule the CALVER selector applies):
    among the candidates with the maximum score, the earliest whose ANSWER parsed (``parsed``; None:
    all count as parsed), else the earliest (``first``, deployed). ``best``/``worst`` resolve score
    ties by graded correctness: a tie-rule audit that reads labels, never a selector."""
    if tie not in TIE_RULES:
        raise ValueError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    totals = [int(t) for t in totals]
    if tie != "first" and correct is None:
        raise ValueError("tie rules best/worst need correctness")
    return int(select_from_scores(totals, tie, correct=None if correct is None else [bool(c) for c in correct],
                                  parsed=None if parsed is None else [bool(p) for p in parsed]))


def unit_parsed(u: UnitFacts) -> list[bool] | None:
    """Whether each candidate's ANSWER parsed (None when the unit carries no parsed answers)."""
    return [a is not None for a in u.answers] if len(u.answers) == u.k else None


BUILTIN_SELECTORS = {
    "first": lambda u: first_index(u),
    "plurality": lambda u: plurality_index(u.answer_keys),
    "calver": lambda u: calver_index(u.totals, "first", parsed=unit_parsed(u)),
}
TIE_AUDIT = {
    "calver_first": lambda u: calver_index(u.totals, "first", u.correct, unit_parsed(u)),
    "calver_best": lambda u: calver_index(u.totals, "best", u.correct, unit_parsed(u)),
    "calver_worst": lambda u: calver_index(u.totals, "worst", u.correct, unit_parsed(u)),
}


# ---- unit-level outcomes ------------------------------------------------------------------------------
def as_pick(sel: Any) -> tuple[int, Any]:
    """``(index, answer)`` of one selection given as an index, a :class:`Selection`, or a stored
    selection row (``{"index": ..., "answer": ...}``); ``answer`` is None unless the index is -1."""
    if isinstance(sel, Selection):
        return int(sel.index), sel.answer
    if isinstance(sel, Mapping):
        return int(sel["index"]), sel.get("answer")
    return int(sel), None


def pick_scores(sel: Any) -> list[float] | None:
    """The per-candidate scores a selection carries (a :class:`Selection` or a stored row), or None (an index)."""
    if isinstance(sel, Selection):
        scores = sel.scores
    elif isinstance(sel, Mapping):
        scores = sel.get("scores")
    else:
        return None
    return None if scores is None else [float("nan") if v is None else float(v) for v in scores]


def within_pool_auroc(units: Sequence[UnitFacts], scores: Sequence[Sequence[float] | None]
                      ) -> tuple[list[float], list[str]]:
    """Per unit whose candidates are neither all valid nor all invalid, and whose ``scores`` cover every
    candidate: the AUROC of the scores as a detector of its valid candidates (how well a selector's scores
    order one pool, the decision it makes); and the units' clusters."""
    values, clusters = [], []
    for u, sc in zip(units, scores):
        if sc is None or len(sc) != u.k or any(math.isnan(v) for v in sc) or u.correct.all() or not u.correct.any():
            continue
        values.append(auroc(sc, u.correct))
        clusters.append(u.source_id)
    return values, clusters


def pick_correct(u: UnitFacts, sel: Any) -> bool:
    """Whether one selection is correct: the selected candidate's correctness; for index -1 (an
    answer built outside the pool, extract-then-solve) ``grade(problem, answer)`` on the source
    graph. Any other out-of-range index, or -1 without an answer, is wrong."""
    i, answer = as_pick(sel)
    if i == -1:
        gp = u.grading_problem if u.grading_problem is not None else u.problem
        return answer is not None and gp is not None and is_correct(gp, answer)
    return 0 <= i < u.k and bool(u.correct[i])


def selected_correct(units: Sequence[UnitFacts], indices: Sequence[Any]) -> np.ndarray:
    """1.0 where each unit's selection is correct (:func:`pick_correct`; a selection is an index,
    a :class:`Selection` or a stored row, so index -1 is graded on the answer it carries)."""
    return np.array([float(pick_correct(u, s)) for u, s in zip(units, indices)], dtype=float)


def accuracy(outcomes: Sequence[float]) -> float:
    outcomes = np.asarray(outcomes, float)
    return float(outcomes.mean()) if outcomes.size else float("nan")


def coverage(units: Sequence[UnitFacts]) -> np.ndarray:
    """Per unit: 1.0 when the pool holds at least one correct candidate (a diagnostic ceiling)."""
    return np.array([float(u.correct.any()) for u in units])


# ---- repair decomposition ----------------------------------------------------------------------------
def repair_decomposition(a: Sequence[float], b: Sequence[float], mask: Sequence[bool] | None = None) -> dict[str, Any]:
    """Decompose selector A's gain over B (A = CALVER, B = plurality) on paired units.

    repairs: B wrong, A right; new_errors: B right, A wrong; ratio = repairs / new_errors;
    net_gain = (repairs - new_errors) / n = acc(A) - acc(B).
    """
    a = np.asarray(a, bool)
    b = np.asarray(b, bool)
    if mask is not None:
        m = np.asarray(mask, bool)
        a, b = a[m], b[m]
    n = int(a.size)
    repairs = int(np.sum(a & ~b))
    new_errors = int(np.sum(~a & b))
    return {
        "n": n,
        "repairs": repairs,
        "new_errors": new_errors,
        "both_correct": int(np.sum(a & b)),
        "both_wrong": int(np.sum(~a & ~b)),
        "ratio": (repairs / new_errors) if new_errors else (float("inf") if repairs else float("nan")),
        "net_gain": (repairs - new_errors) / n if n else float("nan"),
    }


# ---- fragmentation --------------------------------------------------------------------------------------
def answer_masses(u: UnitFacts) -> tuple[dict[Hashable, int], dict[Hashable, bool]]:
    """Counts per parsed answer key and each key's validity (graded on the source graph)."""
    counts: dict[Hashable, int] = {}
    valid: dict[Hashable, bool] = {}
    for k, c in zip(u.answer_keys, u.correct):
        if k is None:
            continue
        counts[k] = counts.get(k, 0) + 1
        valid[k] = valid.get(k, False) or bool(c)
    return counts, valid


def fragmented(u: UnitFacts) -> bool:
    """The fragmentation condition on one pool: it holds a valid candidate, and some invalid answer
    has strictly more mass than every individual valid answer."""
    if not u.correct.any():
        return False
    counts, valid = answer_masses(u)
    best_valid = max((c for k, c in counts.items() if valid[k]), default=0)
    best_invalid = max((c for k, c in counts.items() if not valid[k]), default=0)
    return best_invalid > best_valid


def invalid_unique_plurality(u: UnitFacts) -> bool:
    """An invalid answer is the unique plurality answer of the pool."""
    counts, valid = answer_masses(u)
    if not counts:
        return False
    top = max(counts.values())
    winners = [k for k, c in counts.items() if c == top]
    return len(winners) == 1 and not valid[winners[0]]


# ---- calibration ------------------------------------------------------------------------------------------
def rankdata(x: np.ndarray) -> np.ndarray:
    """Midranks (1-based) with ties averaged, vectorized."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    boundaries = np.flatnonzero(np.diff(xs) != 0) + 1
    starts = np.concatenate([[0], boundaries])
    ends = np.concatenate([boundaries, [len(xs)]])
    avg = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
    ranks_sorted = np.repeat(avg, ends - starts)
    out = np.empty_like(ranks_sorted)
    out[order] = ranks_sorted
    return out


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """AUROC by the Mann-Whitney rank statistic (ties count one half)."""
    s = np.asarray(scores, float)
    y = np.asarray(labels, bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def calibration(scores: Sequence[float], labels: Sequence[bool], threshold: float = 6) -> dict[str, Any]:
    """Candidate-level calibration of ``score >= threshold`` as a validity classifier."""
    s = np.asarray(scores, float)
    y = np.asarray(labels, bool)
    pred = s >= threshold
    tp = int(np.sum(pred & y))
    fp = int(np.sum(pred & ~y))
    fn = int(np.sum(~pred & y))
    tn = int(np.sum(~pred & ~y))
    nan = float("nan")
    return {
        "threshold": threshold, "n": int(s.size), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else nan,
        "recall": tp / (tp + fn) if tp + fn else nan,
        "fpr": fp / (fp + tn) if fp + tn else nan,
        "coverage": (tp + fp) / s.size if s.size else nan,
        "auroc": auroc(s, y),
    }


def candidate_arrays(units: Sequence[UnitFacts]) -> tuple[np.ndarray, np.ndarray]:
    """All candidates' scores and correctness, concatenated."""
    if not units:
        return np.zeros(0), np.zeros(0, bool)
    return (np.concatenate([u.totals for u in units]).astype(float),
            np.concatenate([u.correct for u in units]).astype(bool))
