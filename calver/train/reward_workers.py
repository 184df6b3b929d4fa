"""Verifier scoring in worker processes, with a per-completion time budget that cannot stall a run.

A reward that hangs on one completion freezes a GRPO step (verl#6673), and ``signal.alarm`` cannot
help: it works only on the main thread, and TRL's async GRPO calls rewards through
``asyncio.to_thread``. So :class:`WorkerPool` scores in child processes and watches the clock from
the calling thread. Each worker bumps a shared counter (an mmap'd int64) before every row, so the
parent knows which row runs without a message per row; answers come back in batches. A row seen
running past ``budget_s`` gets ``(None, "timeout")`` within the budget plus one sampling interval
(a tenth of it, at most 50 ms); the stuck child is killed (SIGKILL: a C loop ignores anything else)
and replaced, and its other rows go to the queue again. A child that dies (segfault, OOM kill) costs
its current row ``(None, "worker crashed")`` the same way. Workers load the problem JSON themselves
(:mod:`calver.train.reward_worker_process`, the reward's own loader), so cold problems are
prepared in parallel.

Workers are ``python -c`` children of :mod:`subprocess`, not :mod:`multiprocessing`: spawn and
forkserver re-run the parent's ``__main__`` in every child (under ``trl grpo``, TRL's training
script: torch and trl per worker), and fork copies a threaded, CUDA-holding trainer. A child imports
only ``calver.verifier``, :mod:`calver.train.reward_worker_process` and the scorer's module, on the
parent's ``sys.path`` (sent first, as spawn does). Messages are pickles over a socketpair. POSIX only.
Never imports torch.

The scorer hook: ``scorer(text, prepared_problem)`` returning an object with ``.bits`` (six 0/1),
:func:`calver.verifier.score` by default; module-level (workers import it by reference): tests
inject a deliberately slow one this way. Budgets are wall-clock: a loaded machine can time out a
row that would have passed; pick one far above the verifier's p99 (``benchmarks/latency_bench.py``).
"""

from __future__ import annotations

import math
import mmap
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Sequence

from calver.train.reward_worker_process import (  # noqa: F401 - load_problem etc. are this module's API too
    FLUSH_S,
    PROGRESS,
    UNGROUNDED,
    Outcome,
    ScoreFn,
    UngroundedProblemError,
    check_scorer,
    load_problem,
    score_row,
)

TIMEOUT = "timeout"
CRASHED = "worker crashed"
MAX_CHUNK = 32  # rows per message: few enough that a killed worker's leftovers are cheap to redo
_SOCKET_BUFFER = 1 << 20  # asked for (the kernel may cap it); a second chunk is queued to a busy worker only
# if it fits a quarter of what was granted, so the parent never blocks writing to a stuck worker
_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

# The child's entry: the parent's sys.path arrives before anything of calver is imported.
_BOOT = ("import sys\n"
         "from multiprocessing.connection import Connection\n"
         "c = Connection(int(sys.argv[1]))\n"
         "p = c.recv()\n"
         "sys.path[:] = p + [e for e in sys.path if e not in p]\n"
         "from calver.train.reward_worker_process import serve\n"
         "serve(c, int(sys.argv[2]))\n")


class WorkerStartError(RuntimeError):
    """A scoring worker could not start (its scorer did not import, the interpreter failed)."""


@dataclass(eq=False)  # identity: the pool finds a worker by `is`/index, never by field equality
class _Worker:
    proc: subprocess.Popen
    conn: Connection
    progress: mmap.mmap  # the worker's rows-started counter
    since: float  # when it was started (the start-up deadline)
    ready: bool = False
    queue: deque[int] = field(default_factory=deque)  # rows sent and not answered, in the order it scores them
    answered: int = 0  # rows it has answered, ever: counter value answered + 1 + k means queue[k] is running
    seen: int = 0  # the counter value last read ...
    seen_at: float = 0.0  # ... and when the parent first read it: a row runs at least now - seen_at

    def current(self) -> int | None:
        """The row it is scoring now, or None (between rows, or a torn read of the counter)."""
        k = PROGRESS.unpack_from(self.progress, 0)[0] - self.answered - 1
        return self.queue[k] if 0 <= k < len(self.queue) else None


