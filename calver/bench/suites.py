"""The rows of ``calver bench``: each is one benchmark adapter (``calver data ...``) with fixed settings.

A :class:`BenchRow` names the adapter (``calver data ADAPTER``) and the adapter settings that build its
problems, the sampling seeds of its units and, for the docs and the table, how it relates to the
paper's Table 3 row. :data:`SUITES` holds two suites: ``paper`` (the paper's external-benchmark
protocol: CLEAR clean core, ten bnlearn networks with the graph supplied, the L1/L2/L3 text ladder,
CausalGraph2LLM's five encodings, knights-and-knaves with 3, 4 and 5 people) and ``quick`` (the same
rows, smaller, sized for a 2-core CPU). Every row's problems are built from seeds fixed here, never
from model outputs, so a suite is the same problem set on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from calver.data_gen.clear_core import PAPER_CORE_FAMILIES

# Paper rows use these ten bnlearn networks (the ladder rows keep those the round-trip filter admits).
PAPER_NETS = ["asia", "cancer", "earthquake", "sachs", "survey", "alarm", "child", "insurance", "hailfinder", "andes"]
QUICK_NETS = ["asia", "sachs", "survey", "child", "insurance", "alarm"]
# The supplied-graph and ladder rows ask for adjustment sets, as the paper's bnlearn rows do.
BNLEARN_ROW_TASKS = ["backdoor_set"]
CG2LLM_TASKS = ["mediator", "intervention_reachability"]


@dataclass(frozen=True)
class BenchRow:
    """One table row: ``adapter`` (a ``calver data`` adapter) built with ``settings``, sampled at ``seeds``."""

    key: str  # folder name and JSON key, e.g. "bnlearn_supplied"
    title: str  # the table's row label
    adapter: str  # "clear" | "bnlearn" | "cg2llm" | "kk"
    settings: Mapping[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    constructed: bool = False  # the policy builds the graph from text (exact recovery is reported)
    by: tuple[str, ...] = ()  # breakdown fields of the row's report (calver eval --by)


def _ladder(level: str, nets: list[str], n: int, seeds: tuple[int, ...]) -> BenchRow:
    words = {"L1": "edge-stated", "L2": "mechanism-explicit", "L3": "naturalistic"}[level]
    return BenchRow(f"bnlearn_{level.lower()}", f"{level} {words} text", "bnlearn",
                    {"nets": nets, "tasks": BNLEARN_ROW_TASKS, "n": n, "level": level}, seeds, constructed=True,
                    by=("network",))


def _kk(people: int, n: int, seeds: tuple[int, ...]) -> BenchRow:
    # candidate-local, as the paper: CALVER checks each assignment against the candidate's own formalization
    return BenchRow(f"kk_{people}", f"K&K, {people} people", "kk",
                    {"people": [people], "n": n, "verification": "candidate_local"}, seeds, by=("source",))


def _suite(nets: list[str], *, bn_n: int, ladder_n: int, cg_nets: list[str], cg_n: int, kk_n: int,
           seeds: tuple[int, ...], ladder_seeds: tuple[int, ...]) -> tuple[BenchRow, ...]:
    return (
        BenchRow("clear_core", "CLEAR clean core", "clear",
                 {"clean_core": True, "core_families": list(PAPER_CORE_FAMILIES)}, seeds, by=("task", "graph_class")),
        BenchRow("bnlearn_supplied", f"bnlearn, supplied DAG, {len(nets)} nets", "bnlearn",
                 {"nets": nets, "tasks": BNLEARN_ROW_TASKS, "n": bn_n}, seeds, by=("network",)),
        _ladder("L1", nets, ladder_n, seeds),
        _ladder("L2", nets, ladder_n, ladder_seeds),
        _ladder("L3", nets, ladder_n, ladder_seeds),
        BenchRow("cg2llm", "CausalGraph2LLM, five encodings", "cg2llm",
                 {"nets": cg_nets, "tasks": CG2LLM_TASKS, "n": cg_n}, seeds, by=("encoding", "task")),
        *(_kk(people, kk_n, seeds) for people in (3, 4, 5)),
    )


SUITES: dict[str, tuple[BenchRow, ...]] = {
    # Table 3 at the paper's sizes (CLEAR and the ladder's L2/L3 at three seeds; K&K 60 puzzles x 3 seeds)
    "paper": _suite(PAPER_NETS, bn_n=41, ladder_n=41, cg_nets=["asia", "sachs", "child", "insurance", "alarm"],
                    cg_n=48, kk_n=60, seeds=(0, 1, 2), ladder_seeds=(0, 1, 2)),
    # the same rows for a 2-core CPU: one seed, a few hundred problems in all
    "quick": _suite(QUICK_NETS, bn_n=12, ladder_n=10, cg_nets=["asia", "sachs", "child"], cg_n=4, kk_n=12,
                    seeds=(0,), ladder_seeds=(0,)),
}


def suite_rows(suite: str, keys: list[str] | None = None) -> tuple[BenchRow, ...]:
    """The rows of ``suite`` (all, or those named in ``keys``, in suite order); ValueError naming the
    known ones otherwise."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}")
    rows = SUITES[suite]
    if keys:
        known = [r.key for r in rows]
        bad = [k for k in keys if k not in known]
        if bad:
            raise ValueError(f"suite {suite!r} has no row {', '.join(bad)}; its rows: {', '.join(known)}")
        rows = tuple(r for r in rows if r.key in keys)
    return rows


__all__ = ["BenchRow", "PAPER_NETS", "QUICK_NETS", "SUITES", "suite_rows"]
