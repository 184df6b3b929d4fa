"""Problem cells of a reward batch: the one loader, the one grounding rule, one cache.

A trainer hands the reward each row's problem as a cell (``problem_json``: ``Problem.to_dict()`` as JSON
text, or that dict). :func:`problem_key` reads the cell as JSON text, :func:`load_problem` validates and
prepares it (as the CLI does at load) and applies the grounding rule, and :func:`cached_problem` keeps
the result in the verifier's byte budget. Every adapter, in-process or in a worker, goes through them,
so a bad cell gets one reason everywhere.

The grounding rule: a constructed-mode problem without its source graph cannot be judged against a
source (its score would measure the trace's consistency with its own GRAPH, which a policy can invent),
so it is refused unless the caller passes ``allow_ungrounded``. The refusal is
:class:`UngroundedProblemError` (TRL: the run stops) or, where a trainer needs a number per row, an
:class:`Unscorable` whose reason starts with :data:`UNGROUNDED`.
"""

from __future__ import annotations

import json
from typing import Any

from calver.verifier import PreparedProblem, Problem, ProblemError, prepare
from calver.verifier.memo import Memo
from calver.verifier.prepared import problem_cost

UNGROUNDED = "ungrounded problem: "  # the reason prefix of a row refused by the grounding rule


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
    check_grounded(prob, allow_ungrounded)
    return prob


def ungrounded_message(prob: PreparedProblem) -> str:
    return (f"problem {prob.id or '(no id)'} ({prob.task}) is in constructed mode without its source graph: its "
            "score would measure the trace's consistency with its own GRAPH, not correctness, and a policy can "
            "invent a graph that makes a wrong answer score 6/6. Keep the source graph in the problem (the "
            "generators do), or pass allow_ungrounded=True (calver train grpo: --allow_ungrounded_reward true) "
            "to train on such problems anyway")


def check_grounded(prob: PreparedProblem, allow_ungrounded: bool = False) -> None:
    """The grounding rule: raise :class:`UngroundedProblemError` for a problem without a source to judge
    on, unless ``allow_ungrounded``."""
    if not (allow_ungrounded or prob.grounded):
        raise UngroundedProblemError(ungrounded_message(prob))


def problem_key(raw: Any, column: str = "problem_json") -> tuple[str, str]:
    """``(the cell's JSON text, "")``, or ``("", why)`` for a cell that cannot be JSON text (a dict cell
    becomes its sorted JSON: the cache key)."""
    if raw is None:
        return "", f"no {column}"
    if isinstance(raw, dict):
        try:
            return json.dumps(raw, sort_keys=True), ""
        except (TypeError, ValueError, RecursionError) as e:
            return "", f"{column} dict is not JSON ({type(e).__name__})"
    if isinstance(raw, str):
        return str.__str__(raw), ""
    return "", f"{column} is a {type(raw).__name__}, not JSON text"


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


def prepared_or_reason(key: str, column: str, allow_ungrounded: bool) -> PreparedProblem | str:
    """:func:`cached_problem`, with the grounding refusal as a reason (prefixed :data:`UNGROUNDED`)."""
    try:
        return cached_problem(key, column, allow_ungrounded)
    except UngroundedProblemError as e:
        return UNGROUNDED + str(e)


__all__ = ["PROBLEM_CACHE", "UNGROUNDED", "UngroundedProblemError", "cached_problem", "check_grounded",
           "load_problem", "prepared_or_reason", "problem_key", "ungrounded_message"]