def _reap(procs: list[subprocess.Popen]) -> None:
    """Kill and reap every worker (the pool's finalizer: runs on close, on collection and at exit)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable (D state): nothing more to do from here
            pass
    procs.clear()


class WorkerPool:
    """``workers`` scoring processes; :meth:`map` scores ``(text, problem_key)`` rows, where the key is
    the problem's JSON (``Problem.to_dict()``), and returns one :data:`Outcome` per row in order.

    ``budget_s`` (None: no limit) bounds each completion's scoring; see the module docstring for what
    happens past it. ``map`` is thread-safe (calls run one at a time). Counters: ``timeouts``,
    ``crashes``, ``restarts``. ``close()`` kills the workers; so does garbage collection or exit."""

    def __init__(self, workers: int = 1, budget_s: float | None = None, scorer: ScoreFn | None = None,
                 start_timeout_s: float = 120.0) -> None:
        if os.name != "posix":
            raise NotImplementedError("reward worker processes need a POSIX system (subprocess pass_fds)")
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        check_budget(budget_s)
        check_scorer(scorer)
        self.n_workers = workers
        self.budget_s = budget_s
        self.scorer = scorer
        self.start_timeout_s = start_timeout_s
        self.timeouts = self.crashes = self.restarts = 0
        self.closed = False
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen] = []
        self._finalizer = weakref.finalize(self, _reap, self._procs)
        self._workers: list[_Worker] = []
        self._pipeline_bytes = 0
        self._opts: tuple[str, bool] = ("problem_json", False)
        try:
            self._workers = [self._spawn() for _ in range(workers)]
            deadline = time.monotonic() + start_timeout_s
            while not all(w.ready for w in self._workers):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WorkerStartError(f"reward workers not ready after {start_timeout_s:.0f}s")
                for conn in wait([w.conn for w in self._workers if not w.ready], left):
                    self._handshake(next(w for w in self._workers if w.conn is conn))
        except BaseException:
            self.close()
            raise

    # ---- processes ----------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        a, b = socket.socketpair()
        for sock in (a, b):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
        self._pipeline_bytes = a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 4
        parent, child = Connection(a.detach()), Connection(b.detach())
        env = dict(os.environ)
        for k in _THREAD_ENV:  # N workers with multi-threaded BLAS each would oversubscribe the cores
            env.setdefault(k, "1")
        with tempfile.TemporaryFile() as f:  # unlinked: the mapping outlives the file's name and fd
            os.ftruncate(f.fileno(), PROGRESS.size)
            progress = mmap.mmap(f.fileno(), PROGRESS.size)
            try:
                proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(child.fileno()), str(f.fileno())],
                                        pass_fds=(child.fileno(), f.fileno()), stdin=subprocess.DEVNULL, env=env)
            finally:
                child.close()
        self._procs.append(proc)
        try:
            parent.send([p for p in sys.path if isinstance(p, str)])
            parent.send(self.scorer)
        except OSError:  # it died at once: the handshake (or _drain) reports it as a failed start
            pass
        now = time.monotonic()
        return _Worker(proc, parent, progress, since=now, seen_at=now)

    def _handshake(self, w: _Worker) -> None:
        try:
            msg = w.conn.recv()
        except (EOFError, OSError):
            raise WorkerStartError(f"a reward worker exited while starting (exit code {w.proc.wait()})") from None
        if msg[0] == "fatal":
            raise WorkerStartError(f"a reward worker could not start: {msg[1]}")
        w.ready = True

    def _kill(self, w: _Worker) -> None:
        w.proc.kill()
        w.conn.close()
        w.progress.close()
        try:
            w.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if w.proc in self._procs:
            self._procs.remove(w.proc)

    def _replace(self, w: _Worker) -> None:
        self._kill(w)
        self._workers[self._workers.index(w)] = self._spawn()
        self.restarts += 1

    def pids(self) -> list[int]:
        """The live workers' process ids (tests check that they go away)."""
        return [w.proc.pid for w in self._workers if w.proc.poll() is None]

    def close(self) -> None:
        """Kill every worker now (they hold no state worth a graceful stop)."""
        self.closed = True
        for w in self._workers:
            w.conn.close()
            w.progress.close()
        self._workers = []
        self._finalizer()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a WorkerPool holds processes and cannot be pickled; pickle its owner (VerifierReward "
                        "drops its pool and starts one on first use)")

    def stats(self) -> dict[str, Any]:
        return {"workers": self.n_workers, "budget_s": self.budget_s, "timeouts": self.timeouts,
                "crashes": self.crashes, "restarts": self.restarts}

    # ---- scoring ------------------------------------------------------------------------------
    def map(self, rows: Sequence[tuple[str, str]], column: str = "problem_json",
            allow_ungrounded: bool = False) -> list[Outcome]:
        """One outcome per ``(text, problem_json)`` row, in order; the workers load each problem with
        :func:`load_problem` (``column`` names it in reasons). Returns when every row has an answer, a
        timeout or a crash: at most each stuck row's budget (plus a worker restart when every worker was
        stuck) beyond the scoring work itself. Raises :class:`UngroundedProblemError` as the
        in-process reward does."""
        with self._lock:
            if self.closed:
                raise RuntimeError("this WorkerPool is closed")
            self._opts = (column, bool(allow_ungrounded))
            out = self._map(rows)
        for bits, why in out:
            if bits is None and why.startswith(UNGROUNDED):
                raise UngroundedProblemError(why[len(UNGROUNDED):])
        return out

    def _map(self, rows: Sequence[tuple[str, str]]) -> list[Outcome]:
        n = len(rows)
        out: list[Outcome | None] = [None] * n
        chunk = max(1, min(MAX_CHUNK, math.ceil(n / (4 * len(self._workers))))) if n else 1
        pending: deque[int] = deque(range(n))
        left = n
        while left:
            for w in list(self._workers):
                # one chunk in flight, plus a second small one queued so the worker never waits for us
                while w.ready and pending and len(w.queue) < 2 * chunk:
                    idx = [pending.popleft() for _ in range(min(chunk, len(pending)))]
                    size = sum(len(rows[i][0]) for i in idx) + sum(len(k) for k in {rows[i][1] for i in idx})
                    if w.queue and size > self._pipeline_bytes:
                        pending.extendleft(reversed(idx))  # too big to sit in the socket: send it when idle
                        break
                    if not self._send(w, idx, rows):  # it died while idle: its rows go back, it is replaced
                        pending.extendleft(reversed(idx))
                        left -= self._lost(w, out, pending, CRASHED)
                        break
            for conn in wait([w.conn for w in self._workers], self._wait_s()):
                w = next((w for w in self._workers if w.conn is conn), None)
                if w is not None:
                    left -= self._drain(w, out, pending)
            left -= self._expire(out, pending)
        return [o if o is not None else (None, CRASHED) for o in out]

    def _send(self, w: _Worker, idx: list[int], rows: Sequence[tuple[str, str]]) -> bool:
        # Rows of one problem (a GRPO group) share one key object, so the pickle carries the JSON once.
        keys: dict[str, str] = {}
        items = [(i, rows[i][0], keys.setdefault(rows[i][1], rows[i][1])) for i in idx]
        try:
            w.conn.send(("score", items, *self._opts))
        except OSError:
            return False
        w.queue.extend(idx)
        return True

    def _wait_s(self) -> float | None:
        """How long the parent may block: a budget needs the running rows sampled every tenth of it (at
        most 50 ms), so a stuck row is seen within budget + that; a start-up has its own deadline."""
        now = time.monotonic()
        ends = [w.since + self.start_timeout_s for w in self._workers if not w.ready]
        if self.budget_s is not None and any(w.queue for w in self._workers):
            ends.append(now + min(0.05, self.budget_s / 10))
        return max(0.0, min(ends) - now) if ends else None

    def _drain(self, w: _Worker, out: list[Outcome | None], pending: deque[int]) -> int:
        """Read what ``w`` has sent; the number of rows it answered (a crash answers its current row)."""
        done = 0
        while True:
            try:
                if not w.conn.poll():
                    return done
                msg = w.conn.recv()
            except (EOFError, OSError):
                if not w.ready:  # a replacement that cannot start would be replaced forever: stop instead
                    raise WorkerStartError(f"a replacement reward worker exited while starting "
                                           f"(exit code {w.proc.wait()})") from None
                return done + self._lost(w, out, pending, CRASHED)
            if msg[0] == "ready":
                w.ready = True
            elif msg[0] == "fatal":
                raise WorkerStartError(f"a replacement reward worker could not start: {msg[1]}")
            else:
                for row, outcome in msg[1]:  # answers arrive in the order the rows were sent
                    if w.queue and w.queue[0] == row:
                        w.queue.popleft()
                        w.answered += 1
                        out[row] = outcome
                        done += 1

    def _expire(self, out: list[Outcome | None], pending: deque[int]) -> int:
        done = 0
        now = time.monotonic()
        for w in list(self._workers):
            if not w.ready and now - w.since > self.start_timeout_s:
                raise WorkerStartError(f"a replacement reward worker was not ready after {self.start_timeout_s:.0f}s")
            if not w.queue:
                continue
            seen = PROGRESS.unpack_from(w.progress, 0)[0]
            if seen != w.seen:  # a new row started since the last look: its clock starts now (never early)
                w.seen, w.seen_at = seen, now
            elif self.budget_s is not None and now - w.seen_at > self.budget_s:
                if w.current() is None:  # between rows (its last answer is on the way): nothing is over budget
                    w.seen_at = now
                    continue
                done += self._lost(w, out, pending, TIMEOUT)
        return done

    def _lost(self, w: _Worker, out: list[Outcome | None], pending: deque[int], why: str) -> int:
        """``w`` timed out or died: the row it was scoring gets ``why`` (the first unanswered one if the
        counter names none, so a row that kills workers cannot loop), its other rows go back to the queue."""
        done = 0
        row = w.current() if w.queue else None
        if row is None and w.queue:
            row = w.queue[0]
        if row is not None:
            out[row] = (None, why)
            w.queue.remove(row)
            done = 1
        if why == TIMEOUT:
            self.timeouts += 1
        else:
            self.crashes += 1
        pending.extendleft(reversed(w.queue))  # answered-but-unread rows are scored again: same result
        w.queue.clear()
        self._replace(w)
        return done


def check_budget(budget_s: float | None) -> None:
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                 or not math.isfinite(budget_s) or budget_s <= 0):
        raise ValueError(f"budget_s must be a positive number of seconds or None, got {budget_s!r}")


_SHARED: dict[tuple[int, float | None, ScoreFn | None], WorkerPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(workers: int, budget_s: float | None, scorer: ScoreFn | None = None) -> WorkerPool:
    """One live pool per ``(workers, budget_s, scorer)`` in this process: the six per-bit rewards and
    the S/6 reward of one run share their workers instead of starting seven pools."""
    key = (workers, budget_s, scorer)
    with _SHARED_LOCK:
        pool = _SHARED.get(key)
        if pool is None or pool.closed:
            pool = _SHARED[key] = WorkerPool(workers, budget_s, scorer)
        return pool


def close_shared_pools() -> None:
    """Kill every shared pool's workers (a later reward call starts a new pool)."""
    with _SHARED_LOCK:
        for pool in _SHARED.values():
            pool.close()
        _SHARED.clear()
