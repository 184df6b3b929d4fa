"""Verifier scoring in worker processes, with a per-completion time budget that cannot stall a run.

A reward that hangs on one completion freezes a GRPO step (verl#6673), and ``signal.alarm`` cannot
help: it works only on the main thread, and TRL's async GRPO calls rewards through
``asyncio.to_thread``. So :class:`WorkerPool` scores in child processes and watches the clock from
the calling thread. Each worker bumps a shared counter (an mmap'd int64) before every row, so the
parent knows which row runs without a message per row; answers come back in batches. A row seen
running past ``budget_s`` gets ``Unscorable("timeout")`` within the budget plus one sampling interval
(a tenth of it, at most 50 ms); the stuck child is killed (SIGKILL: a C loop ignores anything else)
and replaced, and its other rows go to the queue again. A child that dies (segfault, OOM kill) costs
its current row ``Unscorable("worker crashed")`` the same way.

Concurrent callers share the workers (verl, OpenRLHF and TRL's async GRPO call a reward from many threads
at once): :meth:`WorkerPool.map` puts its rows on one queue, and one caller at a time drives the pool
(sends, reads answers, watches the clock) for every caller's rows, handing the role on when its own rows
are done; a caller that arrives while the driver waits wakes it through a socket. Workers load the problem
JSON themselves (:mod:`calver.reward.worker_main`, the reward's own loader), so cold problems are prepared
in parallel.

Workers are ``python -c`` children of :mod:`subprocess`, not :mod:`multiprocessing`: spawn and
forkserver re-run the parent's ``__main__`` in every child (under ``trl grpo``, TRL's training
script: torch and trl per worker), and fork copies a threaded, CUDA-holding trainer. A child imports
only ``calver.verifier``, :mod:`calver.reward.worker_main` and the scorer's module, on the
parent's ``sys.path`` (sent first, as spawn does). Messages are pickles over a socketpair. POSIX only.
Never imports torch.

The scorer hook: ``scorer(text, prepared_problem)`` returning an object with ``.bits`` (six 0/1),
:func:`calver.verifier.score` by default; module-level (workers import it by reference): tests
inject a deliberately slow one this way. Budgets are wall-clock: a loaded machine can time out a
row that would have passed; pick one far above the verifier's p99 (``benchmarks/latency_bench.py``).
"""

from __future__ import annotations

import itertools
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

from calver.reward.spec import CRASHED, TIMEOUT
from calver.reward.worker_main import PROGRESS, ScoreFn, check_scorer
from calver.verifier import RowResult, Unscorable

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
         "from calver.reward.worker_main import serve\n"
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


