"""The label firewall: what a selector may see, built from an allow-list and checked on the way in.

A selector receives only :class:`SelectorView` objects. A view holds

* ``problem``: a :class:`Problem` rebuilt from an allow-list of fields (task, query, text, mode,
  graph_class, variables, data, id; the graph only in supplied mode, where the policy saw it too).
  ``meta`` and ``source_id`` are dropped; ``query`` and ``data`` are scrubbed recursively. A family
  whose policy-visible payload states the graph judges a view on that (``ate_threshold``: the CPTs'
  conditioning sets are the parent sets), so nothing hidden is kept for it;
* ``texts``: the candidate traces in candidate-index order, and ``candidate_index`` (their indices);
* ``stored``: comparator scores stored beside the pool (``selections/<name>.jsonl``'s ``scores``,
  sliced to the view's K-prefix), so neural comparators re-select on CPU without a forward pass;
* ``context``: manifest-carried extras (``manifest["selector_context"]``), scrubbed.

Anything else (labels, validity classes, the source graph in constructed mode, reference answers,
``correct``/``gold`` flags, analysis-only fields) never enters a view. :func:`scrub` removes a
forbidden key wherever it sits; where it cannot be removed safely (a forbidden name that is also a
declared query input of the task family, a forbidden key in a view that was built by hand, a
non-numeric stored score) :class:`FirewallError` is raised and the run refuses. :func:`check_view`
re-walks every view right before a selector runs (``calver.infer.select.run_selector``).
Selectors return only (index, scores[, answer]); labels are reattached afterwards, outside
``calver.infer`` (``calver.evaluation.grading.grade_rows``).

Verification modes: a knights_knaves problem whose ``meta["verification"]`` is ``"candidate_local"``
loses its formal ``data.statements`` here (keeping ``data.speakers``, who speaks, which the text shows),
so every consumer of a stripped problem (selectors, the score table, evaluation units, PRM training)
scores it candidate-locally: each trace against the statements the verifier reads from the puzzle text
(:mod:`calver.verifier.tasks.knights_text`). Absent or ``"grounded"`` keeps the statements (the
default). Grading always runs on the unstripped problem. :func:`verification_mode` names what the
verifier sees for any problem.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from calver.infer.pool import PoolError
from calver.verifier.prepared import PreparedProblem, prepare
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.tasks.knights_text import VERIFICATION_MODES
from calver.verifier.verdict import Verdict

# Keys (after lower-casing and '-'/' ' -> '_') that never reach a selector.
FORBIDDEN_KEYS: frozenset[str] = frozenset(
    {
        "correct", "is_correct", "correctness", "gold", "gold_answer", "gold_answers", "answer_key",
        "answer", "answers", "reference", "references", "reference_answer", "reference_answers",
        "validity_class", "valid_answers", "valid_sets", "valid", "is_valid", "validity",
        "source_graph", "true_graph", "gt_graph", "ground_truth", "label", "labels", "solution",
        "solutions", "target", "targets", "expected", "expected_answer", "oracle", "grade", "graded",
        "accuracy", "n_valid", "num_valid", "listed_answer", "dataset_answer",
    }
)
# Any key starting with one of these is forbidden too (``gold_set``, ``label_source`` ...).
FORBIDDEN_PREFIXES: tuple[str, ...] = (
    "gold", "correct", "label", "reference", "answer_key", "valid_", "validity", "source_graph",
    "solution", "ground_truth", "oracle", "expected_", "true_",
)
# Analysis-only fields of ``problem.data`` (provenance, difficulty, splits): dropped, not errors.
ANALYSIS_KEYS: frozenset[str] = frozenset(
    {
        "meta", "provenance", "difficulty", "split", "generator", "generator_seed", "source",
        "source_id", "origin", "dataset", "dataset_id", "clean_core", "subset", "notes", "audit",
        "analysis", "stats", "n_nodes", "n_edges", "multiplicity",
    }
)
# Problem fields a view keeps (everything else, notably ``meta`` and ``source_id``, is dropped).
PROBLEM_FIELDS: tuple[str, ...] = ("task", "query", "graph", "text", "mode", "graph_class", "variables", "data", "id")


KK_TASK = "knights_knaves"


class FirewallError(RuntimeError):
    """A label-bearing field reached a place where the firewall cannot strip it: the run refuses."""


class VerificationModeError(FirewallError, ProblemError):
    """``meta["verification"]`` names no known mode (or one the task does not have)."""


def norm_key(key: Any) -> str:
    return str(key).strip().lower().replace("-", "_").replace(" ", "_")


def is_forbidden(key: Any) -> bool:
    k = norm_key(key)
    return k in FORBIDDEN_KEYS or k.startswith(FORBIDDEN_PREFIXES)


def scrub(obj: Any, *, allow: Iterable[str] = (), drop: Iterable[str] = (), where: str = "") -> Any:
    """A copy of ``obj`` with every forbidden (and ``drop``) key removed at any depth.

    ``allow`` names top-level keys kept even if their name is forbidden or dropped (a family's declared
    query inputs, e.g. ``source``/``target`` for intervention reachability); they are scrubbed below.
    """
    allow = {norm_key(a) for a in allow}
    drop = {norm_key(d) for d in drop}
    return _scrub(obj, allow, drop, where or "input")


def _scrub(obj: Any, allow: set[str], drop: set[str], where: str) -> Any:
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            nk = norm_key(k)
            if nk not in allow and (nk in drop or is_forbidden(k)):
                continue
            out[k] = _scrub(v, set(), drop, f"{where}.{k}")
        return out
    if isinstance(obj, (list, tuple)):
        items = [_scrub(v, set(), drop, f"{where}[{i}]") for i, v in enumerate(obj)]
        return type(obj)(items) if isinstance(obj, tuple) else items
    if isinstance(obj, (set, frozenset)):
        return type(obj)(_scrub(v, set(), drop, where) for v in obj)
    return obj


def find_forbidden(obj: Any, where: str = "", allow: Iterable[str] = ()) -> list[str]:
    """Paths of forbidden keys anywhere in ``obj`` (``allow``: permitted top-level names)."""
    allow = {norm_key(a) for a in allow}
    hits: list[str] = []

    def walk(x: Any, path: str, top: bool) -> None:
        if isinstance(x, Mapping):
            for k, v in x.items():
                if is_forbidden(k) and not (top and norm_key(k) in allow):
                    hits.append(f"{path}.{k}" if path else str(k))
                walk(v, f"{path}.{k}" if path else str(k), False)
        elif isinstance(x, (list, tuple, set, frozenset)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]", False)

    walk(obj, where, True)
    return hits


def _query_inputs(task: str) -> tuple[str, ...]:
    try:
        from calver.verifier.registry import get_family

        return tuple(get_family(task).query_keys)
    except KeyError:
        return ()


def data_payload_keys(task: str) -> frozenset[str]:
    """``problem.data`` entries of ``task`` that are policy-visible payloads whose inner keys are data,
    not field names (K&K speakers, CPT rows): the family's ``data_payload_keys``. Only their own name
    is screened; their contents pass verbatim. An unregistered task has none."""
    try:
        from calver.verifier.registry import get_family

        return frozenset(norm_key(k) for k in get_family(task).data_payload_keys)
    except KeyError:
        return frozenset()


def strip_problem(problem: Problem | Mapping[str, Any]) -> Problem:
    """Rebuild ``problem`` from the allow-list: no meta, no source id, no graph in constructed mode.
    A ``Problem``'s parsed graph (immutable) is kept as is, not rendered and re-parsed."""
    d = problem.to_dict(parsed_graph=True) if isinstance(problem, Problem) else dict(problem)
    d = {k: d.get(k) for k in PROBLEM_FIELDS if k in d}
    task = str(d.get("task", ""))
    inputs = _query_inputs(task)
    d["query"] = scrub(d.get("query") or {}, allow=inputs, drop=ANALYSIS_KEYS, where="problem.query")
    data = dict(d.get("data") or {})
    payload_keys = data_payload_keys(task)
    payload = {k: data.pop(k) for k in list(data) if norm_key(k) in payload_keys}
    if _declared_verification(problem) == "candidate_local":
        stmts = payload.pop("statements", None)
        people = payload.get("people")
        if "speakers" not in payload and isinstance(stmts, Mapping) and isinstance(people, (list, tuple)):
            payload["speakers"] = [q for q in people if q in stmts]  # who speaks: the text shows it anyway
    d["data"] = {**scrub(data, drop=ANALYSIS_KEYS, where="problem.data"), **payload}
    if d.get("mode", "supplied") != "supplied":
        if d.get("variables") is None and d.get("graph") is not None:
            raise FirewallError(
                f"problem {d.get('id')!r}: constructed mode without declared variables; the variable list "
                "would have to come from the hidden source graph"
            )
        d["graph"] = None
    if isinstance(d.get("text"), (Mapping, list)):
        raise FirewallError(f"problem {d.get('id')!r}: field 'text' must be a string")
    p = Problem.from_dict(d)
    p.source_id = p.id
    return p


