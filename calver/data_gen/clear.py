"""CLEAR (Chen et al. 2024) adapter: CLEAR JSONL items -> supplied-graph :class:`Problem` objects.

Covered (find-one-valid) question types, mapped by regex on the question text:

* backdoor adjustment set (any / minimal / maximal; DAG and ADMG)  -> ``backdoor_set``
* front-door adjustment set (any / minimal / maximal)                -> ``frontdoor_set`` (criterion=per_member)
* d-separation / m-separation node set (any / minimal / maximal)     -> ``separation_set``
* blocking set of a given typed path (any / minimal)                -> ``blocking_set``
* one directed cycle                                                 -> ``cycle_witness``
* one / the shortest / the longest path between two nodes              -> ``path``
* the shortest / the longest back-door path                           -> ``backdoor_path``

Everything else (yes/no, find-all, how-many, ...) is skipped and counted.
Grading always uses the family predicate; CLEAR's listed answers are kept only as metadata
(``meta["listed_answers"]``): for "Find one valid ..." items they are CLEAR's full list of valid
sets, for minimal/maximal variants and cycles one example among several valid ones. ``meta`` also
holds the breakdown fields ``source`` ("CLEAR"), ``encoding`` ("clear") and, where cheap, ``n_valid``
(the family's own validity class, :func:`calver.data_gen.meta.class_size`).

Inputs (files, folders, the bundled release), the typed clean core and ``calver data clear`` live in
:mod:`calver.data_gen.clear_core`.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from calver.data_gen.meta import class_size
from calver.verifier.graph import GraphClass, GraphError
from calver.verifier.parsers import parse_graph, parse_node_sets, parse_path
from calver.verifier.problem import Problem, ProblemError

__all__ = ["ClearStats", "load_clear", "load_clear_with_stats", "clear_item_to_problem", "map_question",
           "parse_listed_answers", "read_clear_lines"]

_NAME = r"[\"'`]?(?P<{g}>[^\s,\"'`]+?)[\"'`]?"
_VARIANT = r"(?:(?P<variant>minimal|minimum|smallest|maximal|maximum|largest)\s+)?"
_FIND = r"^\s*(?:please\s+)?(?:find|give|identify|name|return|list|provide|what\s+is)\s+(?:one|a|an|the|any)\s+"
_TAIL = r"\s*[.?!]?\s*$"


def _n(g: str) -> str:
    return _NAME.format(g=g)


def _variant(word: str | None) -> str:
    if not word:
        return "any"
    return "minimal" if word.lower() in ("minimal", "minimum", "smallest") else "maximal"


_TREAT_OUT = (rf"(?:for|of)\s+(?:the\s+)?(?:effect\s+of\s+)?(?:treatment|exposure|cause)\s+"
              rf"(?:node\s+|variable\s+)?{_n('x')}"
              rf"\s*(?:,\s*)?(?:and|on|to)\s+(?:the\s+)?(?:outcome|effect)\s+(?:node\s+|variable\s+)?{_n('y')}")
_TREAT_OUT2 = rf"(?:from|of)\s+(?:node\s+)?{_n('x')}\s+(?:to|on)\s+(?:node\s+)?{_n('y')}"
_SET_WORDS = r"(?:valid\s+)?(?:(?:node\s?set|set\s+of\s+nodes|set|conditioning\s+set|separating\s+set|separator)\s+)"

_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("backdoor_set", re.compile(_FIND + _VARIANT + r"(?:valid\s+)?back-?\s?door\s+adjustment\s+set\s+"
                                + rf"(?:{_TREAT_OUT}|{_TREAT_OUT2.replace('x>', 'x2>').replace('y>', 'y2>')})"
                                + _TAIL, re.I)),
    ("frontdoor_set", re.compile(_FIND + _VARIANT + r"(?:valid\s+)?front-?\s?door\s+adjustment\s+set\s+"
                                 + rf"(?:{_TREAT_OUT}|{_TREAT_OUT2.replace('x>', 'x2>').replace('y>', 'y2>')})"
                                 + _TAIL, re.I)),
    ("separation_set", re.compile(_FIND + _VARIANT + _SET_WORDS
                                  + r"(?:that|which)\s+(?:can\s+)?(?:[dm]-?\s?separates?|separates?)\s+"
                                  r"(?:the\s+)?(?:nodes?\s+|variables?\s+)?(?P<xs>.+?)\s+(?:and|from)\s+"
                                  r"(?:the\s+)?(?:nodes?\s+|variables?\s+)?"
                                  r"(?P<ys>.+?)" + _TAIL, re.I)),
    ("blocking_set", re.compile(_FIND + _VARIANT + _SET_WORDS
                                + r"(?:that|which)\s+(?:can\s+)?blocks?\s+(?:the\s+)?path\s*:?\s*"
                                r"(?P<path>.+?)" + _TAIL, re.I)),
    ("backdoor_path", re.compile(_FIND + r"(?:(?P<length>shortest|longest)\s+)?(?:valid\s+)?back-?\s?door\s+paths?\s+"
                                 + _TREAT_OUT2 + _TAIL, re.I)),
    ("path", re.compile(_FIND + r"(?:(?P<length>shortest|longest)\s+)?(?:valid\s+)?paths?\s+"
                        + _TREAT_OUT2.replace("(?:from|of)", "(?:from|between)").replace("(?:to|on)", "(?:to|and)")
                        + _TAIL, re.I)),
    ("cycle_witness", re.compile(_FIND + r"(?:directed\s+)?cycle(?:\s+(?:in|of)\s+(?:this|the|the\s+given)\s+graph)?"
                                 + _TAIL, re.I)),
]


def _node_group(text: str) -> list[str]:
    """``C``, ``node C``, ``nodes A, B``, ``{A, B}``, ``A and B`` -> names."""
    t = re.sub(r"^(?:the\s+)?(?:nodes?|variables?|sets?)\s+", "", text.strip(), flags=re.I).strip()
    t = t.strip("{}[]() ")
    parts = [p.strip().strip("'\"`") for p in re.split(r"\s*,\s*|\s+and\s+", t) if p.strip()]
    parts = [re.sub(r"^(?:node|variable)\s+", "", p, flags=re.I) for p in parts]
    if not parts or any(not re.fullmatch(r"[^\s,{}\[\]()]+", p) for p in parts):
        raise ValueError(f"cannot read a node group from {text!r}")
    return parts


def map_question(question: str) -> tuple[str, dict[str, Any]] | None:
    """Map CLEAR question text to ``(task, query)``; ``None`` when not covered."""
    q = re.sub(r"\s+", " ", question or "").strip()
    if re.match(r"^\s*(?:please\s+)?(?:find|list|give)\s+all\b", q, re.I):
        return None  # find-all questions ask for the whole class, not one valid member
    for task, pat in _PATTERNS:
        m = pat.match(q)
        if not m:
            continue
        gd = m.groupdict()
        variant = _variant(gd.get("variant"))
        if task in ("backdoor_set", "frontdoor_set"):
            x, y = gd.get("x") or gd.get("x2"), gd.get("y") or gd.get("y2")
            if task == "frontdoor_set":  # CLEAR labels front-door sets by the per-member reading of (iii)
                return task, {"treatment": x, "outcome": y, "variant": variant, "criterion": "per_member"}
            return task, {"treatment": x, "outcome": y, "variant": variant}
        if task == "separation_set":
            try:
                xs, ys = _node_group(gd["xs"]), _node_group(gd["ys"])
            except ValueError:
                return None
            return task, {"x": xs, "y": ys, "variant": variant}
        if task in ("backdoor_path", "path"):
            length = (gd.get("length") or "any").lower()
            keys = ("treatment", "outcome") if task == "backdoor_path" else ("source", "target")
            return task, {keys[0]: gd["x"], keys[1]: gd["y"], "variant": length}
        if task == "blocking_set":
            if variant == "maximal":
                return None  # the blocking family has no maximal variant
            return task, {"path": gd["path"].strip().rstrip("."), "variant": variant}
        return task, {"variant": "any"}
    return None


# ---- listed answers ---------------------------------------------------------------------------
def _literal(text: str) -> Any:
    """``ast.literal_eval`` on a literal only (``set()`` is a literal since Python 3.9); never eval."""
    return ast.literal_eval(text.strip())


def _as_set(obj: Any) -> frozenset[str]:
    if isinstance(obj, (set, frozenset, list, tuple)):
        return frozenset(str(v) for v in obj)
    if isinstance(obj, str):
        return frozenset([obj])
    raise ValueError(f"not a node set: {obj!r}")


def parse_listed_answers(task: str, answer: Any) -> list[Any]:
    """CLEAR's listed answer -> list of answer objects (frozensets; node tuples for cycles;
    (nodes, edge types) pairs for paths)."""
    if task in ("backdoor_path", "path"):
        items = answer if isinstance(answer, list) else [answer]
        if len(items) == 1 and isinstance(items[0], str) and items[0].strip().startswith("["):
            items = _literal(items[0])
        out = []
        for a in items:
            nodes, types = parse_path(str(a))
            out.append((tuple(nodes), tuple(types) if types else None))
        return out
    if task == "cycle_witness":
        items = answer if isinstance(answer, list) else [answer]
        out = []
        for a in items:
            nodes = list(parse_path(str(a))[0])
            if len(nodes) > 1 and nodes[0] == nodes[-1]:
                nodes = nodes[:-1]
            out.append(tuple(nodes))
        return out
    if isinstance(answer, list):
        return [_as_set(a) if not isinstance(a, str) else _as_set(_parse_set_text(a)) for a in answer]
    text = str(answer).strip()
    try:
        obj = _literal(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return list(parse_node_sets(text))
    if isinstance(obj, list):
        return [_as_set(a) for a in obj]
    return [_as_set(obj)]


def _parse_set_text(text: str) -> Any:
    try:
        return _literal(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return parse_node_sets(text)[0]


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, frozenset):
        return sorted(obj)
    if isinstance(obj, tuple):
        return list(obj)
    return obj


# ---- items -> problems ------------------------------------------------------------------------
@dataclass
class ClearStats:
    """Per-``task_type`` coverage: ``covered[t]``, ``skipped[t]`` and skip ``reasons``."""

    covered: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    by_task: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    clear_lines: int = 0  # lines that are CLEAR-shaped objects (a "question" and a "description")

    def to_dict(self) -> dict[str, Any]:
        types = sorted(set(self.covered) | set(self.skipped))
        return {
            "total": sum(self.covered.values()) + sum(self.skipped.values()),
            "covered": sum(self.covered.values()),
            "per_task_type": {t: {"covered": self.covered[t], "skipped": self.skipped[t]} for t in types},
            "per_family": dict(sorted(self.by_task.items())),
            "skip_reasons": dict(self.reasons.most_common()),
        }


def _graph_kind(task: str, item: dict[str, Any]) -> GraphClass | None:
    if task == "cycle_witness":
        return GraphClass.DIRECTED
    raw = str(item.get("graph_type") or "")
    try:
        return GraphClass.parse(raw) if raw else None
    except GraphError:
        return None


def clear_item_to_problem(item: dict[str, Any]) -> tuple[Problem | None, str]:
    """One CLEAR item -> ``(problem, "")`` or ``(None, reason)`` when it is not covered."""
    if not isinstance(item, dict):
        return None, "not an object"
    question = str(item.get("question") or "")
    mapped = map_question(question)
    if mapped is None:
        return None, "question not mapped"
    task, query = mapped
    desc = str(item.get("description") or "")
    try:
        graph = parse_graph(desc, fmt="clear", kind=_graph_kind(task, item))
    except GraphError as e:
        return None, f"graph does not parse ({str(e)[:60]})"
    uid, sid = str(item.get("uid", "")), item.get("sid", "")
    listed: list[Any] = []
    if "answer" in item and item["answer"] not in (None, ""):
        try:
            listed = parse_listed_answers(task, item["answer"])
        except (ValueError, GraphError, SyntaxError, TypeError):
            return None, "listed answer does not parse"
    if (task not in ("cycle_witness", "path", "backdoor_path") and isinstance(item.get("answer"), str)
            and item["answer"].strip() == "[]"):
        return None, "no valid answer listed (unsatisfiable query)"
    meta = dict(item)
    meta["listed_answers"] = [_jsonable(a) for a in listed]
    meta.update(source="CLEAR", encoding="clear")
    pid = f"clear-{uid}" + (f"-{sid}" if sid != "" else "")
    try:
        problem = Problem(task=task, query=query, graph=graph, text=desc, mode="supplied",
                          id=pid, source_id=uid or pid, meta=meta)
        problem.family.normalize_query(problem)
        n_valid = class_size(problem)
    except (ProblemError, KeyError, GraphError) as e:
        return None, f"query invalid ({str(e)[:60]})"
    if n_valid is not None:
        meta["n_valid"] = n_valid
    return problem, ""


def read_clear_lines(path: str | Path) -> Iterable[tuple[int, Any]]:
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield i, json.loads(line)
            except (ValueError, RecursionError):  # not JSON, an over-long integer, nesting past the parser
                yield i, None


def load_clear_with_stats(path: str | Path) -> tuple[list[Problem], ClearStats]:
    """Read one CLEAR JSONL file; return the covered problems and per-task-type coverage."""
    stats = ClearStats()
    out: list[Problem] = []
    for _lineno, item in read_clear_lines(path):
        ttype = str(item.get("task_type", "?")) if isinstance(item, dict) else "?"
        if isinstance(item, dict) and "question" in item and "description" in item:
            stats.clear_lines += 1
        problem, why = clear_item_to_problem(item) if item is not None else (None, "invalid JSON line")
        if problem is None:
            stats.skipped[ttype] += 1
            stats.reasons[why.split(" (")[0]] += 1
            continue
        stats.covered[ttype] += 1
        stats.by_task[problem.task] += 1
        out.append(problem)
    return out, stats


def load_clear(path: str | Path) -> list[Problem]:
    """``Problem``s for the CLEAR items in ``path`` that a registered family covers (others skipped)."""
    return load_clear_with_stats(path)[0]
