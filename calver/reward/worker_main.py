"""The child side of :mod:`calver.reward.workers`: what a scoring worker process runs, and the one function
that turns a scorer's output into a row's result (:func:`score_row`, shared with the in-process path).

:func:`serve` reads chunks of ``(token, text, problem_json, column, allow_ungrounded)`` from its socket,
bumps the shared progress counter (:data:`PROGRESS`, an mmap'd int64 the parent watches for the time
budget) before each row, loads each problem through :mod:`calver.reward.problems` (the reward's own
loader and grounding rule, so cold problems are prepared in parallel) and sends back ``(token, result)``
batches, each result a stored :class:`~calver.verifier.Verdict` or an :class:`~calver.verifier.Unscorable`.
It exits when its parent dies. Imports only ``calver.verifier``, ``calver.reward`` and the scorer's
module; never torch.
"""

from __future__ import annotations

import mmap
import os
import pickle
import signal
import struct
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Callable

from calver.reward.problems import prepared_or_reason
from calver.verifier import SLOTS, PreparedProblem, RowResult, Unscorable, Verdict

ScoreFn = Callable[[str, PreparedProblem], Any]

FLUSH_S = 0.005  # a worker sends its answers at least this often (and at the end of each chunk)
PROGRESS = struct.Struct("<q")  # one aligned int64 a worker sets before each row: rows started, ever

def check_scorer(scorer: ScoreFn | None) -> None:
    """Refuse a scorer a worker cannot receive (a lambda, a closure): the error names it at setup,
    not at the first reward call."""
    if scorer is None:
        return
    if not callable(scorer):
        raise ValueError(f"scorer must be callable, got {type(scorer).__name__}")
    try:
        pickle.dumps(scorer)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise ValueError(f"scorer {scorer!r} is not picklable by reference ({e}); worker processes import it, "
                         "so pass a module-level function") from None


def score_row(scorer: ScoreFn, text: str, problem: PreparedProblem) -> RowResult:
    """One completion's verdict through ``scorer`` (stored form: no parse travels), or why it has none;
    never raises (a scorer bug makes one row unscorable, not a failed step)."""
    try:
        ts = scorer(text, problem)
        bits = [int(b) for b in ts.bits]
    except Exception as e:  # noqa: BLE001 - a scorer bug: this row is unscorable (counted), the step goes on
        return Unscorable(f"scorer error: {type(e).__name__}: {e}"[:300])
    if len(bits) != len(SLOTS) or any(b not in (0, 1) for b in bits):
        return Unscorable(f"scorer error: bits {bits!r} are not six 0/1 values"[:300])
    if isinstance(ts, Verdict):
        return ts.stored()
    return Verdict(bits, task=problem.task, grounded=problem.grounded)  # a test scorer's plain bits


def _watch_parent() -> None:
    """Exit when the parent is gone (it was killed before it could reap us): a worker stuck in a long
    score would otherwise outlive the run."""
    parent = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=loop, name="calver-reward-parent-watch", daemon=True).start()


def serve(conn: Connection, progress_fd: int) -> None:
    """The worker loop: a scorer, then ``("score", [(token, text, key, column, allow_ungrounded), ...])``
    chunks. Before each row it bumps a shared counter (``progress_fd``, mapped by both sides), so the parent
    knows which row is running without a message per row; answers go back as ``("done", [(token, result),
    ...])`` every
    ``FLUSH_S`` and at the end of each chunk."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us
    _watch_parent()
    try:
        progress = mmap.mmap(progress_fd, PROGRESS.size)
        scorer = conn.recv()
        if scorer is None:
            from calver.verifier import score as scorer
    except BaseException as e:  # noqa: BLE001 - any failure to start is reported, then the worker exits
        conn.send(("fatal", f"{type(e).__name__}: {e}"[:500]))
        return
    conn.send(("ready", os.getpid()))
    started = 0
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent closed our socket: the pool is gone
            return
        if msg[0] != "score":
            return
        done: list[tuple[int, RowResult]] = []
        last = time.monotonic()
        for row, text, key, column, allow_ungrounded in msg[1]:
            if done and time.monotonic() - last >= FLUSH_S:
                conn.send(("done", done))
                done, last = [], time.monotonic()
            started += 1
            PROGRESS.pack_into(progress, 0, started)
            prob = prepared_or_reason(key, column, allow_ungrounded)
            done.append((row, Unscorable(prob) if isinstance(prob, str) else score_row(scorer, text, prob)))
        conn.send(("done", done))
