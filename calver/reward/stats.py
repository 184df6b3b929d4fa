"""One counter for every reward path: scored and unscorable rows, reasons, per-bit pass rates. Thread-safe."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any, Sequence

from calver.reward.spec import TIMEOUT
from calver.verifier import BIT_KEYS, SLOTS, RowResult, Unscorable

logger = logging.getLogger("calver.reward")


class RewardStats:
    """Totals since construction (or :meth:`reset`); :meth:`add` returns one call's metrics, keyed
    ``verifier/<slot>``, ``verifier/total``, ``verifier/max_score_rate``, ``verifier/unscorable`` (and
    ``verifier/timeouts`` when ``budgeted``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def __getstate__(self) -> dict[str, Any]:  # a lock cannot be pickled (TRL's async GRPO pickles rewards)
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.calls = 0
            self.seconds = 0.0
            self.scored = 0
            self.unscorable = 0
            self.reasons: Counter[str] = Counter()
            self.bit_totals = [0] * len(SLOTS)
            self.last_metrics: dict[str, float] = {}

    def add(self, results: Sequence[RowResult], seconds: float = 0.0, budgeted: bool = False) -> dict[str, float]:
        bit_sums = [0] * len(SLOTS)
        n_scored = n_max = 0
        reasons: Counter[str] = Counter()
        for r in results:
            if isinstance(r, Unscorable):
                reasons[r.reason] += 1
                continue
            n_scored += 1
            n_max += int(all(r.bits))
            for i, b in enumerate(r.bits):
                bit_sums[i] += b
        n_bad = len(results) - n_scored
        metrics = {"verifier/unscorable": float(n_bad)}
        if budgeted:
            metrics["verifier/timeouts"] = float(reasons[TIMEOUT])
        if n_scored:
            metrics.update({f"verifier/{k}": bit_sums[i] / n_scored for i, k in enumerate(BIT_KEYS)})
            metrics["verifier/total"] = sum(bit_sums) / n_scored
            metrics["verifier/max_score_rate"] = n_max / n_scored
        with self._lock:
            self.calls += 1
            self.seconds += seconds
            self.scored += n_scored
            self.unscorable += n_bad
            self.reasons.update(reasons)
            for i in range(len(SLOTS)):
                self.bit_totals[i] += bit_sums[i]
            self.last_metrics = metrics
        if n_bad:
            logger.warning("calver reward: %d of %d rows unscorable (%s)", n_bad, len(results),
                           "; ".join(f"{r} x{c}" for r, c in reasons.most_common(3)))
        return metrics

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            n = self.scored
            return {"calls": self.calls, "seconds": self.seconds, "scored": n, "unscorable": self.unscorable,
                    "unscorable_reasons": dict(self.reasons), "timeouts": self.reasons.get(TIMEOUT, 0),
                    "bit_pass_rates": {k: (self.bit_totals[i] / n if n else None) for i, k in enumerate(BIT_KEYS)},
                    "last_metrics": dict(self.last_metrics)}


__all__ = ["RewardStats"]
