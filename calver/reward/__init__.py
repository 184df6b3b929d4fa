"""calver.reward: the verifier as a reward, torch-free, below every trainer adapter.

- :class:`~calver.verifier.Verdict` / :class:`~calver.verifier.Unscorable`: what a row gets (the verifier's
  one verdict type).
- :class:`RewardSpec` (:mod:`.spec`): the one place where bits become a reward (fraction, strict, weighted,
  validity).
- :class:`RewardEngine` (:mod:`.engine`): the one scoring loop, in-process or on budgeted workers
  (:mod:`.workers`).
- :mod:`.problems`: the one problem loader and grounding rule; :mod:`.completions`: completions as text.
- :class:`RewardOptions` (:mod:`.options`): one parser for arguments and ``CALVER_REWARD_*`` variables.
- :class:`RewardStats` (:mod:`.stats`): one counter.

The adapters sit above: TRL (:mod:`calver.train.rewards`), verl, OpenRLHF and OpenEnv
(:mod:`calver.integrations`). :func:`score_batch` is what the function-style adapters call: one engine
per option set in this process (problem caches and worker pools reused across calls), counted in
:func:`stats`.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Sequence

from calver.reward.completions import END_OF_TURN_MARKERS
from calver.reward.engine import RewardEngine
from calver.reward.options import RewardOptions
from calver.reward.problems import UNGROUNDED, UngroundedProblemError
from calver.reward.spec import POLICY_FAULTS, UNSCORABLE_REWARD, VARIANTS, RewardSpec
from calver.reward.stats import RewardStats
from calver.verifier import BIT_KEYS, RowResult, Unscorable, Verdict

ADAPTER_STATS = RewardStats()  # every function-style adapter (verl, OpenRLHF) in this process
_engines: dict[tuple, RewardEngine] = {}
_lock = threading.Lock()


def engine_for(options: RewardOptions, end_markers: Sequence[str] | None = None) -> RewardEngine:
    """The process's engine for these options (and end-of-turn markers)."""
    key = (options.allow_ungrounded, options.budget_s, options.pool_workers, tuple(end_markers or ()))
    with _lock:
        eng = _engines.get(key)
        if eng is None:
            eng = _engines[key] = RewardEngine(allow_ungrounded=options.allow_ungrounded, budget_s=options.budget_s,
                                               workers=options.workers,
                                               end_markers=tuple(end_markers) if end_markers else END_OF_TURN_MARKERS)
        return eng


def score_batch(texts: Any, cells: Any, options: RewardOptions = RewardOptions(),
                end_markers: Sequence[str] | None = None) -> list[RowResult]:
    """One result per text against its problem cell, under ``options``, counted in :func:`stats`. Never raises."""
    t0 = time.perf_counter()
    results = engine_for(options, end_markers).score(texts, cells)
    ADAPTER_STATS.add(results, time.perf_counter() - t0, budgeted=options.budget_s is not None)
    return results


def stats() -> dict[str, Any]:
    """Totals of the function-style adapters since import (or :func:`reset_stats`)."""
    return ADAPTER_STATS.snapshot()


def reset_stats() -> None:
    ADAPTER_STATS.reset()


__all__ = ["BIT_KEYS", "POLICY_FAULTS", "UNGROUNDED", "UNSCORABLE_REWARD", "VARIANTS", "RewardEngine", "RewardOptions",
           "RewardSpec", "RewardStats", "RowResult", "UngroundedProblemError", "Unscorable", "Verdict", "engine_for",
           "reset_stats", "score_batch", "stats"]
