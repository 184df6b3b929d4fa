"""`PreparedProblem`: a problem checked, copied and normalized once, for every score, grade and view of it.

``prepare(problem)`` validates ``problem`` as scoring does and keeps a private copy of it (its own
``query`` and ``data``; the immutable graph and ``meta``, which no scorer reads, are shared), its family's
normalized query (read-only) and its verification object, plus the scorer's memo of slot checks. A
caller that mutates its ``Problem`` afterwards changes nothing that is judged. Hot callers (a pool's K
candidates, a GRPO reward) pass the PreparedProblem to ``score``.

A plain ``Problem`` handed to ``score`` is prepared through a small identity cache: an entry is reused
only while the caller's object still equals (``==``) the prepared copy, so in-place mutation is seen.
(Equality cannot tell a value from an equal one of another type, ``1`` from ``1.0``; pass a
PreparedProblem to pin exactly what is judged.)

Memory: slot memos and the identity cache are charged to the verifier's one byte budget
(:mod:`calver.verifier.memo`) and dropped with it, including the memos of PreparedProblems a caller holds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import weakref
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from calver.verifier.family import TaskFamily
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.memo import LOCK, Memo, on_clear
from calver.verifier.problem import Problem, ProblemError, copy_containers
from calver.verifier.registry import get_family

# What a family's problem-side hook may raise on a malformed field it let through.
_ODD_ERRORS = (ValueError, TypeError, KeyError, AttributeError, GraphError, RecursionError)


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class PreparedProblem:
    """One problem, prepared by :func:`prepare`: immutable; read ``problem``, never mutate it.

    - ``problem``: the private copy every family hook receives (families memoize on its identity);
    - ``family``: the registered task family; ``query``: its normalized query (read-only);
    - ``source``: ``family.verification_object(problem)``: G*, a family's formal object, or None;
    - ``memo``: the scorer's slot-check memo (charged to the shared budget, dropped with it).
    """

    problem: Problem
    family: TaskFamily
    query: Mapping[str, Any]
    source: Any = field(repr=False)
    memo: dict = field(default_factory=dict, repr=False)
    _fingerprint: str = field(default="", repr=False)  # "" until computed

    @property
    def graph(self) -> CausalGraph | None:
        return self.problem.graph

    @property
    def task(self) -> str:
        return self.problem.task

    @property
    def mode(self) -> str:
        return self.problem.mode

    @property
    def id(self) -> str:
        return self.problem.id

    @property
    def text(self) -> str | None:
        return self.problem.text

    @property
    def graph_class(self) -> GraphClass | None:
        return self.problem.graph_class

    @property
    def variables(self) -> tuple[str, ...] | None:
        return self.problem.variables

    @property
    def grounded(self) -> bool:
        """Whether scores are judged against the problem's source (``Verdict.grounded``)."""
        return self.source is not None or self.problem.mode == "supplied"

    @property
    def fingerprint(self) -> str:
        """:func:`problem_fingerprint` of the problem as prepared, computed on first use (``meta`` is the
        caller's: a change to it before then counts)."""
        if not self._fingerprint:
            object.__setattr__(self, "_fingerprint", problem_fingerprint(self.problem))
        return self._fingerprint

    def __reduce__(self):  # pickle / deepcopy: prepared again from the copy
        return (prepare, (self.problem,))


def problem_fingerprint(problem: Problem | PreparedProblem) -> str:
    """A stable content hash: the sha256 hex of ``json.dumps(problem.to_dict(), sort_keys=True,
    ensure_ascii=False)`` with sets sorted. Every field counts (``meta`` and ``source_id`` too), so
    stored score tables keyed by it never serve another problem. ``TypeError`` if a value is not JSON."""
    if isinstance(problem, PreparedProblem):
        return problem.fingerprint
    text = json.dumps(problem.to_dict(), sort_keys=True, ensure_ascii=False, default=_sorted_set)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _sorted_set(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        try:
            return sorted(obj)
        except TypeError:  # mixed types: a stable order all the same
            return sorted(obj, key=lambda x: (type(x).__name__, repr(x)))
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


# id(problem) -> (problem, PreparedProblem) for plain Problems; charged like the scorer's old memo.
_PREPARED = Memo("prepared problem")
# every live PreparedProblem, so dropping the memos empties the slot memos callers still hold
_LIVE: weakref.WeakSet[PreparedProblem] = weakref.WeakSet()


def _drop_slot_memos() -> None:  # runs under memo.LOCK, as every _LIVE.add does
    for p in list(_LIVE):
        p.memo.clear()


on_clear(_drop_slot_memos)


def problem_cost(problem: Problem) -> int:
    """Bytes a prepared copy of ``problem`` is charged to the memo budget (its graph and text)."""
    g = problem.graph
    size = 0 if g is None else len(g.nodes) + len(g.directed) + len(g.bidirected)
    return 4096 + 512 * size + 8 * len(problem.text or "")


def _same(problem: Problem, own: Problem) -> bool:
    """``problem == own`` (every field, nested values by ``==``), at a quarter of the dataclass cost."""
    return type(problem) is type(own) and problem.__dict__ == own.__dict__


def prepare(problem: Problem | PreparedProblem) -> PreparedProblem:
    """``problem`` prepared for scoring and grading (a PreparedProblem is returned unchanged).

    Raises ``KeyError`` for an unregistered task and :class:`ProblemError` for a malformed problem
    (an odd error a family lets through becomes a ProblemError naming the task and the error).
    The same unchanged ``Problem`` object gets the same PreparedProblem while the memo budget keeps it.
    """
    if isinstance(problem, PreparedProblem):
        return problem
    if not isinstance(problem, Problem):
        raise TypeError(f"prepare takes a Problem, got {type(problem).__name__}")
    family = get_family(problem.task)
    hit = _PREPARED.get(id(problem))
    if hit is not None and hit[0] is problem and hit[1].family is family and _same(problem, hit[1].problem):
        return hit[1]
    try:
        own = copy.copy(problem)  # the graph (immutable) and meta (read by no scorer) are shared
        own.query, own.data = copy_containers(problem.query), copy_containers(problem.data)
        query = MappingProxyType(family.normalize_query(own))
        source = family.verification_object(own)
    except ProblemError:
        raise
    except _ODD_ERRORS as e:
        raise ProblemError(f"malformed {problem.task} problem: {type(e).__name__}: {e}") from None
    prepared = PreparedProblem(own, family, query, source)
    with LOCK:  # a drop iterating _LIVE in another thread must not see it change size
        _LIVE.add(prepared)
        _PREPARED.put(id(problem), (problem, prepared), problem_cost(problem))
    return prepared
