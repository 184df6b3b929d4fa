"""``calver data bnlearn | cg2llm | kk``: the benchmark adapters as commands (``calver data clear`` lives
in :mod:`calver.data_gen.clear`).

Each writes ``OUT/problems.jsonl`` (one ``Problem.to_dict()`` per line, what ``calver sample --problems``
reads) and ``OUT/summary.json`` (items per network / task / size, and what was skipped), with the
per-problem cluster ids and breakdown fields of :mod:`calver.data_gen.meta`. Settings follow
:mod:`calver.config`: an optional ``--config`` YAML file, then ``--field value`` flags.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from calver.config import ConfigError, add_command, cfg_field, check_types, parse_command
from calver.data_gen.clear_core import ClearDataConfig, clear_rows
from calver.data_gen.gen_config import LEVELS
from calver.verifier.problem import Problem

BNLEARN_DEFAULT_NETS = ["asia", "cancer", "earthquake", "sachs", "survey", "alarm", "child", "insurance"]


def _positive(cfg: Any, *names: str) -> None:
    check_types(cfg)
    for name in names:
        if getattr(cfg, name) < 1:
            raise ConfigError(f"field {name!r} must be >= 1, got {getattr(cfg, name)}")


def _known(field: str, values: Sequence[Any], allowed: Sequence[Any]) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigError(f"field {field!r}: unknown {', '.join(map(str, bad))}; choose from "
                          f"{', '.join(map(str, allowed))}")
    if not values:
        raise ConfigError(f"field {field!r} needs at least one value")


@dataclass
class BnlearnDataConfig:
    """``calver data bnlearn``: supplied-graph problems on bnlearn networks (ATE from their real CPTs,
    binarized); ``level`` rewrites them as L1/L2/L3 text the policy must build the graph from."""

    out: str = cfg_field(help="output folder (problems.jsonl, summary.json)")
    nets: list[str] = cfg_field(BNLEARN_DEFAULT_NETS, help="bnlearn networks (bundled BIF files)")
    tasks: list[str] = cfg_field(["backdoor_set", "frontdoor_set", "separation_set", "mediator",
                                  "intervention_reachability", "ate"], help="tasks")
    n: int = cfg_field(10, help="problems per (network, task) at most")
    seed: int = cfg_field(0, help="seed of the query draws")
    variant: str = cfg_field("any", help="query variant of the set tasks")
    max_nodes: int = cfg_field(16, help="largest prompt graph (the query's ancestral subgraph)")
    level: str | None = cfg_field(None, help="L1 | L2 | L3: constructed-mode text (kept only when the prose "
                                  "reads back into exactly the source graph); null: graph supplied")

    def __post_init__(self) -> None:
        from calver.data_gen.bnlearn import BNLEARN_TASKS, available_networks

        _positive(self, "n", "max_nodes")
        _known("nets", self.nets, available_networks())
        _known("tasks", self.tasks, BNLEARN_TASKS)
        if self.level is not None and self.level not in LEVELS:
            raise ConfigError(f"field 'level' must be one of {', '.join(LEVELS)}, got {self.level!r}")


@dataclass
class Cg2llmDataConfig:
    """``calver data cg2llm``: CausalGraph2LLM-style items, each question rendered in every encoding
    (one cluster per question)."""

    out: str = cfg_field(help="output folder (problems.jsonl, summary.json)")
    nets: list[str] = cfg_field(["asia", "sachs", "child", "insurance", "alarm"], help="bnlearn networks")
    tasks: list[str] = cfg_field(["mediator", "intervention_reachability"], help="tasks")
    n: int = cfg_field(10, help="questions per (network, task) at most")
    seed: int = cfg_field(0, help="seed of the query draws")
    encodings: list[str] = cfg_field(["prose", "json_parents", "matrix", "graphml", "dot"],
                                     help="graph encodings each question is rendered in")
    max_nodes: int = cfg_field(30, help="largest context graph")

    def __post_init__(self) -> None:
        from calver.data_gen.bnlearn import available_networks
        from calver.data_gen.cg2llm import ENCODINGS

        _positive(self, "n", "max_nodes")
        _known("nets", self.nets, available_networks())
        _known("tasks", self.tasks, ("mediator", "intervention_reachability"))
        _known("encodings", self.encodings, ENCODINGS)


MAX_KK_N = 100_000  # puzzles per size: a bound, so a typo cannot run until killed


@dataclass
class KkDataConfig:
    """``calver data kk``: knights-and-knaves puzzles (unique solution, checked by truth table) from the
    package's seeded generator or from reasoning-gym (``--source reasoning_gym``: Xie et al.'s K&K
    generator, converted by :mod:`calver.data_gen.reasoning_gym_kk`; needs ``pip install reasoning-gym``).
    ``--verification candidate_local`` marks the problems so the label firewall drops their formal
    statements: CALVER then checks each trace against the statements it reads from the puzzle text
    (:mod:`calver.verifier.tasks.knights_text`; a puzzle whose text does not read back to its statements is
    skipped and counted); grading keeps the formal statements."""

    out: str = cfg_field(help="output folder (problems.jsonl, summary.json)")
    people: list[int] = cfg_field([3, 4, 5], help="puzzle sizes (people per puzzle)")
    n: int = cfg_field(20, help=f"puzzles per size (at most {MAX_KK_N})")
    seed: int = cfg_field(0, help="generator seed")
    verification: str = cfg_field("grounded", help="grounded | candidate_local (meta['verification']: what the "
                                  "verifier sees, the puzzle's formal statements or only its text)")
    source: str = cfg_field("calver", help="calver (the package's generator) | reasoning_gym (reasoning-gym's "
                            "knights_knaves dataset; needs `pip install reasoning-gym`)")

    def __post_init__(self) -> None:
        from calver.data_gen.knights import MAX_PEOPLE, MIN_PEOPLE
        from calver.verifier.tasks.knights_text import VERIFICATION_MODES

        _positive(self, "n")
        if self.n > MAX_KK_N:
            raise ConfigError(f"field 'n' must be at most {MAX_KK_N} puzzles per size, got {self.n}")
        _known("people", self.people, list(range(MIN_PEOPLE, MAX_PEOPLE + 1)))
        if self.verification not in VERIFICATION_MODES:
            raise ConfigError(f"field 'verification' must be one of {', '.join(VERIFICATION_MODES)}, "
                              f"got {self.verification!r}")
        sources = ("calver", "reasoning_gym")
        if self.source not in sources:
            raise ConfigError(f"field 'source' must be one of {', '.join(sources)}, got {self.source!r}")
        if self.source == "reasoning_gym":
            from calver.data_gen import reasoning_gym_kk

            if not reasoning_gym_kk.available():
                raise ConfigError(reasoning_gym_kk.INSTALL_HINT)



# ---- building ------------------------------------------------------------------------------------
def _per_cell(nets: Sequence[str], tasks: Sequence[str], make: Callable[[str, str], list[Problem]]
              ) -> tuple[list[Problem], dict[str, int]]:
    """Problems of every (network, task) cell, and how many each yielded."""
    problems: list[Problem] = []
    counts: dict[str, int] = {}
    for net in nets:
        for task in tasks:
            got = make(net, task)
            counts[f"{net}/{task}"] = len(got)
            problems += got
    return problems, counts


def bnlearn_rows(cfg: BnlearnDataConfig) -> tuple[list[Problem], dict[str, Any]]:
    from calver.data_gen.bnlearn import bnlearn_problems
    from calver.data_gen.cli import apply_level

    problems, counts = _per_cell(cfg.nets, cfg.tasks, lambda net, task: bnlearn_problems(
        net, task, cfg.n, cfg.seed, variant=cfg.variant, max_nodes=cfg.max_nodes))
    summary: dict[str, Any] = {"items": counts, "empty": sorted(k for k, v in counts.items() if not v)}
    if cfg.level is not None:
        problems, summary["level"] = apply_level(problems, cfg.level)
    return problems, summary


def cg2llm_rows(cfg: Cg2llmDataConfig) -> tuple[list[Problem], dict[str, Any]]:
    from calver.data_gen.cg2llm import cg2llm_problems

    problems, counts = _per_cell(cfg.nets, cfg.tasks, lambda net, task: cg2llm_problems(
        net, task, cfg.n, cfg.seed, encodings=cfg.encodings, max_nodes=cfg.max_nodes))
    questions = len({p.source_id for p in problems})
    return problems, {"items": counts, "questions": questions, "encodings": list(cfg.encodings),
                      "empty": sorted(k for k, v in counts.items() if not v)}


def kk_rows(cfg: KkDataConfig) -> tuple[list[Problem], dict[str, Any]]:
    sizes = list(dict.fromkeys(cfg.people))
    summary: dict[str, Any] = {}
    if cfg.source == "reasoning_gym":
        from calver.data_gen.reasoning_gym_kk import reasoning_gym_kk

        problems, skipped = [], {}
        for k in sizes:
            got, skip = reasoning_gym_kk(k, cfg.n, cfg.seed)
            problems += got
            skipped[f"{k} people"] = dict(sorted(skip.items()))
        summary["source"], summary["skipped"] = "reasoning_gym.logic.knights_knaves", skipped
    else:
        from calver.data_gen.knights import generate_kk

        problems = [generate_kk(k, i, cfg.seed) for k in sizes for i in range(cfg.n)]
        summary["source"] = "calver.data_gen.knights"
    if cfg.verification != "grounded":
        from calver.verifier.tasks.knights import text_reads_back

        kept = [p for p in problems if not text_reads_back(p)]
        summary["text_unreadable"] = len(problems) - len(kept)
        problems = kept
        for p in problems:
            p.meta["verification"] = cfg.verification
    return problems, {"items": dict(Counter(f"{p.meta['people']} people" for p in problems)), **summary,
                      "verification": cfg.verification}


def write_problems(out: Path, problems: Sequence[Problem], summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "problems.jsonl", "w", encoding="utf-8") as fh:
        for p in problems:
            fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps({"n_problems": len(problems), **summary}, indent=2) + "\n")


ADAPTERS: dict[str, tuple[type, Callable, str]] = {
    # `calver data clear` has its own parser (positional PATHs, coverage.json): calver.data_gen.clear_core
    "clear": (ClearDataConfig, clear_rows, "CLEAR find-one-valid items (bundled release, or PATH...)"),
    "bnlearn": (BnlearnDataConfig, bnlearn_rows, "bnlearn networks: graph supplied, or L1-L3 text (--level)"),
    "cg2llm": (Cg2llmDataConfig, cg2llm_rows, "CausalGraph2LLM-style items in several graph encodings"),
    "kk": (KkDataConfig, kk_rows, "knights-and-knaves puzzles (the package's generator)"),
}


def _run(name: str, args) -> int:
    from calver.data_gen.cli import check_out_dir

    cls, build, _ = ADAPTERS[name]
    cfg = parse_command(f"data {name}", cls, args)
    if cfg is None:
        return 2
    try:
        check_out_dir(cfg.out, "--out")
        problems, summary = build(cfg)
    except (ConfigError, ValueError, OSError) as e:
        print(f"calver data {name}: error: {e}", file=sys.stderr)
        return 2
    if not problems:
        empty = summary.get("empty") or summary.get("skipped") or {}
        print(f"calver data {name}: error: no problems were built with these options"
              + (f" ({json.dumps(empty)[:200]})" if empty else "") + "; nothing written", file=sys.stderr)
        return 2
    try:
        write_problems(Path(cfg.out), problems, summary)
    except OSError as e:
        print(f"calver data {name}: cannot write {cfg.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {len(problems)} problems to {Path(cfg.out) / 'problems.jsonl'}")
    for k, v in summary.get("items", {}).items():
        print(f"  {k}: {v}")
    return 0


def add_benchmark_commands(data_subparsers) -> None:
    """Register ``bnlearn``, ``cg2llm`` and ``kk`` on the ``calver data`` sub-parsers."""
    for name, (cls, _, help_text) in ADAPTERS.items():
        if name == "clear":  # registered by calver.data_gen.clear_core.add_clear_command
            continue
        p = add_command(data_subparsers, name, (cls,), help=help_text, description=cls.__doc__)
        p.set_defaults(func=lambda args, name=name: _run(name, args))


__all__ = ["BnlearnDataConfig", "Cg2llmDataConfig", "KkDataConfig", "add_benchmark_commands", "bnlearn_rows",
           "cg2llm_rows", "kk_rows", "write_problems"]
