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
them per logging step).

A constructed-mode problem without its source graph is refused with ``UngroundedProblemError`` (the run
stops): its score measures consistency with the trace's own graph, which a policy can invent. Pass
``allow_ungrounded=True`` to train on such problems knowingly.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any, Callable, Sequence

from calver.verifier import SLOTS, PreparedProblem, Problem, ProblemError, prepare, score

logger = logging.getLogger(__name__)

VARIANTS = ("fraction", "strict", "weighted")
_CACHE_LIMIT = 50_000


def completion_text(completion: Any) -> str | None:
    """The text of a TRL completion: a string, or (conversational) a list of message dicts whose
    assistant contents are joined; content given as blocks contributes its ``text`` parts. None for
    any other shape (a text block whose ``text`` is not a string included)."""
    return read_completion(completion)[0]


def read_completion(completion: Any) -> tuple[str | None, str]:
    """``(text, "")``, or ``(None, why)`` for a completion that holds no readable text."""
    if isinstance(completion, str):
        return completion, ""
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return None, f"unreadable completion (a {type(completion).__name__})"
    parts: list[str] = []
    for msg in completion:
        if not isinstance(msg, dict):
            return None, f"unreadable completion (a message is a {type(msg).__name__})"
        role = msg.get("role", "assistant")
        if not isinstance(role, str) or role != "assistant":  # isinstance first: == on an odd object may raise
            continue
        content = msg.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for b in content:
                kind = b.get("type", "text") if isinstance(b, dict) else None
                if isinstance(kind, str) and kind == "text":
                    text = b.get("text", "")
                    if not isinstance(text, str):  # joining it would raise: the row is unscorable, not the batch
                        return None, f"unreadable completion (a text block holds a {type(text).__name__})"
                    parts.append(text)
        elif content is not None:
            return None, f"unreadable completion (content is a {type(content).__name__})"
    return "\n".join(parts), ""


def _rows(value: Any) -> list[Any] | None:
    """A batch column as a list, or None when it is not a sequence of rows (a str, bytes, a mapping)."""
    if isinstance(value, list):
        return value
    if isinstance(value, (str, bytes, bytearray, dict)) or not isinstance(value, Sequence):
        return None
    return list(value)


class UngroundedProblemError(ValueError):
    """A reward was asked for on a problem it cannot judge against a source (see ``is_grounded``)."""


