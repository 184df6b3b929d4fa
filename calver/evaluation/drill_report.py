"""``calver drill-report``: can a policy look up a node's edges in an arrow list, or copy a graph into a GRAPH
line, alone?

Every rule answer is an edge lookup in the GRAPH line, and the GRAPH line is a transcription of the prompt's
graph (:mod:`calver.data_gen.drills`). This command asks a model held-out drills (seeded, so two models see the
same ones), greedy, and checks each reply against the drill's graph. Lookups: exact, scans listing every edge,
scan marks right, beside the marks that writing "no" for every edge would get right (the baseline a scan must
beat). Transcriptions, overall and per encoding: exact graphs, verbatim lines, edge precision and recall. It
reads no label: a drill's graph is its prompt.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import add_command, cfg_field, parse_command
from calver.data_gen.drills import (
    LOOKUP_KINDS,
    TRAINING_ENCODINGS,
    Drill,
    DrillCheck,
    DrillConfig,
    LookupDrill,
    TranscriptionDrill,
    check_replies,
    drills,
    load_drill_graphs,
)
from calver.data_gen.isomorphism import repeated_graphs
from calver.data_gen.rationales import node_edges
from calver.evaluation.breakdowns import stratum_order
from calver.evaluation.report import share, write_json_out
from calver.verifier.graph import CausalGraph

HELD_OUT = ("medicine", "economics", "education", "ecology")  # configs/gen/heldout-4-9.yaml's names


@dataclass
class DrillReportConfig:
    """``calver drill-report --model DIR [--n 200] [--seed 9001] [--min_nodes 4] [--max_nodes 9]``."""

    model: str = cfg_field(help="model directory (a merged checkpoint or a full fine-tune)")
    n: int = cfg_field(200, help="drills to ask")
    seed: int = cfg_field(9001, help="drill seed (use one no training run drew its drills from)")
    min_nodes: int = cfg_field(4, help="smallest drill graph")
    max_nodes: int = cfg_field(9, help="largest drill graph")
    naming: list[str] = cfg_field(help="node namings, one drawn per drill (calver.data_gen.names NAMINGS; default: "
                                  "the held-out split's domain vocabularies)", default_factory=lambda: list(HELD_OUT))
    kinds: list[str] = cfg_field(help="drill kinds, one drawn per drill: into | out of | transcribe",
                                 default_factory=lambda: list(LOOKUP_KINDS))
    encodings: list[str] = cfg_field(help="the transcription drills' encodings, one drawn per drill",
                                     default_factory=lambda: list(TRAINING_ENCODINGS))
    lookup: str = cfg_field("scan", help="how the lookups are asked (their system message) and answered: scan | rule "
                            "(as `calver gen --drill_lookup`)")
    lookup_encodings: list[str] = cfg_field(help="the GRAPH lines the lookups read, one drawn per drill: arrows | "
                                            "json_parents | matrix (as `calver gen --drill_lookup_encodings`)",
                                            default_factory=lambda: ["arrows"])
    adapter: str | None = cfg_field(None, help="a LoRA adapter over --model (default: the model alone)")
    exclude: list[str] = cfg_field(help="training data (`calver gen --out` folders or problems JSONL files) whose "
                                   "graphs, and drills' graphs, the asked drills must not repeat up to renaming: "
                                   "those drills are left out and counted", default_factory=list)
    max_tokens: int = cfg_field(512, help="reply token limit")
    backend: str = cfg_field("vllm", help="vllm | hf")
    out: str | None = cfg_field(None, help="write the report as JSON here (default: print only)")

    def drill_config(self) -> DrillConfig:
        return DrillConfig(n=self.n, seed=self.seed, min_nodes=self.min_nodes, max_nodes=self.max_nodes,
                           namings=tuple(self.naming), kinds=tuple(self.kinds), encodings=tuple(self.encodings),
                           lookup=self.lookup, lookup_encodings=tuple(self.lookup_encodings))


def rates(c: DrillCheck) -> dict[str, Any]:
    """The shares a report prints (None where nothing was counted)."""
    lk, tr = c.lookup, c.transcription
    return {"lookups": lk.lookups, "exact": share(lk.exact, lk.lookups),
            "lookup_precision": share(lk.listed_true, lk.listed), "lookup_recall": share(lk.listed_true, lk.true),
            "lookup_in_graph": share(lk.in_graph, lk.listed), "scans": lk.scans,
            "complete": share(lk.complete, lk.scans), "scanned_in_graph": share(lk.scanned_in_graph, lk.scanned),
            "marks_right": share(lk.marks_right, lk.scanned), "no_everywhere": share(lk.not_the_node_s, lk.scanned),
            "transcriptions": tr.drills, "graph_exact": share(tr.exact, tr.drills),
            "graph_verbatim": share(tr.verbatim, tr.drills), "edge_precision": share(tr.right, tr.listed),
            "edge_recall": share(tr.right, tr.graph_edges)}


def transcription_by_encoding(items: Sequence[Drill], checks: Sequence[DrillCheck]) -> dict[str, dict[str, Any]]:
    """Per encoding: the transcription drills asked, their exact and verbatim shares, edge precision and recall
    (``checks``: each drill's reply, checked)."""
    totals: dict[str, DrillCheck] = {}
    for d, c in zip(items, checks):
        if isinstance(d, TranscriptionDrill):
            totals[d.encoding] = totals.get(d.encoding, DrillCheck()) + c
    keep = ("transcriptions", "graph_exact", "graph_verbatim", "edge_precision", "edge_recall")
    return {enc: {k: v for k, v in rates(c).items() if k in keep} for enc, c in sorted(totals.items())}


def _solved_by(items: Sequence[Drill], per_drill: dict[str, int], key) -> dict[str, dict[str, Any]]:
    """The lookup drills asked and the share solved, per ``key(drill)`` (a string), rows in
    :func:`~calver.evaluation.breakdowns.stratum_order` (numbers in numeric order, then names: ``4+`` last)."""
    tally: dict[str, list[int]] = {}
    for d in items:
        if isinstance(d, LookupDrill) and d.id in per_drill:
            t = tally.setdefault(key(d), [0, 0])
            t[0] += 1
            t[1] += per_drill[d.id]
    return {k: {"drills": n, "solved": share(s, n)} for k, (n, s) in sorted(tally.items(),
                                                                          key=lambda kv: stratum_order(kv[0]))}


def lookups_by_line(items: Sequence[Drill], per_drill: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per lookup kind and the GRAPH line it reads (``"into / arrows"``): the lookup drills asked and the share
    solved (``per_drill``: each drill's outcome by id). Which way a line lists the edges matters to a causal
    model: a lookup whose node comes before what it copies (out of a node in an arrow line, into a node in a
    parents map) is a copy after a cue; the other way round, a search."""
    return _solved_by(items, per_drill, lambda d: f"{d.kind} / {d.encoding}")


def lookups_by_size(items: Sequence[Drill], per_drill: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per node count of the drill's graph: the lookup drills asked and the share solved."""
    return _solved_by(items, per_drill, lambda d: str(len(d.graph.nodes)))


def lookups_by_edges(items: Sequence[Drill], per_drill: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per number of edges the lookup must list (``0`` .. ``3``, ``4+``): the lookup drills asked and the share
    solved. A lookup that misses edges (low recall) fails more often the more edges there are to find."""
    def edges(d: LookupDrill) -> str:
        n = len(node_edges(d.graph, d.kind, d.node))
        return str(n) if n < 4 else "4+"
    return _solved_by(items, per_drill, edges)


@dataclass(frozen=True)
class AskedDrills:
    """The drills a report asks: ``config``'s, less the ``left_out`` whose graphs repeat a training graph."""

    config: DrillConfig
    items: list[Drill]
    left_out: int = 0


def training_graphs(path: str) -> list[CausalGraph]:
    """The graphs of a training set: its problems' (a `calver gen` folder or a problems JSONL file) and, in a
    folder, its drills' (drills.jsonl)."""
    from calver.infer.sample import load_problems

    graphs = (p.graph for p in load_problems(path))
    return [g for g in graphs if g is not None] + [g for _, g in load_drill_graphs(path)]


def asked_drills(cfg: DrillReportConfig) -> AskedDrills:
    """``cfg``'s drills, less those isomorphic (up to renaming) to a graph of ``cfg.exclude``'s training data.
    ValueError on a bad drill setting, OSError / ValueError on exclude data that cannot be read."""
    drill_cfg = cfg.drill_config()
    items = drills(drill_cfg)
    if not cfg.exclude:
        return AskedDrills(drill_cfg, items)
    seen = [g for path in cfg.exclude for g in training_graphs(path)]
    repeated = repeated_graphs([(d.id, d.graph) for d in items], seen)
    return AskedDrills(drill_cfg, [d for d in items if d.id not in repeated], len(repeated))


def run_drill_report(cfg: DrillReportConfig, asked: AskedDrills) -> dict[str, Any]:
    """Ask ``cfg.model`` the drills (:func:`asked_drills`), greedy, and check its replies."""
    from calver.infer.sampler import SamplingConfig, make_sampler

    items = asked.items
    prompts = [d.row()["messages"][:2] for d in items]
    t0 = time.perf_counter()
    engine = {"max_model_len": 2048} if cfg.backend == "vllm" else {}
    with make_sampler(cfg.model, cfg.adapter, backend=cfg.backend, **engine) as sampler:
        comps = sampler.generate(prompts, SamplingConfig(temperature=0.0, max_tokens=cfg.max_tokens, logprobs=False))
    replies = [c[0].text for c in comps]
    checks = check_replies(items, replies)
    solved = solved_rates(items, replies)
    per = solved["per_drill"]
    return {"model": cfg.model, "adapter": cfg.adapter, "drills": asdict(asked.config), "asked": len(items),
            "left_out_as_repeated": asked.left_out, "seconds": round(time.perf_counter() - t0, 1),
            **solved, **rates(sum(checks, DrillCheck())), "by_encoding": transcription_by_encoding(items, checks),
            "by_lookup": lookups_by_line(items, per), "by_size": lookups_by_size(items, per),
            "by_edges": lookups_by_edges(items, per),
            "first_reply": replies[0] if replies else None}


def solved_rates(items: Sequence[Drill], replies: Sequence[str]) -> dict[str, Any]:
    """The drills each reply solves (:meth:`LookupDrill.solved`: the asked lookup, exact; a transcription: the
    graph), their share with a bootstrap interval over drills, and each drill's outcome by id (for
    ``calver drill-compare``)."""
    from calver.evaluation.bootstrap import mean_ci

    per = {d.id: int(d.solved(r)) for d, r in zip(items, replies)}
    ci = mean_ci(list(per.values()), list(per), cluster_key="drill") if per else None
    return {"solved": ci["estimate"] if ci else None, "solved_ci": [ci["ci_low"], ci["ci_high"]] if ci else None,
            "per_drill": per}


def _main(args) -> int:
    cfg = parse_command("drill-report", DrillReportConfig, args)
    if cfg is None:
        return 2
    try:
        asked = asked_drills(cfg)
    except (OSError, ValueError) as e:  # a bad drill setting, exclude data that does not read
        print(f"calver drill-report: error: {e}", file=sys.stderr)
        return 2
    return _emit("drill-report", run_drill_report(cfg, asked), cfg.out)


def _emit(command: str, result: dict[str, Any], out: str | None) -> int:
    print(json.dumps(result, indent=2))
    return write_json_out(command, result, out)


@dataclass
class DrillCompareConfig:
    """``calver drill-compare --a REPORT.json --b REPORT.json [--out FILE]``."""

    a: str = cfg_field(help="a `calver drill-report --out` JSON")
    b: str = cfg_field(help="another, asked with the same drill settings (only the drills both asked are paired)")
    out: str | None = cfg_field(None, help="write the comparison as JSON here (default: print only)")


def _read_report(path: str) -> dict[str, Any]:
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable drill report ({e})") from None
    if not isinstance(report, dict) or not isinstance(report.get("per_drill"), dict) or "drills" not in report:
        raise ValueError(f"{path}: not a drill report with per-drill outcomes (per_drill)")
    if any(v not in (0, 1) or isinstance(v, float) for v in report["per_drill"].values()):
        raise ValueError(f"{path}: per_drill outcomes must be 0 or 1")
    return report


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Drills solved, ``b`` − ``a``, paired over the drills both asked, with a bootstrap interval over drills.
    ValueError when the two asked different drill settings or share no drill."""
    from calver.evaluation.bootstrap import paired_change_ci

    if a["drills"] != b["drills"]:
        raise ValueError("the two reports asked drills drawn with different settings")
    ids = [i for i in a["per_drill"] if i in b["per_drill"]]
    if not ids:
        raise ValueError("the two reports share no drill")
    res = paired_change_ci([a["per_drill"][i] for i in ids], [b["per_drill"][i] for i in ids], ids,
                           cluster_key="drill")
    return {"a": a.get("model"), "b": b.get("model"), "drills": len(ids), "solved_a": res["mean_a"],
            "solved_b": res["mean_b"], "b_minus_a": res["estimate"], "ci": [res["ci_low"], res["ci_high"]]}


def _compare_main(args) -> int:
    cfg = parse_command("drill-compare", DrillCompareConfig, args)
    if cfg is None:
        return 2
    try:
        res = compare_reports(_read_report(cfg.a), _read_report(cfg.b))
    except ValueError as e:  # a report that does not read or pair
        print(f"calver drill-compare: error: {e}", file=sys.stderr)
        return 2
    return _emit("drill-compare", res, cfg.out)


def add_commands(subparsers) -> None:
    p = add_command(subparsers, "drill-report", (DrillReportConfig,), description=__doc__,
                    help="ask a model held-out lookup and transcription drills; check its replies against the graphs")
    p.set_defaults(func=_main)
    p = add_command(subparsers, "drill-compare", (DrillCompareConfig,),
                    description="Drills solved by b minus drills solved by a, paired over the drills both reports "
                                "asked, with a percentile bootstrap interval over drills.",
                    help="drills solved by two policies, paired over the same drills, with a bootstrap interval")
    p.set_defaults(func=_compare_main)
