"""``calver data DATASET ...``: adapters for external benchmarks (CLEAR today)."""

from __future__ import annotations


def add_commands(sub) -> None:
    from calver.data_gen.clear import add_clear_command

    data = sub.add_parser("data", help="convert external benchmarks into calver problems")
    dsub = data.add_subparsers(dest="data_command", metavar="DATASET")
    add_clear_command(dsub)
    data.set_defaults(func=lambda args: data.print_help() or 2)
