"""The breakdown fields every adapter writes into ``Problem.meta``, and per-problem source ids.

``meta`` is analysis-only (the label firewall drops it before any selector sees a problem), so these
may be label-derived. The contract (:data:`META_KEYS`):

- ``source``: the adapter, one of :data:`SOURCES`; a text-level rewrite keeps its problem's source.
- ``network``: the named network (bnlearn, cg2llm problems only).
- ``encoding``: the graph encoding the prompt shows: a render format
  (:data:`calver.verifier.parsers.RENDER_FORMATS`), ``"text"`` for constructed-mode prose,
  ``"none"`` where there is no graph (knights and knaves).
- ``text_level``: ``"L1"`` / ``"L2"`` / ``"L3"`` for graph-from-text problems.
- ``people``: the number of people of a knights-and-knaves puzzle.
- ``ate``: the true average treatment effect of an ``ate_threshold`` problem.
- ``n_valid``: the size of the family's validity class, where cheap (:func:`class_size`).

:func:`query_source_id` builds the cluster key of the network-based adapters from network + query.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from calver.verifier.budget import TooLargeToGrade
from calver.verifier.graph import CausalGraph
from calver.verifier.problem import Problem

__all__ = ["SOURCES", "META_KEYS", "ENUM_MAX_NODES", "CLASS_CAP", "class_size", "query_source_id"]

SOURCES = ("generated", "CLEAR", "bnlearn", "cg2llm", "knights", "reasoning_gym", "ate")
META_KEYS = ("source", "network", "encoding", "text_level", "people", "ate", "n_valid")
ENUM_MAX_NODES = 16  # subset / path enumeration is exponential in the graph: past this, no n_valid
CLASS_CAP = 10_000  # classes that can explode (paths, cycles) are counted up to this many


def class_size(problem: Problem, max_nodes: int | None = ENUM_MAX_NODES, cap: int = CLASS_CAP) -> int | None:
    """``len(family.validity_class(...))`` of ``problem``, or None where that is not cheap: a graph
    over ``max_nodes`` nodes (None: no bound), a class past ``cap`` (families whose class can
    explode), a search past its work limit, or a family that does not enumerate. A query the family
    refuses raises its ProblemError."""
    fam = problem.family
    query = fam.normalize_query(problem)  # a bad query raises (ProblemError), whatever the graph's size
    g = fam.verification_object(problem)
    if g is None or (max_nodes is not None and isinstance(g, CausalGraph) and len(g) > max_nodes):
        return None
    try:
        # a limit is exact only where the class is not filtered afterwards (minimal/maximal sets are)
        objs = fam.validity_class(g, query, limit=cap + 1 if fam.large_class else None)
    except (NotImplementedError, TooLargeToGrade):
        return None
    return len(objs) if len(objs) <= cap else None


# ---- source ids -----------------------------------------------------------------------------------
_SAFE = re.compile(r"[A-Za-z0-9_.]+")
_KEY_ORDER = ("treatment", "source", "x", "outcome", "target", "y", "do", "threshold", "variant")


def _field(v: Any) -> str | None:
    """One readable id field, or None when ``v`` has no unambiguous one (then the id is hashed)."""
    if isinstance(v, str):
        return v if _SAFE.fullmatch(v) else None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v).replace("-", "m")  # repr is exact; 'm' (minus) keeps '-' the field separator
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) and _SAFE.fullmatch(x) for x in v):
        return "+".join(v)
    return None


def query_source_id(prefix: str, network: str, task: str, query: dict[str, Any], max_len: int = 96) -> str:
    """``{prefix}-{network}-{task}-{query values}`` (e.g. ``bnlearn-asia-backdoor_set-smoke-dysp-any``),
    one per (network, task, query): the fields are ``-``-free and each task's query keys are fixed,
    so the id is readable and unique. A name outside ``[A-Za-z0-9_.]`` or an id over ``max_len``
    gives ``{prefix}-{network}-{task}~{sha256 of the JSON of (network, task, query), 12 hex}``."""
    keys = sorted(query, key=lambda k: (_KEY_ORDER.index(k) if k in _KEY_ORDER else len(_KEY_ORDER), k))
    fields = [_field(network), task, *(_field(query[k]) for k in keys)]
    if None not in fields:
        sid = "-".join([prefix, *fields])  # type: ignore[list-item]
        if len(sid) <= max_len:
            return sid
    blob = json.dumps([network, task, query], sort_keys=True, ensure_ascii=False, default=sorted)
    head = re.sub(r"[^A-Za-z0-9_.]+", "_", str(network))[:40]
    return f"{prefix}-{head}-{task}~{hashlib.sha256(blob.encode('utf-8')).hexdigest()[:12]}"