class VerifierReward:
    """Callable TRL reward function backed by :func:`calver.verifier.score`."""

    def __init__(self, variant: str = "fraction", weights: Sequence[float] | None = None,
                 problem_column: str = "problem_json", name: str | None = None,
                 allow_ungrounded: bool = False) -> None:
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
        self.variant = variant
        self.weights = [float(w) for w in weights] if weights is not None else None
        self.problem_column = problem_column
        self.allow_ungrounded = bool(allow_ungrounded)
        self.__name__ = name or ("verifier" if variant == "fraction" else f"verifier_{variant}")
        self._problems: dict[str, PreparedProblem | str] = {}  # JSON -> prepared problem, or why it is unusable
        self.calls = 0
        self.seconds = 0.0  # wall time inside __call__: the reward's share of a GRPO step
        self.scored = 0
        self.unscorable = 0
        self.unscorable_reasons: Counter[str] = Counter()
        self.bit_totals = [0] * len(SLOTS)
        self.last_metrics: dict[str, float] = {}

    # ---- problems ---------------------------------------------------------------------------
    def problem(self, raw: Any) -> PreparedProblem | str:
        """The prepared problem for a ``problem_json`` cell (cached by its string), or why there is none.
        Never raises for a bad cell; only ``UngroundedProblemError`` (a deliberate stop) escapes."""
        if raw is None:
            return f"no {self.problem_column}"
        if isinstance(raw, dict):
            try:  # the cache key; a dict that is not JSON (non-str keys, sets, cycles) cannot be one
                key = json.dumps(raw, sort_keys=True)
            except (TypeError, ValueError, RecursionError) as e:
                return f"{self.problem_column} dict is not JSON ({type(e).__name__})"
        elif isinstance(raw, str):
            key = raw
        else:
            return f"{self.problem_column} is a {type(raw).__name__}, not JSON text"
        hit = self._problems.get(key)
        if hit is not None:
            return hit
        try:
            prob = self._load(key)
        except UngroundedProblemError:
            raise
        except Exception as e:  # noqa: BLE001 - a hostile cell is an unscorable row, never a failed step
            prob = f"malformed problem: {type(e).__name__}: {e}"[:300]
        if len(self._problems) >= _CACHE_LIMIT:
            self._problems.clear()
        self._problems[key] = prob
        return prob

    def _load(self, text: str) -> PreparedProblem | str:
        """``prepare(Problem.from_dict(...))`` of the JSON ``text`` (a dict cell arrives as its key):
        validated as the CLI does at load (the family's checks of query and data), plus the grounding rule."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            return f"{self.problem_column} is not JSON: {e.msg}"
        except RecursionError:
            return f"{self.problem_column} is JSON nested too deeply"
        except ValueError as e:  # CPython's 4,300-digit limit on integer literals
            return f"{self.problem_column} is not readable JSON: {e}"[:200]
        if not isinstance(data, dict):
            return f"{self.problem_column} holds a JSON {type(data).__name__}, not an object"
        try:
            prob = prepare(Problem.from_dict(data))
        except ProblemError as e:
            return f"malformed problem: {e}"[:300]
        except KeyError as e:
            return f"unregistered task: {e.args[0] if e.args else e}"[:300]
        except RecursionError:
            return "malformed problem: nested too deeply"
        if not (self.allow_ungrounded or prob.grounded):
            raise UngroundedProblemError(
                f"problem {prob.id or '(no id)'} ({prob.task}) is in constructed mode without its source graph: "
                "its score would measure the trace's consistency with its own GRAPH, not correctness, and a "
                "policy can invent a graph that makes a wrong answer score 6/6. Keep the source graph in the "
                "problem (the generators do), or pass allow_ungrounded=True (calver train grpo: "
                "--allow_ungrounded_reward true) to train on such problems anyway")
        return prob

    def reward_from_bits(self, bits: Sequence[int]) -> float:
        if self.variant == "strict":
            return 1.0 if all(bits) else 0.0
        if self.variant == "weighted":
            assert self.weights is not None
            return sum(w * b for w, b in zip(self.weights, bits)) / sum(self.weights)
        return sum(bits) / len(SLOTS)

    # ---- the TRL entry point ------------------------------------------------------------------
    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), *,
                 log_metric: Callable[[str, float], None] | None = None, **kwargs: Any) -> list[float | None]:
        self.calls += 1
        t0 = time.perf_counter()
        comps = _rows(completions) if completions is not None else []
        if comps is None:  # not a batch: no rows to score, and no row count to answer with
            logger.warning("verifier reward: completions is a %s, not a list of completions",
                           type(completions).__name__)
            comps = []
        n = len(comps)
        raw_column = kwargs.get(self.problem_column)
        column = [None] * n if raw_column is None else _rows(raw_column)
        shape_error = ""
        if column is None:
            shape_error = f"{self.problem_column} is a {type(raw_column).__name__}, not a column"
        elif len(column) != n:
            shape_error = f"{len(column)} {self.problem_column} values for {n} completions"
        if shape_error:  # rows cannot be paired with their problems: every row is unscorable
            column = [shape_error] * n
        rewards: list[float | None] = []
        bit_sums = [0] * len(SLOTS)
        n_scored = n_bad = n_max = 0
        for comp, raw in zip(comps, column):
            prob = shape_error or self.problem(raw)
            text, why = read_completion(comp)
            reason = prob if isinstance(prob, str) else (None if text is not None else why)
            if reason is None:
                try:
                    ts = score(text, prob)
                except Exception as e:  # noqa: BLE001 - a scorer bug: this row is unscorable (counted, logged), the step goes on
                    reason = f"scorer error: {type(e).__name__}: {e}"[:300]
            if reason is not None:
                rewards.append(None)
                n_bad += 1
                self.unscorable_reasons[reason] += 1
                continue
            rewards.append(self.reward_from_bits(ts.bits))
            n_scored += 1
            n_max += int(all(ts.bits))
            for i, b in enumerate(ts.bits):
                bit_sums[i] += b
        self.scored += n_scored
        self.unscorable += n_bad
        for i in range(len(SLOTS)):
            self.bit_totals[i] += bit_sums[i]
        if n_bad:
            logger.warning("verifier reward: %d of %d completions unscorable (%s)", n_bad, n,
                           "; ".join(f"{r} x{c}" for r, c in self.unscorable_reasons.most_common(3)))
        metrics = {"verifier/unscorable": float(n_bad)}
        if n_scored:
            metrics.update({f"verifier/{s.lower()}": bit_sums[i] / n_scored for i, s in enumerate(SLOTS)})
            metrics["verifier/total"] = sum(bit_sums) / n_scored
            metrics["verifier/max_score_rate"] = n_max / n_scored
        self.last_metrics = metrics
        self.seconds += time.perf_counter() - t0
        if log_metric is not None:
            for k, v in metrics.items():
                log_metric(k, v)
        return rewards

    def stats(self) -> dict[str, Any]:
        """Totals since construction: scored/unscorable counts, reasons, per-bit pass rates."""
        rates = {s.lower(): (self.bit_totals[i] / self.scored if self.scored else None) for i, s in enumerate(SLOTS)}
        return {"reward": self.__name__, "variant": self.variant, "weights": self.weights, "calls": self.calls,
                "scored": self.scored, "unscorable": self.unscorable,
                "unscorable_reasons": dict(self.unscorable_reasons), "bit_pass_rates": rates,
                "seconds": self.seconds}