def _reap(procs: list[subprocess.Popen], socks: tuple[socket.socket, ...] = ()) -> None:
    """Kill and reap every worker and close the wake-up sockets (the pool's finalizer: runs on close, on
    collection and at exit)."""
    for s in socks:
        s.close()
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
    the problem's JSON (``Problem.to_dict()``), and returns one result per row in order.

    ``budget_s`` (None: no limit) bounds each completion's scoring; see the module docstring for what
    happens past it. ``map`` is thread-safe, and concurrent calls share the workers. Counters: ``timeouts``,
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
        self._cv = threading.Condition()  # guards everything below; one caller at a time drives
        self._driving = False
        self._pending: deque[int] = deque()  # row tokens not yet sent
        self._rows: dict[int, tuple] = {}  # token -> (job, index, text, key, column, allow_ungrounded)
        self._jobs: set[_Job] = set()
        self._tokens = itertools.count()
        self._wake_r, self._wake_w = socket.socketpair()  # a new caller wakes a driver blocked in wait()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._procs: list[subprocess.Popen] = []
        self._finalizer = weakref.finalize(self, _reap, self._procs, (self._wake_r, self._wake_w))
        self._workers: list[_Worker] = []
        self._pipeline_bytes = 0
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
        self._wake()
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
            allow_ungrounded: bool = False) -> list[RowResult]:
        """One result per ``(text, problem_json)`` row, in order: the row's stored verdict, or an
        :class:`Unscorable` (timeout, a crashed worker, a bad or ungrounded problem: the workers load each
        problem with :func:`calver.reward.problems.load_problem`; ``column`` names it in reasons). Returns
        when every row has a result: at most each stuck row's budget (plus a worker restart when every
        worker was stuck) beyond the scoring work itself. Thread-safe; concurrent calls share the workers."""
        job = _Job([None] * len(rows), len(rows))
        with self._cv:
            if self.closed:
                raise RuntimeError("this WorkerPool is closed")
            for i, (text, key) in enumerate(rows):
                tok = next(self._tokens)
                self._rows[tok] = (job, i, text, key, column, bool(allow_ungrounded))
                self._pending.append(tok)
            self._jobs.add(job)
            self._wake()
            try:
                while job.left and job.error is None:
                    if self._driving:
                        self._cv.wait()
                        continue
                    self._driving = True
                    try:
                        self._drive(job)
                    except BaseException as e:  # noqa: BLE001 - the driver's failure is every caller's: passed on, re-raised
                        for other in self._jobs:
                            other.error = other.error or e
                        dead = [t for t, entry in self._rows.items() if entry[0].error is not None]
                        for t in dead:
                            del self._rows[t]
                        self._pending = deque(t for t in self._pending if t in self._rows)
                        raise
                    finally:
                        self._driving = False
                        self._cv.notify_all()
            finally:
                self._jobs.discard(job)
            if job.error is not None and job.left:
                raise job.error
        return [o if o is not None else Unscorable(CRASHED) for o in job.out]

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):  # the buffer is full: the driver is awake already
            pass

    def _drive(self, job: _Job) -> None:
        """Run the pool (under the lock, released while waiting) until ``job`` has every answer."""
        while job.left:
            self._dispatch()
            conns = [w.conn for w in self._workers]
            timeout = self._wait_s()
            self._cv.release()
            try:
                ready = wait([*conns, self._wake_r], timeout)
            except (OSError, ValueError):  # close() from another thread shut a connection under us
                ready = []
            finally:
                self._cv.acquire()
            if self.closed:
                raise RuntimeError("this WorkerPool was closed while scoring")
            for conn in ready:
                if conn is self._wake_r:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                w = next((w for w in self._workers if w.conn is conn), None)
                if w is not None:
                    self._drain(w)
            self._expire()

    def _dispatch(self) -> None:
        """Send queued rows to the workers: one chunk in flight plus a second small one queued, so a
        worker never waits for the parent."""
        n = len(self._pending)
        chunk = max(1, min(MAX_CHUNK, math.ceil(n / (4 * len(self._workers))))) if n else 1
        for w in list(self._workers):
            while w.ready and self._pending and len(w.queue) < 2 * chunk:
                toks = [self._pending.popleft() for _ in range(min(chunk, len(self._pending)))]
                items = [self._rows[t] for t in toks]
                size = sum(len(it[2]) for it in items) + sum(len(k) for k in {it[3] for it in items})
                if w.queue and size > self._pipeline_bytes:
                    self._pending.extendleft(reversed(toks))  # too big to sit in the socket: send it when idle
                    break
                if not self._send(w, toks):  # it died while idle: its rows go back, it is replaced
                    self._pending.extendleft(reversed(toks))
                    self._lost(w, CRASHED)
                    break

    def _send(self, w: _Worker, toks: list[int]) -> bool:
        # Rows of one problem (a GRPO group) share one key object, so the pickle carries the JSON once.
        keys: dict[str, str] = {}
        items = []
        for t in toks:
            _, _, text, key, column, allow = self._rows[t]
            items.append((t, text, keys.setdefault(key, key), column, allow))
        try:
            w.conn.send(("score", items))
        except OSError:
            return False
        w.queue.extend(toks)
        return True

    def _finish(self, tok: int, result: RowResult) -> None:
        entry = self._rows.pop(tok, None)
        if entry is None:  # answered twice (rescored after a kill): the first answer stands
            return
        job, i = entry[0], entry[1]
        job.out[i] = result
        job.left -= 1
        if not job.left:
            self._cv.notify_all()  # its caller may be waiting while another drives

    def _wait_s(self) -> float | None:
        """How long the driver may block: a budget needs the running rows sampled every tenth of it (at
        most 50 ms), so a stuck row is seen within budget + that; a start-up has its own deadline."""
        now = time.monotonic()
        ends = [w.since + self.start_timeout_s for w in self._workers if not w.ready]
        if self.budget_s is not None and any(w.queue for w in self._workers):
            ends.append(now + min(0.05, self.budget_s / 10))
        return max(0.0, min(ends) - now) if ends else None

    def _drain(self, w: _Worker) -> None:
        """Read what ``w`` has sent (a crash answers its current row)."""
        while True:
            try:
                if not w.conn.poll():
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                if not w.ready:  # a replacement that cannot start would be replaced forever: stop instead
                    raise WorkerStartError(f"a replacement reward worker exited while starting "
                                           f"(exit code {w.proc.wait()})") from None
                self._lost(w, CRASHED)
                return
            if msg[0] == "ready":
                w.ready = True
            elif msg[0] == "fatal":
                raise WorkerStartError(f"a replacement reward worker could not start: {msg[1]}")
            else:
                for tok, result in msg[1]:  # answers arrive in the order the rows were sent
                    if w.queue and w.queue[0] == tok:
                        w.queue.popleft()
                        w.answered += 1
                        self._finish(tok, result)

    def _expire(self) -> None:
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
                self._lost(w, TIMEOUT)

    def _lost(self, w: _Worker, why: str) -> None:
        """``w`` timed out or died: the row it was scoring gets ``why`` (the first unanswered one if the
        counter names none, so a row that kills workers cannot loop), its other rows go back to the queue."""
        tok = w.current() if w.queue else None
        if tok is None and w.queue:
            tok = w.queue[0]
        if tok is not None:
            w.queue.remove(tok)
            self._finish(tok, Unscorable(why))
        if why == TIMEOUT:
            self.timeouts += 1
        else:
            self.crashes += 1
        self._pending.extendleft(reversed(w.queue))  # answered-but-unread rows are scored again: same result
        w.queue.clear()
        self._replace(w)


@dataclass(eq=False)
class _Job:
    """One ``map`` call's rows: their results so far, how many are missing, and a failure to re-raise."""

    out: list[RowResult | None]
    left: int
    error: BaseException | None = None


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
