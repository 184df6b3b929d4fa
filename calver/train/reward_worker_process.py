"""The child side of :mod:`calver.train.reward_workers`: what a scoring worker process runs.

:func:`serve` reads chunks of ``(row, text, problem_json)`` from its socket, bumps the shared progress
counter (:data:`PROGRESS`, an mmap'd int64 the parent watches for the time budget) before each row,
loads each problem with :func:`load_problem` (the reward's own loader and grounding rule, so cold
problems are prepared in parallel) and sends back ``(row, outcome)`` batches. It exits when its parent
dies. Imports only ``calver.verifier`` and the scorer's module; never torch.
"""

from __future__ import annotations

import json
import mmap
import os
import pickle
import signal
import struct
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Callable

from calver.verifier import SLOTS, PreparedProblem, Problem, ProblemError, prepare
from calver.verifier.memo import Memo
from calver.verifier.prepared import problem_cost

ScoreFn = Callable[[str, PreparedProblem], Any]
Outcome = tuple[list[int] | None, str]  # (the six bits, "") or (None, why it is unscorable)

FLUSH_S = 0.005  # a worker sends its answers at least this often (and at the end of each chunk)
PROGRESS = struct.Struct("<q")  # one aligned int64 a worker sets before each row: rows started, ever

UNGROUNDED = "ungrounded problem: "  # a worker's reason prefix; the parent raises UngroundedProblemError on it


class UngroundedProblemError(ValueError):
    """A reward was asked for on a problem it cannot judge against a source (see ``is_grounded``)."""


def load_problem(text: str, column: str = "problem_json", allow_ungrounded: bool = False) -> PreparedProblem | str:
    """``prepare(Problem.from_dict(...))`` of a problem cell's JSON ``text`` (a dict cell arrives as its
    sorted JSON), or why it is unusable: validated as the CLI does at load (the family's checks of
    query and data), plus the grounding rule, which raises :class:`UngroundedProblemError` (a
    deliberate stop). Never raises otherwise. Workers prepare with it too, so both paths give one reason."""
    try:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            return f"{column} is not JSON: {e.msg}"
        except RecursionError:
            return f"{column} is JSON nested too deeply"
        except ValueError as e:  # CPython's 4,300-digit limit on integer literals
            return f"{column} is not readable JSON: {e}"[:200]
        if not isinstance(data, dict):
            return f"{column} holds a JSON {type(data).__name__}, not an object"
        try:
            prob = prepare(Problem.from_dict(data))
        except ProblemError as e:
            return f"malformed problem: {e}"[:300]
        except KeyError as e:
            return f"unregistered task: {e.args[0] if e.args else e}"[:300]
        except RecursionError:
            return "malformed problem: nested too deeply"
    except Exception as e:  # noqa: BLE001 - a hostile cell is an unscorable row, never a failed step
        return f"malformed problem: {type(e).__name__}: {e}"[:300]
    if not (allow_ungrounded or prob.grounded):
        raise UngroundedProblemError(
            f"problem {prob.id or '(no id)'} ({prob.task}) is in constructed mode without its source graph: "
            "its score would measure the trace's consistency with its own GRAPH, not correctness, and a "
            "policy can invent a graph that makes a wrong answer score 6/6. Keep the source graph in the "
            "problem (the generators do), or pass allow_ungrounded=True (calver train grpo: "
            "--allow_ungrounded_reward true) to train on such problems anyway")
    return prob


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


def score_row(scorer: ScoreFn, text: str, problem: PreparedProblem) -> Outcome:
    """One completion's bits through ``scorer``, or why it has none; never raises (a scorer bug makes
    one row unscorable, not a failed step). The in-process path and the workers share it."""
    try:
        ts = scorer(text, problem)
        bits = [int(b) for b in ts.bits]
    except Exception as e:  # noqa: BLE001 - a scorer bug: this row is unscorable (counted), the step goes on
        return None, f"scorer error: {type(e).__name__}: {e}"[:300]
    if len(bits) != len(SLOTS) or any(b not in (0, 1) for b in bits):
        return None, f"scorer error: bits {bits!r} are not six 0/1 values"[:300]
    return bits, ""


PROBLEM_CACHE = Memo("reward problem")  # (JSON, column, allow_ungrounded) -> prepared problem or why not


def _entry_cost(key: str, prob: PreparedProblem | str) -> int:
    """Bytes a cached problem is charged: its JSON text held as the key, plus the prepared copy."""
    return 1024 + 2 * len(key) + (0 if isinstance(prob, str) else problem_cost(prob.problem))


def cached_problem(key: str, column: str, allow_ungrounded: bool) -> PreparedProblem | str:
    """The prepared problem for a problem cell's JSON, or why not, through :data:`PROBLEM_CACHE` (inside the
    verifier's byte budget, so a run over many large problems cannot grow it past the budget). Raises
    :class:`UngroundedProblemError` as :func:`load_problem` does (that stop is not cached)."""
    ck = (key, column, allow_ungrounded)
    hit = PROBLEM_CACHE.get(ck)
    if hit is None:
        hit = load_problem(key, column, allow_ungrounded)
        PROBLEM_CACHE.put(ck, hit, _entry_cost(key, hit))
    return hit


def _prepared(key: str, column: str, allow_ungrounded: bool) -> PreparedProblem | str:
    """A worker's prepared problem for a problem cell's JSON, or why not (cached): the parent sends
    only the text, so preparing, the heavy part of a cold problem, runs in parallel here."""
    try:
        return cached_problem(key, column, allow_ungrounded)
    except UngroundedProblemError as e:
        return UNGROUNDED + str(e)


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
    """The worker loop: a scorer, then ``("score", [(row, text, key), ...])`` chunks. Before each row it
    bumps a shared counter (``progress_fd``, mapped by both sides), so the parent knows which row is
    running without a message per row; answers go back as ``("done", [(row, outcome), ...])`` every
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
        done: list[tuple[int, Outcome]] = []
        last = time.monotonic()
        _, items, column, allow_ungrounded = msg
        for row, text, key in items:
            if done and time.monotonic() - last >= FLUSH_S:
                conn.send(("done", done))
                done, last = [], time.monotonic()
            started += 1
            PROGRESS.pack_into(progress, 0, started)
            prob = _prepared(key, column, allow_ungrounded)
            done.append((row, (None, prob) if isinstance(prob, str) else score_row(scorer, text, prob)))
        conn.send(("done", done))
