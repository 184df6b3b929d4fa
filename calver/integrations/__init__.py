"""The verifier as a reward for other RL trainers: verl (:mod:`calver.integrations.verl`) and OpenRLHF
(:mod:`calver.integrations.openrlhf`). TRL's own CLI uses :mod:`calver.train.rewards` directly; the
configuration lines for each trainer are in ``docs/integrations.md``.

Torch-free at import (the OpenRLHF reward imports torch inside the call, only to build its tensors).

Shared here: :func:`score_batch`, which turns completion texts plus their problem JSON into one
:class:`Verdict` per row (the six bits, the reward, and whether the row was scorable). It never raises.

Unscorable rows. Neither verl's ``compute_score`` nor OpenRLHF's ``reward_func`` has a per-sample
"no reward" value (TRL's ``None``): each sample needs a number. An unscorable row (no / malformed /
ungrounded problem JSON, an unregistered task, a completion that is not text, a scorer error, a call
over its time budget) gets reward :data:`UNSCORABLE_REWARD` = 0.0 with all six bits 0 and
``unscorable = 1``, and is counted by reason (:func:`stats`). Why 0.0: it is what a garbage trace earns,
so an unscorable row never out-earns an honest attempt; NaN would poison the group mean/std of
GRPO-style advantages; and a problem-level fault (the usual cause) makes every sample of that prompt
0.0, so its group has zero spread and, in GRPO, zero advantage - the group is in effect skipped.
A per-trace fault (scorer error, over budget) does pull its group's baseline down; the ``unscorable``
column makes that visible in the trainer's logs.

Time budget. ``budget_s`` (and ``workers``) route scoring through ``calver.train.rewards.VerifierReward``'s
time-budgeted worker pool (:mod:`calver.train.reward_workers`): a row over budget is unscorable
(reason ``timeout``) and its worker is replaced.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from calver.verifier import SLOTS, score

logger = logging.getLogger(__name__)

UNSCORABLE_REWARD = 0.0
BIT_KEYS = tuple(s.lower() for s in SLOTS)  # graph, query, strategy, derivation, result, answer
# Per-bit weights 32..1: a weighted VerifierReward's reward times 63 is the six bits as a binary number,
# so the pool path returns the bits through VerifierReward's public call (rewards only).

ENV_BUDGET = "CALVER_REWARD_BUDGET_S"
ENV_WORKERS = "CALVER_REWARD_WORKERS"
ENV_VARIANT = "CALVER_REWARD_VARIANT"


@dataclass(frozen=True)
class Verdict:
    """One row's outcome: ``bits`` (six 0/1, all 0 when unscorable), ``reward`` (the variant's value,
    :data:`UNSCORABLE_REWARD` when unscorable), ``unscorable`` and its ``reason`` ("" when scored)."""

    bits: tuple[int, ...]
    reward: float
    unscorable: bool = False
    reason: str = ""
    reasons: dict[str, str] = field(default_factory=dict, compare=False)  # slot -> why its bit failed

    @property
    def total(self) -> int:
        return sum(self.bits)


def _unscorable(reason: str) -> Verdict:
    return Verdict((0,) * len(SLOTS), UNSCORABLE_REWARD, True, reason[:300])


# ---- counters --------------------------------------------------------------------------------------
_lock = threading.Lock()
_stats: dict[str, Any] = {"scored": 0, "unscorable": 0, "reasons": Counter(), "bit_totals": [0] * len(SLOTS)}


def _count(verdicts: Sequence[Verdict]) -> None:
    bad = [v.reason for v in verdicts if v.unscorable]
    with _lock:
        _stats["scored"] += len(verdicts) - len(bad)
        _stats["unscorable"] += len(bad)
        _stats["reasons"].update(bad)
        for v in verdicts:
            if not v.unscorable:
                for i, b in enumerate(v.bits):
                    _stats["bit_totals"][i] += b
    if bad:
        logger.warning("calver reward: %d of %d rows unscorable (%s)", len(bad), len(verdicts),
                       "; ".join(f"{r} x{c}" for r, c in Counter(bad).most_common(3)))


def stats() -> dict[str, Any]:
    """Totals since import (or :func:`reset_stats`), over every adapter in this process: scored and
    unscorable counts, unscorable reasons, per-bit pass rates of the scored rows."""
    with _lock:
        n = _stats["scored"]
        return {"scored": n, "unscorable": _stats["unscorable"], "unscorable_reasons": dict(_stats["reasons"]),
                "bit_pass_rates": {k: (_stats["bit_totals"][i] / n if n else None) for i, k in enumerate(BIT_KEYS)}}


def reset_stats() -> None:
    with _lock:
        _stats.update(scored=0, unscorable=0, reasons=Counter(), bit_totals=[0] * len(SLOTS))


# ---- options -------------------------------------------------------------------------------------
def env_options() -> dict[str, Any]:
    """``variant`` / ``budget_s`` / ``workers`` from ``CALVER_REWARD_VARIANT`` / ``CALVER_REWARD_BUDGET_S`` /
    ``CALVER_REWARD_WORKERS`` (for trainers that pass no kwargs to a reward, e.g. OpenRLHF). A value that
    does not parse is ignored with a warning, never raised."""
    out: dict[str, Any] = {}
    v = os.environ.get(ENV_VARIANT, "").strip()
    if v:
        out["variant"] = v
    for name, key, typ in ((ENV_BUDGET, "budget_s", float), (ENV_WORKERS, "workers", int)):
        raw = os.environ.get(name, "").strip()
        if not raw:
            continue
        try:
            val = typ(raw)
        except ValueError:
            logger.warning("calver reward: ignoring %s=%r (not a %s)", name, raw, typ.__name__)
            continue
        if val > 0:
            out[key] = val
    return out


def _num(value: Any, typ: type, name: str) -> Any:
    """``value`` as a positive ``typ``, or None (absent, unparsable, not positive: warned)."""
    if value is None:
        return None
    try:
        val = typ(value)
    except (TypeError, ValueError, OverflowError):
        logger.warning("calver reward: ignoring %s=%r (not a %s)", name, value, typ.__name__)
        return None
    if not val > 0:  # also rejects NaN
        logger.warning("calver reward: ignoring %s=%r (not positive)", name, value)
        return None
    return val


_rewards: dict[tuple, Any] = {}  # options -> VerifierReward (its problem cache is reused across calls)
_warned: set[str] = set()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(msg, *args)


def _reward(variant: str, weights: tuple[float, ...] | None, allow_ungrounded: bool,
            budget_s: float | None = None, workers: int | None = None):
    """A cached ``VerifierReward`` for these options (its problem cache and worker pool are reused)."""
    key = (variant, weights, allow_ungrounded, budget_s, workers)
    with _lock:
        hit = _rewards.get(key)
    if hit is not None:
        return hit
    from calver.train.rewards import VerifierReward

    extra = {k: v for k, v in (("budget_s", budget_s), ("workers", workers)) if v is not None}
    rw = VerifierReward(variant, weights=list(weights) if weights is not None else None,
                        allow_ungrounded=allow_ungrounded, **extra)
    with _lock:
        _rewards.setdefault(key, rw)
        return _rewards[key]


# ---- scoring -------------------------------------------------------------------------------------
def score_batch(texts: Sequence[Any], problems: Sequence[Any], *, variant: str = "fraction",
                weights: Sequence[float] | None = None, allow_ungrounded: bool = False,
                budget_s: float | None = None, workers: int | None = None) -> list[Verdict]:
    """One :class:`Verdict` per ``texts[i]`` against ``problems[i]`` (a ``problem_json`` string or dict).

    ``variant`` / ``weights`` as in ``VerifierReward`` (fraction S/6, strict, weighted). An ungrounded
    (constructed-mode, graph-less) problem is unscorable unless ``allow_ungrounded``. Bad options fall
    back to the fraction reward with a warning. Never raises."""
    if isinstance(texts, (str, bytes, bytearray, dict)):
        return []
    try:
        texts = list(texts)
    except Exception:  # noqa: BLE001 - not a sequence of rows: nothing to score
        return []
    try:
        problems = list(problems)
    except Exception:  # noqa: BLE001
        problems = []
    if len(problems) < len(texts):
        problems += [None] * (len(texts) - len(problems))
    try:
        try:
            w = tuple(float(x) for x in weights) if weights is not None else None
            rw = _reward(str(variant), w, bool(allow_ungrounded))
        except Exception as e:  # noqa: BLE001 - a bad variant/weights: say so, score with the default
            _warn_once(f"options:{variant}:{weights}", "calver reward: bad reward options (%s); using variant "
                       "'fraction'", e)
            rw = _reward("fraction", None, bool(allow_ungrounded))
        budget_s, workers = _num(budget_s, float, "budget_s"), _num(workers, int, "workers")
        out = _score_rows(rw, texts, problems[:len(texts)], budget_s, workers)
    except Exception as e:  # noqa: BLE001 - a bug here (or a reward module that fails to import) must not stop a step
        logger.exception("calver reward: batch scoring failed")
        out = [_unscorable(f"adapter error: {type(e).__name__}: {e}") for _ in texts]
    _count(out)
    return out


def _prepare_rows(rw, texts, problems) -> tuple[list[Any], list[Verdict | None]]:
    """Per row the prepared problem, or (in ``early``) the row's unscorable verdict."""
    from calver.train.rewards import UngroundedProblemError

    preps: list[Any] = []
    early: list[Verdict | None] = []
    for text, raw in zip(texts, problems):
        try:
            prob = rw.problem(raw)
        except UngroundedProblemError:
            prob = "ungrounded problem (constructed mode without its source graph; pass allow_ungrounded)"
        except Exception as e:  # noqa: BLE001
            prob = f"malformed problem: {type(e).__name__}: {e}"
        if isinstance(prob, str):
            preps.append(None)
            early.append(_unscorable(prob))
        elif not isinstance(text, str):
            preps.append(None)
            early.append(_unscorable(f"completion is a {type(text).__name__}, not text"))
        else:
            preps.append(prob)
            early.append(None)
    return preps, early


