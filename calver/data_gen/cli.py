"""``calver gen``: generate synthetic problems and export SFT/GRPO datasets.

    calver gen --task backdoor_set --n 1000 --seed 0 --out data/bd
    calver gen --task all --n 200 --seed 1 --encoding arrows json dot --many-satisfier --out data/mix
    calver gen --config configs/gen/many_satisfier.yaml [--seed 3] [--out DIR]

Flags override the YAML file's values. ``--level L1|L2|L3`` rewrites each problem as prose of that
level through ``calver.data_gen.text_levels`` (constructed-graph mode).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import Any

from calver.data_gen.gen_config import ENCODINGS, GRAPH_CLASSES, LEVELS, ConfigError, GenConfig, RunConfig, load_config
from calver.data_gen.names import NAMINGS

_GEN_FLAGS = ("seed", "n_nodes", "density", "graph_class", "latent", "naming", "encoding", "variants",
              "many_satisfier", "min_valid", "max_attempts", "max_candidates", "max_class")


def _n_nodes(text: str) -> list[int]:
    try:
        parts = [int(p) for p in text.replace(":", "-").split("-")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--n-nodes takes N or MIN-MAX, got {text!r}") from None
    if len(parts) not in (1, 2):
        raise argparse.ArgumentTypeError(f"--n-nodes takes N or MIN-MAX, got {text!r}")
    return [parts[0], parts[-1]]


def add_commands(subparsers) -> None:
    p = subparsers.add_parser("gen", help="generate synthetic causal-graph problems and export datasets",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="YAML run config (GenConfig keys plus task/tasks, n, out, level)")
    p.add_argument("--task", action="append", help="task family (repeatable), or 'all'")
    p.add_argument("--n", type=int, help="problems per task")
    p.add_argument("--seed", type=int, help="generator seed (required, here or in the config)")
    p.add_argument("--out", help="output directory")
    p.add_argument("--level", choices=LEVELS, help="render as L1/L2/L3 prose (calver.data_gen.text_levels)")
    p.add_argument("--encoding", nargs="+", choices=ENCODINGS, help="graph encoding(s), one drawn per item")
    p.add_argument("--n-nodes", type=_n_nodes, help="node count N or range MIN-MAX")
    p.add_argument("--density", type=float, help="forward edge probability")
    p.add_argument("--graph-class", nargs="+", choices=GRAPH_CLASSES, help="graph class(es)")
    p.add_argument("--latent", type=float, help="bidirected-edge probability per pair (ADMG)")
    p.add_argument("--naming", choices=NAMINGS, help="variable names")
    p.add_argument("--variants", nargs="+", help="query variants to draw from")
    p.add_argument("--many-satisfier", action="store_true", default=None,
                   help="keep only queries with >= --min-valid valid answers")
    p.add_argument("--min-valid", type=int, help="many-satisfier threshold (default 2)")
    p.add_argument("--max-attempts", type=int, help="retries per item")
    p.add_argument("--max-candidates", type=int, help="cap on candidate nodes for set families")
    p.add_argument("--max-class", type=int, help="cap on enumerated validity-class size")
    p.add_argument("--dry-run", action="store_true", help="generate and print a summary; write nothing")
    p.set_defaults(func=run_gen)


def build_run(args: argparse.Namespace) -> RunConfig:
    base: dict[str, Any] = {}
    run: dict[str, Any] = {}
    if args.config:
        rc = load_config(args.config)
        base = rc.gen.to_dict()
        run = {"tasks": rc.tasks, "n": rc.n, "out": rc.out, "level": rc.level}
    for key in _GEN_FLAGS:
        val = getattr(args, key, None)
        if val is not None:
            base[key] = val
    if "seed" not in base:
        raise ConfigError("field 'seed' is required: pass --seed S or set seed in the config")
    if args.task:
        run["tasks"] = tuple(args.task)
    for key in ("n", "out", "level"):
        if getattr(args, key) is not None:
            run[key] = getattr(args, key)
    rc = RunConfig(gen=GenConfig.from_dict(base), **run)
    if not rc.tasks:
        raise ConfigError("field 'tasks' is required: pass --task TASK (or 'all') or set task/tasks in the config")
    if rc.n <= 0:
        raise ConfigError("field 'n' must be a positive integer: pass --n N or set n in the config")
    return rc


def resolve_tasks(tasks: tuple[str, ...]) -> list[str]:
    from calver.data_gen.generators import available_tasks

    avail = available_tasks()
    if "all" in tasks:
        return avail
    unknown = [t for t in tasks if t not in avail]
    if unknown:
        raise ConfigError(f"field 'tasks': no generator for {', '.join(unknown)}; available: {', '.join(avail)}")
    return list(dict.fromkeys(tasks))


def apply_level(problems: list, level: str, naming: str = "letters") -> tuple[list, dict[str, Any]]:
    """Rewrite problems as ``level`` prose (constructed-graph mode) through
    ``calver.data_gen.text_levels``, keeping only items whose prose the rule-based extractor reads
    back into exactly the source graph. Each item uses its own rng (seeded by its id)."""
    import random

    if importlib.util.find_spec("calver.data_gen.text_levels") is None:
        raise ConfigError(f"field 'level': --level {level} needs calver.data_gen.text_levels, which is not "
                          "available in this checkout")
    tl = importlib.import_module("calver.data_gen.text_levels")
    lv = int(level[1:])
    vocab = naming if naming in getattr(tl, "DOMAINS", {}) else None
    kept, total = [], 0
    for p in problems:
        total += 1
        admitted, _ = tl.constructed_problems([p], lv, random.Random(f"calver-level/{p.id}/{lv}"), vocab=vocab)
        kept += admitted
    stats = {"level": level, "total": total, "admitted": len(kept),
             "admission_rate": len(kept) / total if total else 0.0}
    return kept, stats


def run_gen(args: argparse.Namespace) -> int:
    from calver.data_gen.generators import generate

    try:
        rc = build_run(args)
        tasks = resolve_tasks(rc.tasks)
        if not args.dry_run and not rc.out:
            raise ConfigError("field 'out' is required: pass --out DIR or set out in the config")
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
    from calver.data_gen.export import export_dataset

    manifest = export_dataset(problems, rc.out, rc.gen,
                              extra_card={"level": rc.level, "level_admission": level_stats,
                                          "tasks_requested": list(rc.tasks), "n_per_task": rc.n})
    print(f"wrote {manifest['n_rows']} rows to {rc.out} (content hash {manifest['content_hash'][:16]}...)")
    return 0