def _declared_verification(problem: Problem | Mapping[str, Any]) -> str:
    """``meta["verification"]`` (default ``"grounded"``), validated; VerificationModeError otherwise."""
    meta = problem.meta if isinstance(problem, Problem) else problem.get("meta")
    task = problem.task if isinstance(problem, Problem) else problem.get("task")
    pid = problem.id if isinstance(problem, Problem) else problem.get("id")
    value = meta.get("verification") if isinstance(meta, Mapping) else None
    if value is None:
        return "grounded"
    if value not in VERIFICATION_MODES:
        raise VerificationModeError(f"problem {pid!r}: meta 'verification' must be one of "
                                    f"{', '.join(VERIFICATION_MODES)}, got {str(value)[:40]!r}")
    if value == "candidate_local" and task != KK_TASK:
        raise VerificationModeError(f"problem {pid!r}: meta 'verification' = 'candidate_local' applies to "
                                    f"{KK_TASK} only (a graph task's mode is its field 'mode')")
    return value


def verification_mode(problem: Problem | Mapping[str, Any]) -> str:
    """What the verifier sees when it scores ``problem`` as selectors do (on ``strip_problem(problem)``):

    - ``"source_graph"``: every trace is judged on the problem's source (supplied-graph mode, or a
      family whose policy-visible payload states the graph);
    - ``"candidate_graph"``: constructed mode: each trace is judged on its own GRAPH;
    - ``"grounded"`` / ``"candidate_local"`` (knights_knaves): the puzzle's formal statements, or the
      statements read from its text (``meta["verification"]``; a problem already stripped of its
      statements is candidate-local).

    Raises VerificationModeError (a FirewallError and a ProblemError) for an unknown
    ``meta["verification"]``, ProblemError for a malformed problem."""
    from calver.verifier.scoring import is_grounded

    task = problem.task if isinstance(problem, Problem) else (problem.get("task") if isinstance(problem, Mapping)
                                                                 else None)
    if task is None:
        raise ProblemError(f"verification_mode needs a Problem or its dict, got {type(problem).__name__}")
    _declared_verification(problem)
    stripped = strip_problem(problem)
    try:
        grounded = is_grounded(stripped)
    except KeyError as e:
        raise ProblemError(f"problem {stripped.id!r}: unregistered task {e.args[0]!r}") from None
    if task == KK_TASK:  # read from the text or not, a stripped puzzle's statements are hidden
        return "grounded" if "statements" in stripped.data else "candidate_local"
    return "source_graph" if grounded else "candidate_graph"


