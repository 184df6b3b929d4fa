"""GRPO prompts filtered to mixed groups: GRPO learns only from a group whose rewards differ.

A policy that answers a problem right every time (or never) gives a group of equal rewards, hence zero
advantages and no gradient; TRL logs the share of such groups (``frac_reward_zero_std``) but still spends
generation on them. :func:`mixed_problem_ids` reads a pool the starting policy sampled on *training*
problems (``calver sample``; K candidates each) and keeps the problems whose candidates' rewards, under the
GRPO run's own reward, are not all equal (DAPO's dynamic sampling, done once, offline).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from calver.reward.spec import RewardSpec


def mixed_problem_ids(pool_dir: str, spec: RewardSpec) -> tuple[set[str], dict[str, int]]:
    """Ids of the pool's problems whose candidates get at least two different rewards, and counts
    (``problems``, ``mixed``, ``all_same``). The bits come from the pool's score table (scored once, stored
    beside it) where they were grounded; a candidate the firewall view cannot ground is scored on its source."""
    from calver.infer.pool import PoolError
    from calver.infer.score_table import source_verdicts

    try:
        verdicts = source_verdicts(pool_dir)
    except PoolError as e:
        raise ValueError(str(e)) from None  # names the pool and what is wrong with it
    rewards: dict[str, set[float]] = defaultdict(set)
    for row, _, verdict in verdicts:
        rewards[row["problem_id"]].add(spec.value(verdict.bits))
    mixed = {pid for pid, values in rewards.items() if len(values) > 1}
    return mixed, {"problems": len(rewards), "mixed": len(mixed), "all_same": len(rewards) - len(mixed)}


def keep_mixed(dataset: Any, ids: set[str], column: str) -> Any:
    """The dataset's rows whose problem (JSON in ``column``) is among ``ids``."""
    return dataset.filter(lambda row: json.loads(row[column]).get("id") in ids)


__all__ = ["keep_mixed", "mixed_problem_ids"]
