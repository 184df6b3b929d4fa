"""The verifier as a TRL reward function (a thin adapter over :mod:`calver.reward`).

``VerifierReward`` follows TRL 1.x's custom reward signature: ``reward(prompts, completions, **kwargs)``
where the dataset's columns arrive as kwargs (here ``problem_json``: one ``Problem.to_dict()`` JSON
string per completion) together with TRL's ``trainer_state``, ``log_metric`` and ``log_extra``. The reward
is :class:`calver.reward.RewardSpec`'s (``fraction`` S/6, ``strict``, ``weighted`` with per-bit ``weights``,
``validity``); the rows are scored by :class:`calver.reward.RewardEngine`.

Unscorable rows (:mod:`calver.reward.spec`): ``None`` (TRL excludes it from the group baseline), except a
completion over its time budget or one that crashed its worker, which gets the floor 0.0. No cell or column
shape makes the call raise. A constructed-mode problem without its source graph stops the run with
:class:`~calver.reward.UngroundedProblemError` unless ``allow_ungrounded``.

Logging: per-bit pass rates go to ``log_metric`` as ``verifier/<slot>`` (TRL averages them per logging step);
without it (TRL's async GRPO passes neither sink) the per-sample bits go to ``log_extra`` if given, else
they stay in ``stats()`` and an INFO line per call, with one warning saying so.

Time budget and workers: ``budget_s`` bounds each completion's scoring in worker processes
(:mod:`calver.reward.workers`: un-stallable from any thread); ``workers=N`` scores on N processes.
Rewards with the same ``(workers, budget_s, scorer)`` share one pool, and concurrent calls share its workers.

``AsyncVerifierReward``: the same reward as a coroutine (``async def __call__``), for TRL's async reward
path (``GRPOTrainer`` gathers async rewards; async GRPO runs each in a thread): it scores in a thread, so
rewards of a step overlap.

Module-level rewards for ``trl grpo --reward_funcs calver.train.rewards.verifier_reward`` (TRL imports a
dotted path and names the reward by ``__name__``): ``verifier_reward`` (S/6), ``verifier_reward_strict``,
``verifier_reward_validity``, ``verifier_reward_async`` and ``verifier_bit_graph`` ...
``verifier_bit_answer`` (b_i, for TRL's ``reward_weights`` or ``multi_objective_aggregation=
"normalize_then_sum"``). They read the ``problem_json`` column and take their options from the
``CALVER_REWARD_*`` environment (:mod:`calver.reward.options`, read at import: a bad value stops the import).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Sequence

from calver.reward import RewardEngine, RewardOptions, RewardSpec, RewardStats, UngroundedProblemError
from calver.reward.completions import completion_text, read_completion  # noqa: F401 - part of this adapter's API
from calver.reward.engine import prepared
from calver.reward.problems import UNGROUNDED
from calver.reward.worker_main import ScoreFn
from calver.verifier import BIT_KEYS, SLOTS, PreparedProblem, RowResult, Unscorable

logger = logging.getLogger(__name__)


class VerifierReward:
    """Callable TRL reward function backed by :func:`calver.verifier.score` (see the module docstring)."""

    def __init__(self, variant: str = "fraction", weights: Sequence[float] | None = None,
                 problem_column: str = "problem_json", name: str | None = None,
                 allow_ungrounded: bool = False, *, budget_s: float | None = None, workers: int = 0,
                 scorer: ScoreFn | None = None) -> None:
        self.spec = RewardSpec(variant, tuple(weights) if weights is not None else None)
        self.engine = RewardEngine(column=problem_column, allow_ungrounded=allow_ungrounded, budget_s=budget_s,
                                   workers=workers, scorer=scorer)
        self.__name__ = name or ("verifier" if variant == "fraction" else f"verifier_{variant}")
        self.stats_counter = RewardStats()
        self.unlogged_calls = 0  # calls that had no log_metric / log_extra sink: their rates are only in stats()

    @property
    def variant(self) -> str:
        return self.spec.variant

    @property
    def weights(self) -> list[float] | None:
        return list(self.spec.weights) if self.spec.weights is not None else None

    @property
    def problem_column(self) -> str:
        return self.engine.column

    @property
    def budget_s(self) -> float | None:
        return self.engine.budget_s

    @property
    def workers(self) -> int:
        return self.engine.workers

    @property
    def scorer(self) -> ScoreFn | None:
        return self.engine.scorer

    @property
    def seconds(self) -> float:
        """Wall time spent inside this reward's calls: its share of a GRPO step."""
        return self.stats_counter.seconds

    @property
    def calls(self) -> int:
        return self.stats_counter.calls

    @property
    def scored(self) -> int:
        return self.stats_counter.scored

    @property
    def unscorable(self) -> int:
        return self.stats_counter.unscorable

    @property
    def unscorable_reasons(self) -> dict[str, int]:
        return dict(self.stats_counter.reasons)

    def problem(self, raw: Any) -> PreparedProblem | str:
        """The prepared problem for a ``problem_json`` cell (cached by its text), or why there is none; raises
        :class:`UngroundedProblemError` for a problem the grounding rule refuses (unless allowed)."""
        got = prepared(self.engine, raw)
        if isinstance(got, str) and got.startswith(UNGROUNDED):
            raise UngroundedProblemError(got[len(UNGROUNDED):])
        return got

    def close(self) -> None:
        """Kill this reward's worker processes (shared with same-config rewards; a later call restarts them)."""
        self.engine.close()

    def score(self, completions: Any, problems: Any) -> list[RowResult]:
        """One :class:`~calver.verifier.Verdict` or :class:`~calver.verifier.Unscorable` per completion,
        counted in ``stats()``. Raises :class:`UngroundedProblemError` (the deliberate stop) unless allowed."""
        return self._score(completions, problems)[0]

    def _score(self, completions: Any, problems: Any) -> tuple[list[RowResult], dict[str, float]]:
        t0 = time.perf_counter()
        results = self.engine.score(completions, problems)
        for r in results:
            if isinstance(r, Unscorable) and r.reason.startswith(UNGROUNDED):
                raise UngroundedProblemError(r.reason[len(UNGROUNDED):])
        return results, self.stats_counter.add(results, time.perf_counter() - t0, budgeted=self.budget_s is not None)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), *,
                 log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None, **kwargs: Any) -> list[float | None]:
        results, metrics = self._score(completions, kwargs.get(self.problem_column))
        if log_metric is not None:
            for k, v in metrics.items():
                log_metric(k, v)
        elif log_extra is not None:  # no scalar sink: the per-sample bits go to the completions table
            for i, key in enumerate(BIT_KEYS):
                log_extra(f"verifier/{key}", [r.bits[i] if not isinstance(r, Unscorable) else None for r in results])
            log_extra("verifier/unscorable_reason", [r.reason if isinstance(r, Unscorable) else None for r in results])
        else:  # no sink at all: the rates stay in stats() and reach the log at INFO; say so once, loudly
            self.unlogged_calls += 1
            if self.unlogged_calls == 1:
                logger.warning("verifier reward %s: called without log_metric or log_extra (e.g. TRL's async "
                               "GRPO); per-bit pass rates are kept in .stats() and logged at INFO", self.__name__)
            logger.info("verifier reward %s: %s", self.__name__,
                        " ".join(f"{k.removeprefix('verifier/')}={v:.3f}" for k, v in metrics.items()))
        return [self.spec.reward(r) for r in results]

    def stats(self) -> dict[str, Any]:
        """Totals since construction: calls, scored/unscorable counts, reasons, per-bit pass rates, timeouts."""
        pool = self.engine.pool
        return {"reward": self.__name__, "variant": self.variant, "weights": self.weights,
                **self.stats_counter.snapshot(), "budget_s": self.budget_s, "workers": self.workers,
                "unlogged_calls": self.unlogged_calls, "pool": pool.stats() if pool is not None else None}


