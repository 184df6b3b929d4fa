"""CLEAR inputs, the typed clean core and ``calver data clear`` (items -> problems: :mod:`calver.data_gen.clear`).

* inputs: files and/or folders (every ``*.json`` / ``*.jsonl`` under a folder), or the seven covered
  release files bundled in ``calver/data_gen/clear_release/`` (Apache-2.0, :func:`release_files`);
  problem ids made unique across files (:func:`make_ids_unique`);
* :func:`clean_core_rule`: the typed clean core's inclusion rule (:data:`CLEAN_CORE_RULE`), fixed from the
  published task type, question variant and graph type only;
* ``add_clear_command(data_subparsers)`` registers ``calver data clear [PATH ...] --out DIR [--clean_core]``
  (:class:`ClearDataConfig`; no PATH: the bundled files), writing ``problems.jsonl`` and ``coverage.json``;
  :func:`clear_rows` is the same build for ``calver bench``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import cfg_field
from calver.data_gen.clear import ClearStats, load_clear_with_stats, read_clear_lines
from calver.verifier.graph import GraphClass, GraphError
from calver.verifier.problem import Problem

__all__ = ["add_clear_command", "ClearDataConfig", "ClearInputError", "clear_rows", "clear_input_files",
           "load_clear_files", "make_ids_unique", "clean_core_rule", "select_clean_core", "release_dir",
           "release_files", "CLEAN_CORE_RULE", "CORE_FAMILIES", "PAPER_CORE_FAMILIES"]


# ---- inputs: files, folders, the bundled release ---------------------------------------------------
class ClearInputError(ValueError):
    """A CLEAR input that cannot be used (missing, unreadable, not CLEAR JSONL, nothing covered); one line."""


# The seven per-task release files whose items map_question covers (package data, Apache-2.0).
RELEASE_FILES = ("backdoor_adjustment_set.json", "backdoor_path.json", "blocked_path.json", "cycle.json",
                 "d-separation.json", "frontdoor_adjustment_set.json", "path.json")


def release_dir() -> Path:
    """The bundled CLEAR files (``calver/data_gen/clear_release/``: the covered tasks, LICENSE, SOURCE.md)."""
    from importlib import resources

    return Path(str(resources.files("calver.data_gen").joinpath("clear_release")))


def release_files() -> list[tuple[str, Path]]:
    """``(label, path)`` of every bundled release file, in :data:`RELEASE_FILES` order."""
    root = release_dir()
    missing = [n for n in RELEASE_FILES if not (root / n).is_file()]
    if missing:
        raise ClearInputError(f"the bundled CLEAR files are missing from {root} ({', '.join(missing)}); "
                              "reinstall calver or pass PATH")
    return [(f"bundled/{n}", root / n) for n in RELEASE_FILES]


def clear_input_files(paths: Sequence[str | Path]) -> list[tuple[str, Path]]:
    """``(label, path)`` for every file named by ``paths``, in order: a file as given; a folder: every
    ``*.json`` / ``*.jsonl`` under it, recursively, sorted by relative path. A file reached twice is read
    once (its first mention). A missing path or a folder without such files is a :class:`ClearInputError`."""
    out: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted((f for f in p.rglob("*") if f.suffix.lower() in (".json", ".jsonl") and f.is_file()),
                           key=lambda f: f.relative_to(p).as_posix())
            if not found:
                raise ClearInputError(f"no *.json or *.jsonl file under the folder {p}")
        elif p.is_file():
            found = [p]
        elif p.exists():
            raise ClearInputError(f"cannot read {p}: not a file or a folder")
        else:
            raise ClearInputError(f"cannot read {p}: no such file or folder")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append((str(f), f))
    return out


def load_clear_files(files: Sequence[tuple[str, Path]]) -> tuple[list[Problem], dict[str, Any]]:
    """Problems of every ``(label, path)`` file, in order, and the coverage report: totals, per task type,
    per family, skip reasons, ``per_file`` (the same per file), ``find_one_items`` (CLEAR question_type
    "FO" per task type) and ``id_collisions`` (:func:`make_ids_unique`)."""
    total = ClearStats()
    find_one: Counter = Counter()
    problems: list[Problem] = []
    per_file: dict[str, Any] = {}
    for label, path in files:
        try:
            got, st = load_clear_with_stats(path)
            find_one.update(_find_one_types(path))
        except UnicodeDecodeError as e:
            raise ClearInputError(f"cannot read {label}: not UTF-8 text (byte {e.start})") from None
        except OSError as e:
            raise ClearInputError(f"cannot read {label}: {e.strerror or e}") from None
        if st.clear_lines == 0:
            raise ClearInputError(f"{label} is not CLEAR JSONL: no line is a JSON object with a 'question' "
                                  "and a 'description'")
        per_file[label] = st.to_dict()
        for name in ("covered", "skipped", "by_task", "reasons"):
            getattr(total, name).update(getattr(st, name))
        problems += got
    report = total.to_dict()
    report["per_file"] = per_file
    report["find_one_items"] = {"total": sum(find_one.values()), "per_task_type": dict(sorted(find_one.items()))}
    renamed = make_ids_unique(problems)
    report["id_collisions"] = {"n_renamed": len(renamed), "renamed": renamed[:20],
                               "rule": "an id `clear-{uid}-{sid}` that several items share becomes "
                                       "`clear-{task_type}-{uid}-{sid}` (source_id `{task_type}-{uid}`) for each "
                                       "of them; a still shared id gets `-2`, `-3`, ... in reading order"}
    return problems, report


def _find_one_types(path: Path) -> Counter:
    c: Counter = Counter()
    for _, item in read_clear_lines(path):
        if isinstance(item, dict) and str(item.get("question_type", "")).upper() == "FO":
            c[str(item.get("task_type", "?"))] += 1
    return c


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def make_ids_unique(problems: list[Problem]) -> list[dict[str, str]]:
    """Make ``problem.id`` unique, deterministically, in place; return ``[{"from", "to"}]`` per rename.
    Ids are ``clear-{uid}-{sid}``: unique within the public release (each uid lives in one task file),
    but files from elsewhere (or two copies of one file) may share them. Every item of a shared id is
    renamed ``clear-{task_type}-{uid}-{sid}`` with source_id ``{task_type}-{uid}`` (a uid names one graph
    of one task file); an id still shared after that gets ``-2``, ``-3``, ... in reading order."""
    renamed: list[dict[str, str]] = []
    counts = Counter(p.id for p in problems)
    for p in problems:
        if counts[p.id] > 1:
            ttype = _slug(str(p.meta.get("task_type", "?")))
            new = f"clear-{ttype}-{p.id[len('clear-'):]}" if p.id.startswith("clear-") else f"{ttype}-{p.id}"
            renamed.append({"from": p.id, "to": new})
            p.id, p.source_id = new, f"{ttype}-{p.source_id}"
    seen: Counter = Counter()
    counts = Counter(p.id for p in problems)
    for p in problems:
        if counts[p.id] > 1:
            seen[p.id] += 1
            if seen[p.id] > 1:
                new = f"{p.id}-{seen[p.id]}"
                renamed.append({"from": p.id, "to": new})
                p.id = new
    return renamed


# ---- the typed clean core ----------------------------------------------------------------------------
# The published CLEAR task type each calver family grades (what map_question maps that file's questions to).
CLEAR_TASK_FAMILY = {"backdoor_adjustment_set": "backdoor_set", "frontdoor_adjustment_set": "frontdoor_set",
                     "d-separation": "separation_set", "blocked_path": "blocking_set", "cycle": "cycle_witness",
                     "path": "path", "backdoor_path": "backdoor_path"}
CORE_FAMILIES = tuple(CLEAR_TASK_FAMILY.values())
# The paper's Table 9 tasks (d-separation, back-door, blocked path, directed cycle): with only these the rule
# gives exactly the paper's 126 items on the public release.
PAPER_CORE_FAMILIES = ("backdoor_set", "separation_set", "blocking_set", "cycle_witness")
PAPER_CORE_N = 126

CLEAN_CORE_RULE = (
    "An item is in the typed clean core when (1) its published task_type has an implemented calver family "
    "and its question maps to that family, (2) the family's predicate is defined on the item's published "
    "graph_type (DAG, ADMG, DG = directed), (3) the question variant is 'any' - the task asks for one valid "
    "object ('Find one valid backdoor adjustment set', 'Find one valid nodeset that can d-separate', 'Find "
    "one valid nodeset that can block path', 'Find one cycle', 'Find one path'), so every member of the "
    "validity class answers it - and (4) the family is in core_families. Extremal variants (minimal, "
    "maximal, shortest, longest) are out: they ask for an optimum, which graph semantics makes unique for "
    "whole classes (the maximal back-door set of a DAG is every non-descendant of X but Y; the maximal "
    "front-door set under CLEAR's per-member reading is the union of the valid ones; the minimal blocking "
    "set of a path with a collider is the empty set) and which CLEAR publishes with one listed example. "
    "The rule reads only the task type, the question variant and the graph type: never the listed answer "
    "or the item's own validity-class size (n_valid is reported as a diagnostic only).")


def clean_core_rule(task_type: str, variant: str, graph_type: str, family: str,
                    families: Sequence[str] = CORE_FAMILIES) -> tuple[bool, str]:
    """Whether an item of published ``task_type`` / question ``variant`` / ``graph_type``, graded by
    ``family``, is in the typed clean core (:data:`CLEAN_CORE_RULE`), and why. Pure: no graph, no answer."""
    from calver.verifier.registry import get_family

    if CLEAR_TASK_FAMILY.get(task_type) != family:
        return False, f"task_type {task_type!r} has no calver family, or its question does not map to it"
    try:
        fam = get_family(family)
    except KeyError:
        return False, f"no implemented predicate for {family}"
    try:
        gclass = GraphClass.parse(graph_type)
    except GraphError:
        return False, f"graph_type {graph_type!r} is not a graph class calver types"
    if gclass not in fam.graph_classes:
        return False, f"the {family} predicate is not defined on {gclass.value} graphs"
    if variant != "any":
        return False, f"extremal variant {variant!r}: the task asks for an optimum, not any valid object"
    if family not in families:
        return False, f"family {family} not in core_families"
    return True, "find one valid object: any member of the validity class answers"


def select_clean_core(problems: Sequence[Problem], families: Sequence[str] = CORE_FAMILIES
                      ) -> tuple[list[Problem], dict[str, Any]]:
    """The clean-core problems (order kept) and the report: rule, count, per (task_type/variant/graph_type)
    cell kept or not and why, and the ``n_valid >= 2`` diagnostic of the kept items."""
    kept: list[Problem] = []
    cells: dict[str, dict[str, Any]] = {}
    for p in problems:
        ttype, gtype = str(p.meta.get("task_type", "?")), str(p.meta.get("graph_type", "?"))
        variant = str(p.query.get("variant", "any"))
        ok, why = clean_core_rule(ttype, variant, gtype, p.task, families)
        cell = cells.setdefault(f"{ttype}/{variant}/{gtype}", {"items": 0, "in_core": ok, "reason": why,
                                                                "n_valid_ge2": 0})
        cell["items"] += 1
        if ok:
            kept.append(p)
            cell["n_valid_ge2"] += int((p.meta.get("n_valid") or 0) >= 2)
    per_task: Counter = Counter(str(p.meta.get("task_type")) for p in kept)
    per_graph: Counter = Counter(str(p.meta.get("graph_type")) for p in kept)
    paper = sum(1 for p in kept if p.task in PAPER_CORE_FAMILIES)
    report = {
        "rule": CLEAN_CORE_RULE, "core_families": list(families), "n": len(kept),
        "of_covered": len(problems),
        "per_task_type": dict(sorted(per_task.items())), "per_graph_type": dict(sorted(per_graph.items())),
        "cells": dict(sorted(cells.items())),
        "n_valid_ge2": {"n": sum(1 for p in kept if (p.meta.get("n_valid") or 0) >= 2),
                        "note": "diagnostic only, never a filter: kept items whose own validity class "
                                "(meta n_valid) has at least two members"},
        "paper": {"n": PAPER_CORE_N, "of_find_one": 480, "paper_families": list(PAPER_CORE_FAMILIES),
                  "n_here_in_paper_families": paper,
                  "note": "the paper's 126 are the 'any'-variant items of its four Table-9 tasks; this package "
                          "also implements front-door and path predicates, whose 'any' items the rule adds "
                          "unless core_families leaves them out"},
    }
    return kept, report


# ---- command -----------------------------------------------------------------------------------------
_CORE_HELP = ("keep only the typed clean core: find-one-valid ('any' variant) items whose published task "
              "has a graph-class-compatible predicate (on the full release: 174 items, or the paper's 126 with "
              "--core_families " + " ".join(PAPER_CORE_FAMILIES) + "; rule in coverage.json)")


@dataclass
class ClearDataConfig:
    """``calver data clear``: CLEAR (Chen et al. 2024) items as supplied-graph problems, for the
    find-one-valid tasks a calver family grades (back-door / front-door adjustment sets, d-separating and
    path-blocking node sets, directed cycles, paths, back-door paths); every other item is skipped and counted.
    Writes OUT/problems.jsonl (what `calver sample --problems` reads) and OUT/coverage.json (per file and
    per task type: covered / skipped and why; the clean-core rule and counts with --clean_core)."""

    out: str = cfg_field(help="output folder (problems.jsonl, coverage.json)")
    paths: list[str] = cfg_field([], help="CLEAR JSONL files and/or folders (a folder: every *.json / *.jsonl "
                                 "under it, recursively, sorted); the positional PATHs set this; empty: the "
                                 "CLEAR release files bundled with calver (the 7 covered tasks, Apache-2.0)")
    clean_core: bool = cfg_field(False, help=_CORE_HELP)
    core_families: list[str] = cfg_field(list(CORE_FAMILIES), help="families the clean core may keep (default: "
                                         "all " + str(len(CORE_FAMILIES)) + ": " + " ".join(CORE_FAMILIES) + ")")

    def __post_init__(self) -> None:
        from calver.config import ConfigError, check_types

        check_types(self)
        bad = [f for f in self.core_families if f not in CORE_FAMILIES]
        if bad or not self.core_families:
            raise ConfigError(f"field 'core_families': {'unknown ' + ', '.join(bad) if bad else 'needs a value'}; "
                              f"choose from {', '.join(CORE_FAMILIES)}")


def clear_rows(cfg: ClearDataConfig) -> tuple[list[Problem], dict[str, Any]]:
    """The problems ``cfg`` asks for and the coverage report (``calver data clear``, ``calver bench``)."""
    files = clear_input_files(cfg.paths) if cfg.paths else release_files()
    problems, report = load_clear_files(files)
    report = {"inputs": [label for label, _ in files], **report}
    where = "the bundled CLEAR release" if not cfg.paths else ", ".join(cfg.paths)
    if not problems:
        raise ClearInputError(f"no CLEAR item in {where} is a find-one-valid question calver covers "
                              f"({report['total']} items read)")
    if cfg.clean_core:
        problems, report["clean_core"] = select_clean_core(problems, cfg.core_families)
        if not problems:
            raise ClearInputError(f"no clean-core item in {where} ({report['covered']} covered items, none "
                                  "an 'any'-variant item of core_families)")
    return problems, report


def _cmd_clear(args) -> int:
    import sys

    from calver.config import parse_command
    from calver.data_gen.cli import check_out_dir

    given = list(getattr(args, "path_args", None) or [])
    if given:
        if hasattr(args, "paths"):
            print("calver data clear: error: give the input as PATH... or as --paths, not both", file=sys.stderr)
            return 2
        args.paths = given
    cfg = parse_command("data clear", ClearDataConfig, args)
    if cfg is None:
        return 2
    try:
        check_out_dir(cfg.out, "--out")
        problems, report = clear_rows(cfg)
    except (ValueError, OSError) as e:  # ConfigError and ClearInputError are ValueErrors
        print(f"calver data clear: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    out = Path(cfg.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "problems.jsonl", "w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
        (out / "coverage.json").write_text(json.dumps({"n_problems": len(problems), **report}, indent=2) + "\n",
                                           encoding="utf-8")
    except OSError as e:
        print(f"calver data clear: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    core = report.get("clean_core")
    print(f"wrote {len(problems)} problems to {out / 'problems.jsonl'} ({report['covered']}/{report['total']} "
          "items covered" + (f"; clean core {core['n']}" if core else "") + ")")
    for t, c in report["per_task_type"].items():
        if c["covered"]:
            print(f"  {t}: {c['covered']} covered, {c['skipped']} skipped")
    return 0


def add_clear_command(data_subparsers) -> None:
    """Register ``clear [PATH ...] --out DIR [--clean_core]`` on the ``calver data`` sub-parsers."""
    import argparse
    import inspect
    import textwrap

    from calver.config import add_command

    p = add_command(data_subparsers, "clear", (ClearDataConfig,),
                    help="CLEAR find-one-valid items as calver problems (bundled release, or PATH...)",
                    description=inspect.cleandoc(ClearDataConfig.__doc__ or "").replace("``", "") + "\n\n"
                    + textwrap.fill("Clean core (--clean_core): " + CLEAN_CORE_RULE, 100),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path_args", nargs="*", default=[], metavar="PATH",
                   help="CLEAR JSONL files or folders (every *.json / *.jsonl under a folder, recursively); "
                        "none: read the CLEAR release files bundled with calver")
    p.set_defaults(func=_cmd_clear)