@dataclass(frozen=True)
class SelectorView:
    """Everything one selector call may read about one (problem, seed) unit."""

    problem_id: str
    seed: int
    problem: Problem
    texts: tuple[str, ...]
    candidate_index: tuple[int, ...]
    stored: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    # the verifier's verdict per candidate when the pool's score table has them (``ScoreTable.with_verdicts``);
    # None: selectors score the texts themselves. Label-free: scored on the stripped problem.
    verdicts: tuple[Verdict, ...] | None = field(default=None, compare=False, repr=False)
    _memo: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def k(self) -> int:
        return len(self.texts)

    @property
    def unit(self) -> tuple[str, int]:
        return (self.problem_id, self.seed)

    @property
    def prepared(self) -> PreparedProblem:
        """``problem`` prepared for scoring (:func:`calver.verifier.prepare`): the views of one problem
        share its stripped ``Problem`` object, and with it one PreparedProblem. Raises as ``prepare``."""
        return prepare(self.problem)

    def cached(self, key: str, fn):
        """Per-view memo of what selectors derive from the view itself (verdicts, parses), shared by the
        selectors of one run. Only ``fn(self)`` fills it: data from outside travels in typed fields."""
        if key not in self._memo:
            self._memo[key] = fn(self)
        return self._memo[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem_id": self.problem_id,
            "seed": self.seed,
            "problem": self.problem.to_dict(),
            "texts": list(self.texts),
            "candidate_index": list(self.candidate_index),
            "stored": {k: list(v) for k, v in sorted(self.stored.items())},
            "context": dict(self.context),
        }


