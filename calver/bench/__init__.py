"""``calver bench``: the paper's external-benchmark protocol (Table 3; Table 2's layout with several
policies) as one command, from any policy to one table.

    calver bench --suite quick --policy runs/demo/grpo/model --out runs/bench
    calver bench --suite paper --policy base=Qwen/Qwen2.5-7B-Instruct --policy sft=Qwen/Qwen2.5-7B-Instruct \\
        --adapter none --adapter runs/sft/adapter --prompt few_shot:2 --out runs/bench-paper

Rows (:mod:`calver.bench.suites`), stages (:mod:`calver.bench.run`), table (:mod:`calver.bench.table`);
``docs/benchmarks.md`` compares each row with the paper's protocol.
"""

from __future__ import annotations

import argparse

from calver.bench.config import BenchConfig, PolicySpec
from calver.bench.suites import SUITES, BenchRow, suite_rows
from calver.bench.table import BenchLine, BenchTable, load_table


def add_commands(subparsers) -> None:
    from calver.bench.run import cmd_bench
    from calver.config import add_command

    p = add_command(subparsers, "bench", (BenchConfig,), help="run a benchmark suite (Table 3 rows) for one or more "
                    "policies: build, sample, select, evaluate, one table", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(func=cmd_bench)
    from calver.bench.contamination import add_contamination_command

    add_contamination_command(subparsers)


__all__ = ["SUITES", "BenchConfig", "BenchLine", "BenchRow", "BenchTable", "PolicySpec", "add_commands", "load_table",
           "suite_rows"]