def _score_rows(rw, texts, problems, budget_s, workers) -> list[Verdict]:
    preps, early = _prepare_rows(rw, texts, problems)
    todo = [i for i, v in enumerate(early) if v is None]
    if todo and (budget_s is not None or workers is not None):
        for i, v in zip(todo, _score_pooled(rw, [texts[i] for i in todo], [problems[i] for i in todo],
                                            budget_s, workers)):
            early[i] = v
        return early  # type: ignore[return-value]
    for i in todo:
        try:
            ts = score(texts[i], preps[i])
        except Exception as e:  # noqa: BLE001 - a scorer bug: this row is unscorable, the step goes on
            early[i] = _unscorable(f"scorer error: {type(e).__name__}: {e}")
            continue
        bits = tuple(int(b) for b in ts.bits)
        early[i] = Verdict(bits, float(rw.reward_from_bits(bits)), reasons=dict(ts.reasons))
    return early  # type: ignore[return-value]


def _score_pooled(rw, texts, problems, budget_s, workers) -> list[Verdict]:
    """Score through ``VerifierReward(budget_s=..., workers=...)``'s worker pool: ``outcomes()`` gives per
    row the bits, or None and why (over budget, a crashed worker, a scorer error)."""
    budgeted = _reward(rw.variant, tuple(rw.weights) if rw.weights is not None else None, rw.allow_ungrounded,
                       budget_s, workers)
    out = []
    for bits, why in budgeted.outcomes(list(texts), list(problems)):
        if bits is None:
            out.append(_unscorable(str(why or "over budget or scorer error")))
        else:
            b = tuple(int(x) for x in bits)
            out.append(Verdict(b, float(rw.reward_from_bits(b))))
    return out


def bits_dict(v: Verdict) -> dict[str, int]:
    """``{"graph": b1, ..., "answer": b6}``."""
    return dict(zip(BIT_KEYS, (int(b) for b in v.bits)))