def _scores(name: str, row: Mapping[str, Any], unit: tuple[str, int]) -> tuple[float, ...]:
    s = row.get("scores")
    if not isinstance(s, (list, tuple)) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) or x is None for x in s
    ):
        raise FirewallError(f"stored scores {name!r} for unit {unit}: 'scores' must be a list of numbers")
    return tuple(float("nan") if x is None else float(x) for x in s)


def make_views(pool, k: int | None = None, comparators: Sequence[str] = ()) -> list[SelectorView]:
    """Label-free views of every unit of ``pool`` (a :class:`calver.infer.pool.Pool`), K-prefix ``k``.

    ``comparators``: names of stored selections whose per-candidate ``scores`` are carried along.
    """
    problems = {pid: strip_problem(r["problem"]) for pid, r in ((r["problem"]["id"], r) for r in pool.problem_rows())}
    stored: dict[str, dict[tuple[str, int], tuple[float, ...]]] = {}
    for name in comparators:
        stored[name] = {u: _scores(name, row, u) for u, row in pool.selection(name).items()}
    try:
        context = pool.manifest().get("selector_context") or {}
    except (PoolError, OSError, ValueError, AttributeError):  # no/unreadable/non-JSON/non-object manifest
        context = {}
    if not isinstance(context, Mapping):
        raise FirewallError("manifest 'selector_context' must be a mapping")
    context = scrub(context, drop=ANALYSIS_KEYS, where="manifest.selector_context")
    views = []
    for unit in pool.units(k):
        if unit.problem_id not in problems:
            raise FirewallError(f"candidates name problem {unit.problem_id!r}, which problems.jsonl lacks")
        idx = tuple(int(r["candidate_index"]) for r in unit.rows)
        if idx != tuple(range(len(idx))):
            raise FirewallError(f"unit {unit.problem_id}/{unit.seed}: candidate indices {idx} are not 0..K-1")
        cmp = {}
        for name, rows in stored.items():
            s = rows.get((unit.problem_id, unit.seed))
            if s is None or len(s) < len(idx):
                raise FirewallError(f"stored scores {name!r} lack unit {unit.problem_id}/{unit.seed} (or its K)")
            cmp[name] = s[: len(idx)]
        views.append(
            SelectorView(
                problem_id=unit.problem_id,
                seed=unit.seed,
                problem=problems[unit.problem_id],
                texts=tuple(str(t) for t in unit.texts),
                candidate_index=idx,
                stored=cmp,
                context=context,
            )
        )
    return views


def check_view(view: SelectorView) -> None:
    """Refuse a view that carries anything the firewall forbids (a view built by hand, say)."""
    if not isinstance(view, SelectorView):
        raise FirewallError(f"selectors take SelectorView objects, got {type(view).__name__}")
    p = view.problem
    if not isinstance(p, Problem):
        raise FirewallError(f"view.problem must be a Problem, got {type(p).__name__}")
    hits = find_forbidden(p.query or {}, "problem.query", allow=_query_inputs(p.task))
    payload_keys = data_payload_keys(p.task)
    hits += find_forbidden({k: v for k, v in (p.data or {}).items() if norm_key(k) not in payload_keys}, "problem.data")
    hits += find_forbidden(dict(view.context), "context")
    if p.meta:
        hits.append("problem.meta")
    if p.source_id != p.id:
        hits.append("problem.source_id")
    if p.mode != "supplied" and p.graph is not None:
        hits.append("problem.graph (constructed mode: the source graph is a label)")
    for name, s in view.stored.items():
        if is_forbidden(name):
            hits.append(f"stored.{name}")
        if not isinstance(s, tuple) or not all(isinstance(x, float) for x in s):
            hits.append(f"stored.{name} (not a tuple of floats)")
    if not all(isinstance(t, str) for t in view.texts) or len(view.texts) != len(view.candidate_index):
        hits.append("texts (must be one string per candidate index)")
    if hits:
        raise FirewallError(f"unit {view.problem_id}/{view.seed}: forbidden field(s) in selector input: "
                            f"{', '.join(hits)}")


def view_hash(views: Iterable[SelectorView]) -> str:
    """sha256 over the canonical JSON of the stripped views (recorded beside each selection)."""
    h = hashlib.sha256()
    for v in views:
        h.update(json.dumps(v.to_dict(), sort_keys=True, default=_jsonable, allow_nan=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, float) and math.isnan(obj):
        return None
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
