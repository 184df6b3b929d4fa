"""The ``calver`` console script. Each sub-package contributes its subcommands via ``add_commands``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from calver.config import ArgumentParser

# Modules exposing ``add_commands(subparsers)``; listed explicitly so the CLI map is readable here.
COMMAND_MODULES = (
    "calver.verifier.cli",
    "calver.data_gen.cli",  # gen, data
    "calver.train.cli",
    "calver.infer.cli",
    "calver.evaluation.cli",  # eval, refine, audit-judges, route: the commands that grade
    "calver.evaluation.baselines",  # baselines: answer-free heuristics' valid-answer rates on a problem set
    "calver.evaluation.policy_report",  # policy-report: a policy beside heuristics, rule agreement, shuffled control
    "calver.evaluation.drill_report",  # drill-report: can a model look up a node's edges in an arrow list, alone
    "calver.evaluation.trace_fit",  # fit-report: per trace line, teacher-forced, which line a policy has not learned
    "calver.bench",  # bench: a benchmark suite from problems to one table
    "calver.integrations.openenv_cli",  # serve-env: the verifier as a single-step OpenEnv environment server
    "calver.integrations.openrlhf_server",  # serve-reward: the verifier behind OpenRLHF's HTTP /get_reward
    "calver.demo",
    "calver.demo.recipe",  # recipe: issue 31's training recipe, stage by stage
    "calver.doctor",  # doctor: installed stack, what works here, what GPU use still lacks
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calver",
        description="Contract-following LLM policies selected by symbolic causal verification.",
    )
    # calver.config's parser: exact flag names, and an unknown flag is named with the closest known one
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for name in COMMAND_MODULES:
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:  # its parent package is not there
            found = None
        if found is None:
            continue
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
