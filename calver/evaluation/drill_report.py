"""``calver drill-report``: can a policy look up a node's edges in an arrow list, alone?

Every rule answer is an edge lookup (:mod:`calver.data_gen.drills`). This command asks a model held-out
lookup drills (seeded, so two models see the same ones), greedy, and checks each reply against the drill's
graph: lookups exact, scans listing every edge, scan marks right, beside the marks that writing "no" for every
edge would get right (the baseline a scan must beat). It reads no label: a drill's graph is its prompt.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from calver.config import add_command, cfg_field, parse_command
from calver.data_gen.drills import DrillConfig, drills, score_replies
from calver.data_gen.rationales import LookupCheck

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
    max_tokens: int = cfg_field(512, help="reply token limit")
    backend: str = cfg_field("vllm", help="vllm | hf")
    out: str | None = cfg_field(None, help="write the report as JSON here (default: print only)")

    def drill_config(self) -> DrillConfig:
        return DrillConfig(n=self.n, seed=self.seed, min_nodes=self.min_nodes, max_nodes=self.max_nodes,
                           namings=tuple(self.naming))


def rates(c: LookupCheck) -> dict[str, Any]:
    """The shares a report prints (None where nothing was counted)."""
    def share(a: int, b: int) -> float | None:
        return a / b if b else None

    return {"lookups": c.lookups, "exact": share(c.exact, c.lookups), "scans": c.scans,
            "complete": share(c.complete, c.scans), "scanned_in_graph": share(c.scanned_in_graph, c.scanned),
            "marks_right": share(c.marks_right, c.scanned), "no_everywhere": share(c.not_the_node_s, c.scanned)}


def run_drill_report(cfg: DrillReportConfig) -> dict[str, Any]:
    from calver.infer.sampler import SamplingConfig, make_sampler

    items = drills(cfg.drill_config())
    prompts = [d.row()["messages"][:2] for d in items]
    t0 = time.perf_counter()
    engine = {"max_model_len": 2048} if cfg.backend == "vllm" else {}
    with make_sampler(cfg.model, backend=cfg.backend, **engine) as sampler:
        comps = sampler.generate(prompts, SamplingConfig(temperature=0.0, max_tokens=cfg.max_tokens, logprobs=False))
    replies = [c[0].text for c in comps]
    return {"model": cfg.model, "drills": asdict(cfg.drill_config()), "seconds": round(time.perf_counter() - t0, 1),
            **rates(score_replies(items, replies)), "first_reply": replies[0] if replies else None}


def _main(args) -> int:
    cfg = parse_command("drill-report", DrillReportConfig, args)
    if cfg is None:
        return 2
    report = run_drill_report(cfg)
    text = json.dumps(report, indent=2)
    if cfg.out:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(text + "\n")
    print(text, file=sys.stdout)
    return 0


def add_commands(subparsers) -> None:
    p = add_command(subparsers, "drill-report", (DrillReportConfig,), description=__doc__,
                    help="ask a model held-out edge-lookup drills; check its scans against the graphs")
    p.set_defaults(func=_main)
