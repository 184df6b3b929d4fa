"""The verifier as a TRL reward function.

``VerifierReward`` follows TRL 1.x's custom reward signature: ``reward(prompts, completions, **kwargs)``
where the dataset's columns arrive as kwargs (here ``problem_json``: one ``Problem.to_dict()`` JSON
string per completion) together with TRL's ``trainer_state``, ``log_metric`` and ``log_extra``.

- ``variant="fraction"`` (default): S/6, the fraction of the six verifier bits that pass.
- ``variant="strict"``: 1.0 only when all six bits pass, else 0.0.
- ``variant="weighted"``: sum(w_i * b_i) / sum(w_i) with per-bit ``weights`` (GRAPH..ANSWER order).

A completion that cannot be scored (no / malformed problem, unregistered task, unreadable
completion, a scorer crash, a problem column that does not pair with the completions) gets ``None``:
TRL then excludes it from the group baseline and gives it zero advantage. No cell or column shape
makes the call raise, so one bad row never fails a TRL step. Such items are counted (``unscorable`` /
``unscorable_reasons``) and logged as ``verifier/unscorable``; they are never silently scored 0.
Per-bit pass rates are logged each call as ``verifier/<slot>`` through ``log_metric`` (TRL averages
them per logging step). Where ``log_metric`` is absent (TRL's async GRPO passes neither sink), the
per-sample bits go to ``log_extra`` as ``verifier/<slot>`` columns if it is given, else they stay in
``stats()`` (cumulative pass rates, ``last_metrics``, ``unlogged_calls``) and an INFO log line per
call, with one warning saying so.

Time budget and workers: ``budget_s`` bounds each completion's scoring (wall clock); scoring then runs
in worker processes (:mod:`calver.train.reward_workers`), and a completion over budget is counted
(``verifier/timeouts``) while its stuck worker is killed and replaced; it works from any thread (no
SIGALRM). **Over budget means the floor, 0.0, in every adapter** (this reward, verl, OpenRLHF), and so does
a completion that crashed its worker: the completion itself made the verifier stall, so it gets what a
trace failing every bit gets. ``None`` (zero advantage under TRL) would let a policy escape the negative
advantage of a wrong answer by writing a trace that is slow to verify. ``None`` stays for rows that are
not the policy's doing (no or malformed problem, unreadable completion shape, unpaired columns).
``workers=N`` scores large groups on N processes (with or without a budget); the default (no budget,
``workers=0``) scores in-process. ``scorer`` replaces
:func:`calver.verifier.score` (a module-level ``scorer(text, prepared_problem)`` with ``.bits``: the
hook tests use to inject a slow scorer). Prepared problems are cached by their JSON in the verifier's
byte budget (:data:`calver.train.reward_worker_process.PROBLEM_CACHE`). Pickling drops the worker pool (TRL's
async GRPO ships rewards to a spawned process), which the copy rebuilds on first use. Rewards with the
same ``(workers, budget_s, scorer)`` share one pool in a process (the seven CLI rewards: one pool).
``outcomes(completions, problem_json)`` gives other adapters the six bits (or why not) per row.

Module-level rewards for ``trl grpo --reward_funcs calver.train.rewards.verifier_reward`` (TRL imports a
dotted path and names the reward by ``__name__``): ``verifier_reward`` (S/6), ``verifier_reward_strict``
(1 iff 6/6) and ``verifier_bit_graph`` ... ``verifier_bit_answer`` (b_i, for TRL's ``reward_weights``).
They read the ``problem_json`` column of a ``calver gen`` GRPO export; ``CALVER_REWARD_BUDGET_S`` and
``CALVER_REWARD_WORKERS`` (read at import) give them a budget and workers, since the CLI passes no
arguments to a reward function.

A constructed-mode problem without its source graph is refused with ``UngroundedProblemError`` (the run
stops): its score measures consistency with the trace's own graph, which a policy can invent. Pass
``allow_ungrounded=True`` to train on such problems knowingly.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterable, Sequence

from calver.train.reward_worker_process import cached_problem
from calver.train.reward_workers import (  # noqa: F401 - UngroundedProblemError: what this reward raises
    CRASHED,
    TIMEOUT,
    Outcome,
    ScoreFn,
    UngroundedProblemError,
    WorkerPool,
    check_budget,
    check_scorer,
    load_problem,
    score_row,
    shared_pool,
)
from calver.verifier import SLOTS, PreparedProblem, score

logger = logging.getLogger(__name__)

VARIANTS = ("fraction", "strict", "weighted")
POLICY_FAULTS = (TIMEOUT, CRASHED)  # unscorable because of the completion itself: the floor, 0.0 (see above)


def completion_text(completion: Any) -> str | None:
    """The text of a TRL completion: a string, or (conversational) a list of message dicts whose
    assistant contents are joined; content given as blocks contributes its ``text`` parts. None for
    any other shape (a text block whose ``text`` is not a string included)."""
    return read_completion(completion)[0]


def read_completion(completion: Any) -> tuple[str | None, str]:
    """``(text, "")``, or ``(None, why)`` for a completion that holds no readable text: a message that is no
    dict, a role that is no string, content that is neither text nor a list of content blocks (dicts), a
    text block whose text is no string, or no assistant message at all. Text comes back as an exact ``str``
    (a subclass's overridden methods never run later, in a worker pool or a length sum)."""
    if isinstance(completion, str):
        return str.__str__(completion), ""
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return None, f"unreadable completion (a {type(completion).__name__})"
    parts: list[str] = []
    spoke = False
    for msg in completion:
        if not isinstance(msg, dict):
            return None, f"unreadable completion (a message is a {type(msg).__name__})"
        role = msg.get("role", "assistant")
        if not isinstance(role, str):  # isinstance first: == on an odd object may raise
            return None, f"unreadable completion (a role is a {type(role).__name__})"
        if role != "assistant":
            continue
        spoke = True
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(str.__str__(content))
        elif isinstance(content, list):
            for b in content:
                if not isinstance(b, dict):
                    return None, f"unreadable completion (a content block is a {type(b).__name__})"
                kind = b.get("type", "text")
                if isinstance(kind, str) and kind == "text":
                    text = b.get("text", "")
                    if not isinstance(text, str):  # joining it would raise: the row is unscorable, not the batch
                        return None, f"unreadable completion (a text block holds a {type(text).__name__})"
                    parts.append(str.__str__(text))
        elif content is not None:
            return None, f"unreadable completion (content is a {type(content).__name__})"
    if not spoke:
        return None, "unreadable completion (no assistant message)"
    return "\n".join(parts), ""


MAX_ROWS = 1_000_000  # rows of one call read from an iterator (a list or tuple is taken as it is)


def _rows(value: Any) -> list[Any] | None:
    """A batch column as a list, or None when it is not a column of rows (a str, bytes, a mapping, an
    iterator past :data:`MAX_ROWS`)."""
    if isinstance(value, list):
        return value
    if isinstance(value, (str, bytes, bytearray, dict)):
        return None
    if isinstance(value, Sequence):
        return list(value)
    if isinstance(value, Iterable):  # a generator: read once, bounded
        try:
            rows = list(itertools.islice(value, MAX_ROWS + 1))
        except Exception:  # noqa: BLE001 - a column whose iteration fails is no column; the call must not raise
            return None
        return rows if len(rows) <= MAX_ROWS else None
    return None


class VerifierReward:
    """Callable TRL reward function backed by :func:`calver.verifier.score` (see the module docstring)."""

    def __init__(self, variant: str = "fraction", weights: Sequence[float] | None = None,
                 problem_column: str = "problem_json", name: str | None = None,
                 allow_ungrounded: bool = False, *, budget_s: float | None = None, workers: int = 0,
                 scorer: ScoreFn | None = None) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"reward variant must be one of {VARIANTS}, got {variant!r}")
        if variant == "weighted":
            if weights is None or len(weights) != len(SLOTS):
                raise ValueError(f"the weighted reward needs {len(SLOTS)} per-bit weights ({', '.join(SLOTS)}), "
                                 f"got {weights!r}")
            if any(w < 0 for w in weights) or sum(weights) <= 0:
                raise ValueError(f"per-bit weights must be >= 0 with a positive sum, got {list(weights)}")
        elif weights is not None:
            raise ValueError(f"per-bit weights apply only to variant 'weighted' (variant is {variant!r})")
        check_budget(budget_s)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        check_scorer(scorer)
        self.variant = variant
        self.weights = [float(w) for w in weights] if weights is not None else None
        self.problem_column = problem_column
        self.allow_ungrounded = bool(allow_ungrounded)
        self.__name__ = name or ("verifier" if variant == "fraction" else f"verifier_{variant}")
        self.budget_s = float(budget_s) if budget_s is not None else None
        # a budget needs a process to kill: it implies at least one worker
        self.workers = max(workers, 1) if budget_s is not None else workers
        self.scorer = scorer
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()  # async GRPO calls rewards from worker threads: counters stay exact
        self.calls = 0
        self.seconds = 0.0  # wall time inside __call__: the reward's share of a GRPO step
        self.scored = 0
        self.unscorable = 0
        self.unscorable_reasons: Counter[str] = Counter()
        self.bit_totals = [0] * len(SLOTS)
        self.last_metrics: dict[str, float] = {}
        self.unlogged_calls = 0  # calls that had no log_metric / log_extra sink: their rates are only in stats()

    # ---- pickling (TRL's async GRPO runs rewards in a spawned process) -------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_pool"] = None  # processes cannot travel; the copy starts its own pool on first use
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Kill this reward's worker processes (shared with same-config rewards; a later call restarts them)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # ---- problems ---------------------------------------------------------------------------
    def problem(self, raw: Any) -> PreparedProblem | str:
        """The prepared problem for a ``problem_json`` cell (cached by its string), or why there is none.
        Never raises for a bad cell; only ``UngroundedProblemError`` (a deliberate stop) escapes."""
        return self._entry(raw)[1]

    def _key(self, raw: Any) -> tuple[str, str]:
        """``(the cell's JSON text, "")``, or ``("", why)`` for a cell that cannot be JSON text."""
        if raw is None:
            return "", f"no {self.problem_column}"
        if isinstance(raw, dict):
            try:  # the cache key; a dict that is not JSON (non-str keys, sets, cycles) cannot be one
                return json.dumps(raw, sort_keys=True), ""
            except (TypeError, ValueError, RecursionError) as e:
                return "", f"{self.problem_column} dict is not JSON ({type(e).__name__})"
        if isinstance(raw, str):
            return raw, ""
        return "", f"{self.problem_column} is a {type(raw).__name__}, not JSON text"

    def _entry(self, raw: Any) -> tuple[str, PreparedProblem | str]:
        """``(key, prepared problem or why not)``, prepared in this process (cached by the key)."""
        key, why = self._key(raw)
        if why:
            return key, why
        return key, cached_problem(key, self.problem_column, self.allow_ungrounded)  # raises only the deliberate stop

    def reward_from_bits(self, bits: Sequence[int]) -> float:
        if self.variant == "strict":
            return 1.0 if all(bits) else 0.0
        if self.variant == "weighted":
            assert self.weights is not None
            return sum(w * b for w, b in zip(self.weights, bits)) / sum(self.weights)
        return sum(bits) / len(SLOTS)

    # ---- scoring ------------------------------------------------------------------------------
    def _score_rows(self, todo: list[tuple[str, str, PreparedProblem | None]]) -> list[Outcome]:
        """Outcomes of ``(text, key, problem)`` rows: in-process (problem prepared), or on the worker pool
        (problem None: each worker loads the key)."""
        if not todo:
            return []
        if not self.workers:
            scorer = self.scorer or score  # `score` looked up per call, so tests can patch this module's name
            return [score_row(scorer, text, prob) for text, _, prob in todo]  # type: ignore[arg-type]
        if self._pool is None or self._pool.closed:
            self._pool = shared_pool(self.workers, self.budget_s, self.scorer)
        return self._pool.map([(text, key) for text, key, _ in todo], self.problem_column, self.allow_ungrounded)

    # ---- the TRL entry point ------------------------------------------------------------------
    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), *,
                 log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list[Any]], None] | None = None, **kwargs: Any) -> list[float | None]:
        outcomes, metrics = self._run(completions, kwargs.get(self.problem_column),
                                      unlogged=log_metric is None and log_extra is None)
        if log_metric is not None:
            for k, v in metrics.items():
                log_metric(k, v)
        elif log_extra is not None:  # no scalar sink: the per-sample bits go to the completions table
            for i, slot in enumerate(SLOTS):
                log_extra(f"verifier/{slot.lower()}", [b[i] if b is not None else None for b, _ in outcomes])
            log_extra("verifier/unscorable_reason", [why or None for _, why in outcomes])
        else:  # no sink at all: the rates stay in stats() and reach the log at INFO; say so once, loudly
            if self.unlogged_calls == 1:
                logger.warning("verifier reward %s: called without log_metric or log_extra (e.g. TRL's async "
                               "GRPO); per-bit pass rates are kept in .stats() and .last_metrics and logged at "
                               "INFO", self.__name__)
            logger.info("verifier reward %s: %s", self.__name__,
                        " ".join(f"{k.removeprefix('verifier/')}={v:.3f}" for k, v in metrics.items()))
        return [self.reward_from_bits(b) if b is not None else 0.0 if why in POLICY_FAULTS else None
                for b, why in outcomes]

    def outcomes(self, completions: Sequence[Any], problems: Any) -> list[Outcome]:
        """Per row ``(bits, "")`` or ``(None, why)``, under this reward's budget and workers and counted in
        ``stats()`` like a call: for adapters that need the six bits, not the reward (verl, OpenRLHF, OpenEnv).
        ``problems`` is the ``problem_json`` column (one cell per completion)."""
        return self._run(completions, problems, unlogged=False)[0]

    def _run(self, completions: Any, raw_column: Any, unlogged: bool) -> tuple[list[Outcome], dict[str, float]]:
        t0 = time.perf_counter()
        comps = _rows(completions) if completions is not None else []
        if comps is None:  # not a batch: no rows to score, and no row count to answer with
            logger.warning("verifier reward: completions is a %s, not a list of completions",
                           type(completions).__name__)
            comps = []
        n = len(comps)
        column = [None] * n if raw_column is None else _rows(raw_column)
        shape_error = ""
        if column is None:
            shape_error = f"{self.problem_column} is a {type(raw_column).__name__}, not a column"
        elif len(column) != n:
            shape_error = f"{len(column)} {self.problem_column} values for {n} completions"
        if shape_error:  # rows cannot be paired with their problems: every row is unscorable
            column = [shape_error] * n
        rows: list[tuple[str, str, PreparedProblem | None] | str] = []  # per row: what to score, or why not
        for comp, raw in zip(comps, column):
            if shape_error:
                rows.append(shape_error)
                continue
            if self.workers:  # the workers prepare problems (in parallel); here only the cell's text is read
                key, prob = self._key(raw)
                prob = prob or None
            else:
                key, prob = self._entry(raw)
            text, why = read_completion(comp)
            rows.append(prob if isinstance(prob, str) else why if text is None else (text, key, prob))
        scored = iter(self._score_rows([r for r in rows if not isinstance(r, str)]))
        outcomes: list[Outcome] = [(None, r) if isinstance(r, str) else next(scored) for r in rows]
        with self._lock:
            metrics = self._count(outcomes)
            self.calls += 1
            self.seconds += time.perf_counter() - t0
            self.unlogged_calls += int(unlogged)
        return outcomes, metrics

    def _count(self, outcomes: list[Outcome]) -> dict[str, float]:
        """Add one call's outcomes to the totals (under the lock); its metrics."""
        bit_sums = [0] * len(SLOTS)
        n_scored = n_max = 0
        reasons: Counter[str] = Counter()
        for bits, why in outcomes:
            if bits is None:
                reasons[why] += 1
                continue
            n_scored += 1
            n_max += int(all(bits))
            for i, b in enumerate(bits):
                bit_sums[i] += b
        n_bad = len(outcomes) - n_scored
        self.scored += n_scored
        self.unscorable += n_bad
        self.unscorable_reasons.update(reasons)
        for i in range(len(SLOTS)):
            self.bit_totals[i] += bit_sums[i]
        if n_bad:
            logger.warning("verifier reward: %d of %d completions unscorable (%s)", n_bad, len(outcomes),
                           "; ".join(f"{r} x{c}" for r, c in reasons.most_common(3)))
        metrics = {"verifier/unscorable": float(n_bad)}
        if self.budget_s is not None:
            metrics["verifier/timeouts"] = float(reasons[TIMEOUT])
        if n_scored:
            metrics.update({f"verifier/{s.lower()}": bit_sums[i] / n_scored for i, s in enumerate(SLOTS)})
            metrics["verifier/total"] = sum(bit_sums) / n_scored
            metrics["verifier/max_score_rate"] = n_max / n_scored
        self.last_metrics = metrics
        return metrics

    def stats(self) -> dict[str, Any]:
        """Totals since construction: scored/unscorable counts, reasons, per-bit pass rates, timeouts."""
        rates = {s.lower(): (self.bit_totals[i] / self.scored if self.scored else None) for i, s in enumerate(SLOTS)}
        return {"reward": self.__name__, "variant": self.variant, "weights": self.weights, "calls": self.calls,
                "scored": self.scored, "unscorable": self.unscorable,
                "unscorable_reasons": dict(self.unscorable_reasons), "bit_pass_rates": rates,
                "seconds": self.seconds, "budget_s": self.budget_s, "workers": self.workers,
                "timeouts": self.unscorable_reasons.get(TIMEOUT, 0), "unlogged_calls": self.unlogged_calls,
                "last_metrics": dict(self.last_metrics),
                "pool": self._pool.stats() if self._pool is not None else None}


