"""Scorers the benchmarks hand to ``VerifierReward(scorer=...)`` (module-level: worker processes import them)."""

from __future__ import annotations

import time

from calver.verifier import score

HEAVY_CPU_S = 0.025  # CPU seconds a heavy row burns on top of the verifier's own work


def heavy_score(text: str, problem):
    """:func:`calver.verifier.score`, plus :data:`HEAVY_CPU_S` of pure-Python CPU work: a stand-in for rows
    that cost the verifier tens of milliseconds (long traces, exact ATE arithmetic, a user's own scorer)."""
    end = time.thread_time() + HEAVY_CPU_S
    x = 0
    while time.thread_time() < end:
        for i in range(1000):
            x += i * i
    return score(text, problem)