class AsyncVerifierReward(VerifierReward):
    """:class:`VerifierReward` as a coroutine: TRL awaits it beside the other async rewards of a step."""

    async def __call__(self, prompts: Sequence[Any] | None = None,  # type: ignore[override]
                       completions: Sequence[Any] = (), **kwargs: Any) -> list[float | None]:
        return await asyncio.to_thread(VerifierReward.__call__, self, prompts, completions, **kwargs)


# ---- module-level rewards for `trl grpo --reward_funcs calver.train.rewards.<name>` ------------------
_OPTS = RewardOptions.from_env()
_ENV = {"budget_s": _OPTS.budget_s, "workers": _OPTS.workers, "allow_ungrounded": _OPTS.allow_ungrounded}


def _bit_reward(slot: str) -> VerifierReward:
    """b_i alone, as a weighted reward with a one-hot weight (reward = the bit, 0.0 or 1.0)."""
    onehot = [1.0 if s == slot else 0.0 for s in SLOTS]
    return VerifierReward("weighted", weights=onehot, name=f"verifier_bit_{slot.lower()}", **_ENV)


verifier_reward = VerifierReward(_OPTS.variant, _OPTS.weights, name="verifier_reward", **_ENV)
verifier_reward_strict = VerifierReward("strict", name="verifier_reward_strict", **_ENV)
verifier_reward_validity = VerifierReward("validity", name="verifier_reward_validity", **_ENV)
verifier_reward_async = AsyncVerifierReward(_OPTS.variant, _OPTS.weights, name="verifier_reward_async", **_ENV)
verifier_bit_graph = _bit_reward("GRAPH")
verifier_bit_query = _bit_reward("QUERY")
verifier_bit_strategy = _bit_reward("STRATEGY")
verifier_bit_derivation = _bit_reward("DERIVATION")
verifier_bit_result = _bit_reward("RESULT")
verifier_bit_answer = _bit_reward("ANSWER")
BIT_REWARDS = (verifier_bit_graph, verifier_bit_query, verifier_bit_strategy, verifier_bit_derivation,
               verifier_bit_result, verifier_bit_answer)
