"""One byte budget for every verifier memo.

A GRPO run scores millions of samples whose GRAPH, STRATEGY and ANSWER texts are ever new, so a memo
bounded by entry count can pin gigabytes (a 64 KB GRAPH slot parses to ~2 MB). Every memo of the
verifier is a :class:`Memo` (or a function wrapped by :func:`memoized`) and charges an estimate of
each entry's bytes to one shared budget; past it, every memo is dropped and refills on demand.
Memos only ever cache pure functions of their keys, so dropping them changes no result.

``set_budget(n)`` changes the budget (tests use a small one); ``usage()`` reports it.

Thread-safe: verl, OpenRLHF and TRL's async GRPO score from threads. One re-entrant lock guards the
counter, every drop and every store, so a drop never runs while another thread's hook iterates a
container it is changing; lookups are single dict reads, atomic under the GIL.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

DEFAULT_BUDGET = 64 * 2**20

_budget = DEFAULT_BUDGET
_charged = 0
_clear_hooks: list[Callable[[], None]] = []
LOCK = threading.RLock()  # the budget, every drop and every store (re-entrant: a hook may store)


def charge(cost: int) -> None:
    """Count ``cost`` bytes against the budget; past it, drop every memo first."""
    global _charged
    with LOCK:
        _charged += cost
        if _charged > _budget:
            clear_all()
            _charged = cost


def clear_all() -> None:
    """Drop every registered memo (results are unchanged: they refill on demand)."""
    global _charged
    with LOCK:
        for hook in list(_clear_hooks):
            hook()
        _charged = 0


def on_clear(hook: Callable[[], None]) -> None:
    """Register ``hook`` to run whenever the memos are dropped (for memos that are not a :class:`Memo`)."""
    with LOCK:
        _clear_hooks.append(hook)


def set_budget(n_bytes: int) -> None:
    """Set the shared budget (bytes) and drop every memo."""
    global _budget
    if not isinstance(n_bytes, int) or n_bytes < 0:
        raise ValueError(f"memo budget must be a non-negative integer of bytes, got {n_bytes!r}")
    with LOCK:
        _budget = n_bytes
        clear_all()


def usage() -> tuple[int, int]:
    """(bytes charged since the last drop, budget)."""
    return _charged, _budget


def text_cost(text: str | None, per_char: int, base: int = 256) -> int:
    """An entry's byte estimate: ``base`` plus ``per_char`` bytes per character of the text it came from."""
    return base + per_char * len(text or "")


class Memo:
    """A dict memo whose entries are charged to the shared budget."""

    __slots__ = ("name", "_data")

    def __init__(self, name: str) -> None:
        self.name = name
        self._data: dict = {}
        on_clear(self._data.clear)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def put(self, key: Any, value: Any, cost: int) -> Any:
        """Store ``value`` (charged ``cost`` bytes) and return it."""
        with LOCK:
            charge(cost)
            self._data[key] = value
        return value

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Any) -> bool:
        return key in self._data

    def clear(self) -> None:
        with LOCK:
            self._data.clear()


def memoized(name: str, cost: Callable[..., int]):
    """Memoize a pure function of hashable arguments; ``cost(*args)`` estimates an entry's bytes.
    The wrapper keeps ``memo`` (its :class:`Memo`) and ``__wrapped__`` (the plain function)."""

    def wrap(fn):
        memo = Memo(name)
        missing = object()

        @functools.wraps(fn)
        def call(*args):
            hit = memo.get(args, missing)
            if hit is missing:
                hit = memo.put(args, fn(*args), cost(*args))
            return hit

        call.memo = memo
        return call

    return wrap
