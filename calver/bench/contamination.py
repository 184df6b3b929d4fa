"""``calver contamination``: does a training set hold a benchmark's graph or puzzle?

A policy trained on a graph that ``calver bench`` evaluates on (renamed or not) measures recall, not rule
learning. :func:`check` compares every training problem with every problem of the benchmark rows (built
with the same adapters and settings as ``calver bench --suite SUITE``) and the whole bnlearn networks those
rows draw from:

- **graphs, up to renaming**: two graphs match when a bijection of their nodes maps the directed edges onto
  the directed edges and the bidirected onto the bidirected (:mod:`calver.data_gen.isomorphism`: networkx's
  VF2 on a digraph whose arcs are labelled ``->`` / ``<->``, after a Weisfeiler-Lehman hash buckets the
  candidates). Graphs of fewer than :data:`MIN_NODES` nodes are left out: every small
  shape occurs everywhere, and a 3-node chain is no benchmark's signature.
- **knights-and-knaves puzzles**: equal when they have the same people and each says the same formula
  (:func:`puzzle_key`; the package's generator and reasoning-gym draw names from fixed lists, so equal
  seeds give equal puzzles).

The command exits 1 when it finds a match (each is listed), 0 when the training set is clean.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from calver.config import ConfigError, add_command, cfg_field, parse_command
from calver.data_gen.drills import load_drill_graphs
from calver.data_gen.isomorphism import GraphIndex
from calver.infer.sample import load_problems
from calver.verifier.graph import CausalGraph
from calver.verifier.problem import Problem

MIN_NODES = 5  # smaller graphs are left out of the graph check (see the module docstring)


@dataclass(frozen=True)
class Match:
    """One training problem that repeats a benchmark's graph (``kind="graph"``) or puzzle (``"puzzle"``)."""

    kind: str
    train_id: str
    bench: str  # where the benchmark item comes from: "<row key>: <problem id>" or "bnlearn network <name>"


@dataclass
class ContaminationReport:
    n_train_graphs: int = 0
    n_bench_graphs: int = 0
    n_train_puzzles: int = 0
    n_bench_puzzles: int = 0
    matches: list[Match] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.matches


def puzzle_key(p: Problem) -> str | None:
    """A knights-and-knaves puzzle's identity: its people and each one's statement (None for other tasks)."""
    if p.task != "knights_knaves":
        return None
    data = p.data or {}
    return json.dumps({"people": sorted(data.get("people") or p.variables or ()),
                       "statements": dict(sorted((data.get("statements") or {}).items()))}, sort_keys=True)


def source_graph(p: Problem) -> CausalGraph | None:
    return p.graph if isinstance(p.graph, CausalGraph) and len(p.graph.nodes) >= MIN_NODES else None


def check(train: Iterable[Problem], bench: Iterable[tuple[str, Problem | CausalGraph]],
          drill_graphs: Iterable[tuple[str, CausalGraph]] = ()) -> ContaminationReport:
    """Every training problem, and every lookup drill's graph (``(drill id, graph)``), against every benchmark
    item (``(label, problem or graph)``)."""
    rep = ContaminationReport()
    graphs: GraphIndex[str] = GraphIndex()
    puzzles: dict[str, str] = {}
    for label, item in bench:
        if isinstance(item, CausalGraph):
            g = item if len(item.nodes) >= MIN_NODES else None
        else:
            key = puzzle_key(item)
            if key is not None:
                puzzles.setdefault(key, f"{label}: {item.id}")
                continue
            g = source_graph(item)
            label = f"{label}: {item.id}"
        if g is not None:
            graphs.add(label, g)
    rep.n_bench_graphs = len(graphs)
    rep.n_bench_puzzles = len(puzzles)
    for p in train:
        key = puzzle_key(p)
        if key is not None:
            rep.n_train_puzzles += 1
            if key in puzzles:
                rep.matches.append(Match("puzzle", p.id, puzzles[key]))
            continue
        g = source_graph(p)
        if g is not None:
            _check_graph(rep, graphs, p.id, g)
    for drill_id, g in drill_graphs:
        if len(g.nodes) >= MIN_NODES:
            _check_graph(rep, graphs, drill_id, g)
    return rep


def _check_graph(rep: ContaminationReport, graphs: GraphIndex[str], train_id: str, g: CausalGraph) -> None:
    rep.n_train_graphs += 1
    hit = graphs.find(g)
    if hit is not None:
        rep.matches.append(Match("graph", train_id, hit))


