"""The one place where a verdict becomes a reward.

``RewardSpec(variant, weights)``: ``fraction`` (S/6), ``strict`` (1.0 only at 6/6), ``weighted``
(sum w_i b_i / sum w_i with per-bit ``weights`` in slot order) and ``validity`` (weighted with
:data:`VALIDITY_WEIGHTS`: STRATEGY and ANSWER, the bits that say whether the answer is a valid one, carry
two thirds of the reward, so a policy cannot earn most of it on format alone).

Unscorable rows (:meth:`RewardSpec.reward`): a row the completion itself made unscorable (over its time
budget, a crashed worker: :data:`POLICY_FAULTS`) gets the floor, 0.0, as a trace failing every bit would;
``None`` would let a policy escape the negative advantage of a wrong answer by writing a trace that is slow
to verify. Any other unscorable row (no or malformed problem, an unreadable completion) is not the
policy's doing: ``None`` (TRL drops it from the group baseline), or :data:`UNSCORABLE_REWARD` (0.0) for
trainers that need a number per row (:meth:`RewardSpec.number`): 0.0 is what a garbage trace earns, so an
unscorable row never out-earns an honest attempt, and NaN would poison a group's mean and std.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from calver.verifier import SLOTS, RowResult, Unscorable

VARIANTS = ("fraction", "strict", "weighted", "validity")
VALIDITY_WEIGHTS: tuple[float, ...] = (1.0, 1.0, 4.0, 1.0, 1.0, 8.0)  # GRAPH QUERY STRATEGY DERIVATION RESULT ANSWER
UNSCORABLE_REWARD = 0.0
TIMEOUT = "timeout"
CRASHED = "worker crashed"
POLICY_FAULTS = (TIMEOUT, CRASHED)  # unscorable because of the completion itself: the floor, 0.0


@dataclass(frozen=True)
class RewardSpec:
    """How six bits become one number (see the module docstring). Raises ``ValueError`` when built with a
    variant or weights that do not fit."""

    variant: str = "fraction"
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"reward variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.variant == "weighted":
            w = self.weights
            if w is None or len(w) != len(SLOTS):
                raise ValueError(f"the weighted reward needs {len(SLOTS)} per-bit weights ({', '.join(SLOTS)}), "
                                 f"got {w!r}")
            try:
                ws = tuple(float(x) for x in w)
            except (TypeError, ValueError):
                raise ValueError(f"per-bit weights must be numbers, got {list(w)!r}") from None
            if any(not math.isfinite(x) or x < 0 for x in ws) or sum(ws) <= 0:
                raise ValueError(f"per-bit weights must be finite and >= 0 with a positive sum, got {list(ws)}")
            object.__setattr__(self, "weights", ws)
        elif self.weights is not None:
            raise ValueError(f"per-bit weights apply only to variant 'weighted' (variant is {self.variant!r})")

    @property
    def bit_weights(self) -> tuple[float, ...] | None:
        return VALIDITY_WEIGHTS if self.variant == "validity" else self.weights

    def value(self, bits: Sequence[int]) -> float:
        """The reward of six bits."""
        if self.variant == "strict":
            return 1.0 if all(bits) else 0.0
        w = self.bit_weights
        if w is not None:
            return sum(wi * b for wi, b in zip(w, bits)) / sum(w)
        return sum(bits) / len(SLOTS)

    def reward(self, result: RowResult) -> float | None:
        """A row's reward: the verdict's value; 0.0 for a policy fault; None for any other unscorable row."""
        if isinstance(result, Unscorable):
            return UNSCORABLE_REWARD if result.reason in POLICY_FAULTS else None
        return self.value(result.bits)

    def number(self, result: RowResult) -> float:
        """:meth:`reward`, with :data:`UNSCORABLE_REWARD` for every unscorable row (trainers without None)."""
        r = self.reward(result)
        return UNSCORABLE_REWARD if r is None else r


__all__ = ["CRASHED", "POLICY_FAULTS", "TIMEOUT", "UNSCORABLE_REWARD", "VALIDITY_WEIGHTS", "VARIANTS", "RewardSpec"]
