"""Reward options from arguments and from the environment: one parser, one error policy.

A value that does not parse is a configuration error and raises ``ValueError`` naming the option (or the
environment variable): the module-level TRL rewards and the OpenRLHF reward file read the environment at
import, so a typo stops the run before its first step instead of silently training on another reward.
verl passes ``reward_kwargs`` with every call; a bad one raises there, and verl stops the run with it.

Environment variables (for trainers that pass no arguments to a reward: ``trl grpo --reward_funcs``,
OpenRLHF's reward file): :data:`ENV_VARIANT`, :data:`ENV_WEIGHTS` (six comma-separated numbers),
:data:`ENV_BUDGET`, :data:`ENV_WORKERS`, :data:`ENV_ALLOW_UNGROUNDED`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Mapping

from calver.reward.spec import RewardSpec

ENV_VARIANT = "CALVER_REWARD_VARIANT"
ENV_WEIGHTS = "CALVER_REWARD_WEIGHTS"
ENV_BUDGET = "CALVER_REWARD_BUDGET_S"
ENV_WORKERS = "CALVER_REWARD_WORKERS"
ENV_ALLOW_UNGROUNDED = "CALVER_REWARD_ALLOW_UNGROUNDED"
_ENV = {"variant": ENV_VARIANT, "weights": ENV_WEIGHTS, "budget_s": ENV_BUDGET, "workers": ENV_WORKERS,
        "allow_ungrounded": ENV_ALLOW_UNGROUNDED}
FIELDS = tuple(_ENV)
MAX_WORKERS = 256


@dataclass(frozen=True)
class RewardOptions:
    """``variant``/``weights`` (the :class:`RewardSpec`), ``budget_s`` (per-completion wall-clock budget:
    scoring runs in worker processes), ``workers`` (scoring processes; 0 = in-process, at least 1 with a
    budget) and ``allow_ungrounded`` (score problems without a source to judge on)."""

    variant: str = "fraction"
    weights: tuple[float, ...] | None = None
    budget_s: float | None = None
    workers: int = 0
    allow_ungrounded: bool = False

    def __post_init__(self) -> None:
        RewardSpec(self.variant, self.weights)  # raises on a variant or weights that do not fit
        if self.budget_s is not None and (isinstance(self.budget_s, bool) or not isinstance(self.budget_s, (int, float))
                                          or not math.isfinite(self.budget_s) or self.budget_s <= 0):
            raise ValueError(f"budget_s must be a positive number of seconds or None, got {self.budget_s!r}")
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or not 0 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be a whole number in 0..{MAX_WORKERS}, got {self.workers!r}")

    @cached_property
    def spec(self) -> RewardSpec:  # built (and validated) once per options object, not per row
        return RewardSpec(self.variant, self.weights)

    @property
    def pool_workers(self) -> int:
        """Worker processes to score on: a budget needs a process to kill, so it implies at least one."""
        return max(self.workers, 1) if self.budget_s is not None else self.workers

    @classmethod
    def parse(cls, values: Mapping[str, Any], base: RewardOptions | None = None,
              names: Mapping[str, str] | None = None) -> RewardOptions:
        """``base`` (default: the defaults) with the options in ``values`` (other keys are ignored; a None
        value keeps the base's). Raises ``ValueError`` naming the option (``names[key]`` if given)."""
        out = base or cls()
        changes: dict[str, Any] = {}
        for key in FIELDS:
            raw = values.get(key)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            label = (names or {}).get(key, key)
            try:
                changes[key] = _READ[key](raw)
            except (TypeError, ValueError, OverflowError) as e:
                raise ValueError(f"reward option {label}={raw!r}: {e}") from None
        try:
            return replace(out, **changes)
        except ValueError as e:
            raise ValueError(f"reward options {', '.join((names or {}).get(k, k) for k in changes)}: {e}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RewardOptions:
        """The options in the ``CALVER_REWARD_*`` environment variables (raises naming the variable)."""
        env = os.environ if environ is None else environ
        return cls.parse({k: env.get(v) for k, v in _ENV.items()}, names=_ENV)


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("not a boolean (true/false)")


def _weights(raw: Any) -> tuple[float, ...]:
    parts = raw.split(",") if isinstance(raw, str) else list(raw)
    return tuple(float(x) for x in parts)


def _whole(raw: Any) -> int:
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise ValueError("not a whole number")
    if isinstance(raw, str) and not raw.strip().isdigit():
        raise ValueError("not a whole number")
    return int(raw)


def _seconds(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError("not a number of seconds")
    return float(raw)


_READ = {"variant": lambda raw: str(raw).strip(), "weights": _weights, "budget_s": _seconds, "workers": _whole,
         "allow_ungrounded": _bool}

__all__ = ["ENV_ALLOW_UNGROUNDED", "ENV_BUDGET", "ENV_VARIANT", "ENV_WEIGHTS", "ENV_WORKERS", "FIELDS", "RewardOptions"]