def bench_items(suite: str, rows: Sequence[str] | None = None) -> list[tuple[str, Problem | CausalGraph]]:
    """The problems of ``calver bench --suite SUITE``'s rows (built as the bench builds them) and the whole
    bnlearn networks they draw from."""
    from types import SimpleNamespace

    from calver.bench.run import kk_source
    from calver.bench.suites import suite_rows
    from calver.data_gen.benchmark_cli import ADAPTERS
    from calver.data_gen.bnlearn import load_network

    items: list[tuple[str, Problem | CausalGraph]] = []
    nets: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for row in suite_rows(suite, list(rows) if rows else None):
            cls, build, _ = ADAPTERS[row.adapter]
            settings = dict(row.settings)
            if row.adapter == "kk":
                settings["source"] = kk_source(SimpleNamespace(kk_source="auto"))  # as `calver bench` picks it
            nets.update(settings.get("nets") or ())
            problems, _ = build(cls(out=str(Path(tmp) / row.key), **settings))  # the row's fixed build settings
            items += [(row.key, p) for p in problems]
    for name in sorted(nets):
        items.append((f"bnlearn network {name}", load_network(name)[0]))
    return items


@dataclass
class ContaminationConfig:
    """``calver contamination --train DIR``: list every training problem whose graph (up to renaming) or
    knights-and-knaves puzzle a ``calver bench`` suite (or an ``--against`` set) evaluates on; exit 1 if there
    is one."""

    train: str = cfg_field(help="training problems: a `calver gen --out` folder or a problems JSONL file")
    suite: str = cfg_field("paper", help="the calver bench suite to check against: paper | quick")
    rows: list[str] = cfg_field(help="only these rows of the suite (default: all)", default_factory=list)
    against: list[str] = cfg_field(help="more evaluation sets to check against (`calver gen` folders or problems "
                                   "JSONL files, e.g. a recipe's held-out splits), beside the suite",
                                   default_factory=list)
    clean_out: str | None = cfg_field(None, help="also write the training set without its contaminated problems "
                                      "here, as `calver gen` writes a dataset (its manifest's rows kept)")

    def __post_init__(self) -> None:
        from calver.bench.suites import SUITES

        if not self.train:
            raise ConfigError("field 'train' is required: pass --train DIR")
        if self.suite not in SUITES:
            raise ConfigError(f"field 'suite' must be one of {', '.join(SUITES)}, got {self.suite!r}")


def run(cfg: ContaminationConfig) -> ContaminationReport:
    train = load_problems(cfg.train)
    items = bench_items(cfg.suite, cfg.rows)
    for path in cfg.against:
        items += [(str(path), p) for p in load_problems(path)]
    rep = check(train, items, load_drill_graphs(cfg.train))
    if cfg.clean_out:
        write_clean(train, rep, Path(cfg.train), Path(cfg.clean_out))
    return rep


def write_clean(train: Sequence[Problem], rep: ContaminationReport, source: Path, out: Path) -> int:
    """Export ``train`` without the problems ``rep`` matched (a `calver gen` dataset: problems, SFT and GRPO
    rows, manifest); the source folder's manifest gives the generator config and the rows' trace style
    (:meth:`TraceStyle.from_manifest`), so the clean rows are the source's rows less the dropped ones."""
    from calver.data_gen.drills import drill_config_from_dict, drills
    from calver.data_gen.export import export_dataset
    from calver.data_gen.trace_style import TraceStyle

    manifest = source / "manifest.json"
    meta = json.loads(manifest.read_text()) if manifest.is_file() else {}
    bad = {m.train_id for m in rep.matches}
    kept = [p for p in train if p.id not in bad]
    drill_cfg = drill_config_from_dict(meta["drill_config"]) if meta.get("drill_config") else None
    kept_drills = [d for d in drills(drill_cfg) if d.id not in bad] if drill_cfg is not None else []
    export_dataset(kept, out, meta.get("config"), style=TraceStyle.from_manifest(meta), drills=kept_drills,
                   drill_cfg=drill_cfg,
                   extra_card={"contamination": {"dropped": sorted(bad), "source": str(source)}})
    return len(kept)


def _cli(args) -> int:
    cfg = parse_command("contamination", ContaminationConfig, args)
    if cfg is None:
        return 2
    try:
        rep = run(cfg)
    except (ConfigError, ValueError, OSError, KeyError) as e:
        print(f"calver contamination: error: {e}", file=sys.stderr)
        return 2
    print(f"{rep.n_train_graphs} training graphs (>= {MIN_NODES} nodes) against {rep.n_bench_graphs} benchmark "
          f"graphs, {rep.n_train_puzzles} training puzzles against {rep.n_bench_puzzles} ({cfg.suite} suite)")
    for m in rep.matches:
        print(f"  {m.kind}: training {m.train_id} = {m.bench}")
    print("clean" if rep.clean else f"{len(rep.matches)} contaminated training problem(s)")
    if cfg.clean_out:
        print(f"wrote the training set without them to {cfg.clean_out}")
    return 0 if rep.clean else 1


def add_contamination_command(subparsers) -> None:
    add_command(subparsers, "contamination", (ContaminationConfig,),
                help="check a training set against calver bench's graphs and puzzles",
                description=ContaminationConfig.__doc__).set_defaults(func=_cli)


__all__ = ["ContaminationConfig", "ContaminationReport", "MIN_NODES", "Match", "bench_items", "check",
           "puzzle_key"]
