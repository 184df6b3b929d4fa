"""No child process outlives calver: a watchdog that kills this process's descendants when it dies.

vLLM runs its engine in a child process (``VLLM::EngineCore``) that ignores SIGTERM. After ``kill -9`` of
``calver bench`` it kept running, re-parented to init, holding ~760 MB (and presumably its GPU memory on a
GPU host) in 3 of 6 kills (verifier audit 2026-12-03, M3). :func:`reap_descendants_on_exit`, called before
an engine starts, adds two guards:

- a watchdog process (its own session, so a terminal's Ctrl-C does not reach it) reads one end of a pipe
  whose other end only this process holds. Every ``interval_s`` it records this process's descendants (pid
  and start time, from ``/proc``); when the pipe closes (this process is gone, however it died) it SIGKILLs
  every recorded descendant that is still the same process, and their children, and the orphans started
  in its last interval (same process group, started after this process, now children of init or of the
  subreaper the others went to), then exits. This process's own ancestors are spared: a shell script that
  ran calver shares its process group and, orphaned, is a child of init too;
- a fork hook: a child forked from the main thread asks the kernel for SIGKILL when its parent dies
  (``PR_SET_PDEATHSIG``), which covers a child forked in the watchdog's last interval; forked children also
  close the pipe's write end, so a living child cannot keep the watchdog from seeing its parent go.

Linux only (``/proc``, ``prctl``); elsewhere it does nothing. Idempotent per process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

INTERVAL_S = 0.2
_PR_SET_PDEATHSIG = 1
_state: dict[str, int] = {}  # "pid": the process the watchdog guards, "fd": its pipe's write end
_lock = threading.Lock()
_forked_from_main = [False]
_parent_pid = [0]
_watchdogs: list[subprocess.Popen] = []  # kept, so no ResourceWarning: the watchdog outlives this process

# The watchdog's selection, kept apart from its loop so a test can run it on a made-up process table.
_WATCHDOG_LIB = r"""
import os

def table():
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == b"Z":  # a zombie: dead already, and its pid would look alive
            continue
        out[int(name)] = (int(fields[1]), int(fields[2]), int(fields[19]))  # ppid, process group, start time
    return out

def below(roots, tab):
    kids = {}
    for pid, row in tab.items():
        kids.setdefault(row[0], []).append(pid)
    seen, todo = set(), list(roots)
    while todo:
        for c in kids.get(todo.pop(), ()):
            if c not in seen and c != me:
                seen.add(c)
                todo.append(c)
    return seen

def late_orphans(tab, known, group, born, spare, me, parent):
    # The recorded descendants still alive, and the orphans of the watchdog's last interval: started after
    # the parent (clock ticks, strictly later) in its process group, now children of init or of the subreaper
    # the recorded survivors went to, not recorded. `spare` ({pid: start time}): the parent's ancestors, never
    # taken (a script that ran calver shares its group and, orphaned, is a child of init too). The kernel
    # closes a dying parent's pipe before it re-parents the children, so a child may still name the gone
    # parent (whose pid, while no process holds it, no one else can have) when the watchdog looks.
    alive = [p for p, st in known.items() if p in tab and tab[p][2] == st]
    reapers = {1} | {tab[p][0] for p in alive} | ({parent} if parent not in tab else set())
    return alive, [p for p, (ppid, pg, st) in tab.items()
                   if p != me and pg == group and st > born and ppid in reapers and p not in known
                   and spare.get(p) != st]
"""

_WATCHDOG = _WATCHDOG_LIB + r"""
import json, select, signal, sys, time
parent, interval, group, born = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spare = {int(p): st for p, st in json.loads(sys.argv[5]).items()}
signal.signal(signal.SIGINT, signal.SIG_IGN)
me = os.getpid()

known = {}
while True:
    ready, _, _ = select.select([0], [], [], interval)
    if ready and not os.read(0, 1):
        break
    tab = table()
    if parent not in tab:
        break
    known.update({p: tab[p][2] for p in below([parent], tab)})
# The parent is gone; its orphans were re-parented to init or a subreaper. Besides the recorded
# descendants, take the ones started in the last interval: the same process group, started after the
# parent, and now children of that reaper (the one the recorded survivors went to, else pid 1).
quiet = 0
for _ in range(40):  # until none is left (the recorded ones, then what they started meanwhile) for 4 looks
    tab = table()
    alive, late = late_orphans(tab, known, group, born, spare, me, parent)
    targets = set(alive) | set(late)
    targets |= {p for p in below(targets, tab) if spare.get(p) != tab[p][2]}
    for p in targets:
        known.setdefault(p, tab[p][2])
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    quiet = 0 if targets else quiet + 1
    if quiet == 4:
        break
    time.sleep(0.05)
"""


def ancestors(pid: int) -> dict[int, int]:
    """``pid``'s ancestors up to (not including) init: {pid: start time in clock ticks}, from ``/proc``."""
    out: dict[int, int] = {}
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            if ppid <= 1:
                return out
            with open(f"/proc/{ppid}/stat", "rb") as fh:
                out[ppid] = int(fh.read().rsplit(b")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            return out
        pid = ppid


def _before_fork() -> None:
    _forked_from_main[0] = threading.current_thread() is threading.main_thread()
    _parent_pid[0] = os.getpid()


def _after_fork_in_child() -> None:
    fd = _state.pop("fd", None)
    _state.pop("pid", None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    if _forked_from_main[0]:  # the kernel's signal follows the forking *thread*: only the main one lives on
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            return
        if os.getppid() != _parent_pid[0]:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGKILL)


def reap_descendants_on_exit(interval_s: float = INTERVAL_S) -> int | None:
    """Start this process's watchdog (once); its pid, or None where it cannot run (not Linux)."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return None
    with _lock:
        if _state.get("pid") == os.getpid():
            return _state.get("watchdog")
        read_end, write_end = os.pipe()
        try:
            with open("/proc/self/stat", "rb") as fh:  # the watchdog may start after this process is gone
                fields = fh.read().rsplit(b")", 1)[1].split()
            group, born = fields[2].decode(), fields[19].decode()
            spare = json.dumps(ancestors(os.getpid()))
            proc = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(interval_s), group, born,
                                     spare],
                                    stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
        if "hooked" not in _state:
            os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
            _state["hooked"] = 1
        _watchdogs.append(proc)
        _state.update(pid=os.getpid(), fd=write_end, watchdog=proc.pid)
        return proc.pid
