"""``calver gen`` (synthetic problems, SFT/GRPO datasets) and ``calver data DATASET`` (external benchmarks).

    calver gen --tasks backdoor_set --n 1000 --seed 0 --out data/bd
    calver gen --tasks all --n 200 --seed 1 --encoding arrows json dot --many_satisfier --out data/mix
    calver gen --config configs/gen/many_satisfier.yaml [--seed 3] [--out DIR]

Every GenConfig / RunConfig field is a ``--field value`` flag (``calver.config`` conventions) that
overrides the YAML file's value; ``--task`` is an alias of ``--tasks`` (repeatable). ``--level L1|L2|L3``
rewrites each problem as prose of that level through ``calver.data_gen.text_levels`` (constructed-graph mode).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, add_command
from calver.data_gen.gen_config import GenConfig, RunConfig, check_task_limits, parse_run


def add_commands(subparsers) -> None:
    p = add_command(subparsers, "gen", (GenConfig, RunConfig),
                    help="generate synthetic causal-graph problems and export datasets", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    config_help="YAML run config (GenConfig keys plus tasks, n, out, level); flags override it")
    p.add_argument("--dry_run", "--dry-run", action="store_true", help="generate and print a summary; write nothing")
    p.set_defaults(func=run_gen)

    from calver.data_gen.benchmark_cli import add_benchmark_commands
    from calver.data_gen.clear_core import add_clear_command

    data = subparsers.add_parser("data", help="convert external benchmarks into calver problems")
    dsub = data.add_subparsers(dest="data_command", metavar="DATASET")
    add_clear_command(dsub)
    add_benchmark_commands(dsub)
    data.set_defaults(func=lambda args: data.print_help() or 2)


def build_run(args: argparse.Namespace) -> RunConfig:
    rc = parse_run(args.config, args)
    drills_alone = rc.n == 0 and rc.drills > 0  # n 0 with drills: a set of drills alone, no task needed
    if not rc.tasks and not drills_alone:
        raise ConfigError("field 'tasks' is required: pass --tasks TASK (or 'all') or set tasks in the config "
                          "(or --n 0 --drills N for drills alone)")
    if rc.n <= 0 and not rc.drills:
        raise ConfigError("field 'n' must be a positive integer (or 0 beside --drills N): pass --n N or set n "
                          "in the config")
    return rc


def check_out_dir(out: str | None, label: str = "field 'out'") -> None:
    """Refuse, before any work, an output folder that is missing or that a file stands in the way of."""
    if not out:
        raise ConfigError(f"{label} is required: pass --out DIR or set out in the config")
    for p in (Path(out), *Path(out).parents):  # the nearest existing ancestor must be a folder
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"{label}: {p} exists and is not a directory")
            break


def apply_level(problems: list, level: str, naming: Sequence[str] = ("letters",)) -> tuple[list, dict[str, Any]]:
    """Rewrite problems as ``level`` prose (constructed-graph mode) through
    ``calver.data_gen.text_levels``, keeping only items whose prose the rule-based extractor reads
    back into exactly the source graph. Each item uses its own rng (seeded by its id)."""
    import random

    from calver.data_gen import text_levels as tl

    lv = int(level[1:])
    # constructed prose draws its own names: a domain vocabulary when the run names one alone
    vocab = naming[0] if len(naming) == 1 and naming[0] in getattr(tl, "DOMAINS", {}) else None
    kept, total = [], 0
    for p in problems:
        total += 1
        admitted, _ = tl.constructed_problems([p], lv, random.Random(f"calver-level/{p.id}/{lv}"), vocab=vocab)
        kept += admitted
    stats = {"level": level, "total": total, "admitted": len(kept),
             "admission_rate": len(kept) / total if total else 0.0}
    return kept, stats


def run_gen(args: argparse.Namespace) -> int:
    from calver.data_gen.generators import generate, resolve_tasks

    try:
        rc = build_run(args)
        tasks = resolve_tasks(rc.tasks) if rc.tasks else []
        check_task_limits(rc.gen, tasks)
        if not args.dry_run:
            check_out_dir(rc.out)
        problems = []
        for task in tasks:
            made = generate(task, rc.n, rc.gen)
            print(f"{task}: {len(made)} problems", file=sys.stderr)
            problems += made
        level_stats = None
        if rc.level:
            problems, level_stats = apply_level(problems, rc.level, rc.gen.naming)
            print(f"level {rc.level}: admitted {level_stats['admitted']} of {level_stats['total']} "
                  "(round-trip faithfulness filter)", file=sys.stderr)
    except (ConfigError, KeyError, RuntimeError) as e:
        print(f"calver gen: error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        n_valid = [p.meta.get("n_valid", 0) for p in problems]
        print(f"{len(problems)} problems; mean validity-class size {sum(n_valid) / max(1, len(n_valid)):.2f}")
        return 0
    from calver.data_gen.drills import drills
    from calver.data_gen.export import export_dataset

    drill_cfg = rc.drill_config()
    try:
        manifest = export_dataset(problems, rc.out, rc.gen, style=rc.trace_style(), drills=drills(drill_cfg),
                                  drill_cfg=drill_cfg,
                                  extra_card={"level": rc.level, "level_admission": level_stats,
                                              "tasks_requested": list(rc.tasks), "n_per_task": rc.n})
    except OSError as e:  # a folder we may not write, a full disk, a path component that is a file
        print(f"calver gen: error: cannot write {rc.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    drilled = f" and {manifest['n_drills']} drills" if manifest["n_drills"] else ""
    print(f"wrote {manifest['n_rows']} rows{drilled} to {rc.out} (content hash {manifest['content_hash'][:16]}...)")
    return 0