# ---- module-level rewards for `trl grpo --reward_funcs calver.train.rewards.<name>` ------------------
def _env_options() -> dict[str, Any]:
    """Budget and workers for the module-level rewards from the environment: TRL's CLI imports a reward
    by its dotted path and passes it no arguments. A malformed value stops the import (it is a config error)."""
    opts: dict[str, Any] = {}
    budget = os.environ.get("CALVER_REWARD_BUDGET_S", "").strip()
    if budget:
        try:
            opts["budget_s"] = float(budget)
        except ValueError:
            raise ValueError(f"CALVER_REWARD_BUDGET_S must be a number of seconds, got {budget!r}") from None
        if not math.isfinite(opts["budget_s"]) or opts["budget_s"] <= 0:
            raise ValueError(f"CALVER_REWARD_BUDGET_S must be positive, got {budget!r}")
    workers = os.environ.get("CALVER_REWARD_WORKERS", "").strip()
    if workers:
        if not workers.isdigit():
            raise ValueError(f"CALVER_REWARD_WORKERS must be a whole number, got {workers!r}")
        opts["workers"] = int(workers)
    return opts


def _bit_reward(slot: str) -> VerifierReward:
    """b_i alone, as a weighted reward with a one-hot weight (reward = the bit, 0.0 or 1.0)."""
    onehot = [1.0 if s == slot else 0.0 for s in SLOTS]
    return VerifierReward("weighted", weights=onehot, name=f"verifier_bit_{slot.lower()}", **_ENV)


_ENV = _env_options()
verifier_reward = VerifierReward("fraction", name="verifier_reward", **_ENV)
verifier_reward_strict = VerifierReward("strict", name="verifier_reward_strict", **_ENV)
verifier_bit_graph = _bit_reward("GRAPH")
verifier_bit_query = _bit_reward("QUERY")
verifier_bit_strategy = _bit_reward("STRATEGY")
verifier_bit_derivation = _bit_reward("DERIVATION")
verifier_bit_result = _bit_reward("RESULT")
verifier_bit_answer = _bit_reward("ANSWER")
BIT_REWARDS = (verifier_bit_graph, verifier_bit_query, verifier_bit_strategy, verifier_bit_derivation,
               verifier_bit_result, verifier_bit_answer)
