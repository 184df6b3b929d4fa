"""The ``calver bench`` table in the layout of the paper's Table 3 (one line per row; with several
policies, one line per row and policy: the Table 2 layout), as markdown, JSON and a PNG."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from calver.evaluation.report import ci_text, pct, table
from calver.evaluation.results import Interval, JsonRecord

# Columns of the markdown table, in order (the JSON carries every field unrounded).
COLUMNS = ("row", "policy", "n units", "parse rate", "plurality", "medoid", "CALVER", "CALVER - plurality [95% CI]",
           "CALVER - medoid [95% CI]", "coverage", "exact recovery", "edge F1", "verification")


@dataclass
class BenchLine(JsonRecord):
    """One (suite row, policy): accuracy of the three Table 3 selectors, CALVER's paired gains, the pool's
    coverage and parse rate, and exact graph recovery where the policy builds the graph."""

    row: str
    title: str
    policy: str
    n_problems: int
    n_units: int
    n_clusters: int
    parse_rate: float  # candidates whose ANSWER slot parses into an object of the task's type
    accuracy: dict[str, Interval]  # every selector that ran, not only the three shown
    gain_plurality: Interval
    gain_medoid: Interval
    coverage: Interval
    verification: str  # what CALVER checked (calver.infer.firewall.verification_mode), with unit counts
    n_prompt_too_long: int = 0  # units whose prompt filled the model's context: no candidates, counted wrong
    exact_recovery: Interval | None = None  # candidate level, constructed rows only
    edge_f1: Interval | None = None


@dataclass
class BenchTable(JsonRecord):
    """Everything ``calver bench`` reports: its lines, settings, and the wall time of each stage."""

    suite: str
    policies: dict[str, str]  # label -> "model [+ adapter]"
    prompt: str
    k: int
    lines: list[BenchLine] = field(default_factory=list)
    rows_built: dict[str, dict] = field(default_factory=dict)  # row -> its adapter summary
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> wall seconds
    commit: str | None = None
    selectors: list[str] = field(default_factory=list)


def _pp(iv: Interval | None) -> str:
    return ci_text(iv, True) if iv is not None else "–"


def markdown(t: BenchTable) -> str:
    several = len(t.policies) > 1
    cols = [c for c in COLUMNS if several or c not in ("policy", "CALVER - medoid [95% CI]")]
    rows = []
    for x in t.lines:
        cells = {
            "row": x.title, "policy": x.policy, "n units": str(x.n_units), "parse rate": pct(x.parse_rate),
            "plurality": pct(x.accuracy["plurality"].estimate), "medoid": pct(x.accuracy["medoid"].estimate),
            "CALVER": pct(x.accuracy["calver"].estimate), "CALVER - plurality [95% CI]": _pp(x.gain_plurality),
            "CALVER - medoid [95% CI]": _pp(x.gain_medoid), "coverage": pct(x.coverage.estimate),
            "exact recovery": pct(x.exact_recovery.estimate) if x.exact_recovery else "–",
            "edge F1": f"{x.edge_f1.estimate:.3f}" if x.edge_f1 else "–", "verification": x.verification,
        }
        rows.append([cells[c] for c in cols])
    pols = "; ".join(f"`{k}` = {v}" for k, v in t.policies.items())
    L = [f"# calver bench: suite `{t.suite}`", "",
         f"Policies: {pols}. Prompt `{t.prompt}`, K={t.k}. Accuracy in %, gains in percentage points with "
         "95% paired bootstrap intervals clustered by source problem; coverage = units with at least one correct "
         "candidate (a ceiling no selector sees); parse rate = candidates whose ANSWER parses; exact recovery / "
         "edge F1 = the candidates' own GRAPH against the hidden source graph (constructed rows).", ""]
    L += table(cols, rows)
    long_ = [f"{x.title}" + (f" / {x.policy}" if several else "") + f": {x.n_prompt_too_long}"
             for x in t.lines if x.n_prompt_too_long]
    if long_:
        L += ["", "Units whose prompt alone fills the model's context (no candidate sampled; counted as wrong): "
              + "; ".join(long_) + "."]
    others = sorted({n for x in t.lines for n in x.accuracy} - {"plurality", "medoid", "calver"})
    if others:
        L += ["", "Other selectors (accuracy %):", ""]
        L += table(["row", *(["policy"] if several else []), *others],
                   [[x.title, *([x.policy] if several else []),
                     *[pct(x.accuracy[n].estimate) if n in x.accuracy else "–" for n in others]] for x in t.lines])
    L += ["", "Stage wall times: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.seconds.items()), ""]
    if t.commit:
        L += [f"calver commit `{t.commit}`.", ""]
    return "\n".join(L)


def plot(t: BenchTable, path: Path) -> bool:
    """Grouped bars (plurality, medoid, CALVER with 95% CIs) per row, one panel per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not t.lines:
        return False
    pols = list(t.policies)
    fig, axes = plt.subplots(len(pols), 1, figsize=(max(6.0, 1.2 * len(t.lines) / len(pols) + 2), 3.2 * len(pols)),
                             squeeze=False)
    for ax, pol in zip(axes[:, 0], pols):
        lines = [x for x in t.lines if x.policy == pol]
        xs = np.arange(len(lines))
        for j, (name, label) in enumerate((("plurality", "plurality"), ("medoid", "medoid"), ("calver", "CALVER"))):
            iv = [x.accuracy[name] for x in lines]
            est = np.array([100 * i.estimate for i in iv])
            err = np.array([[100 * (i.estimate - i.ci_low) for i in iv], [100 * (i.ci_high - i.estimate) for i in iv]])
            ax.bar(xs + (j - 1) * 0.27, est, 0.27, yerr=np.clip(err, 0, None), capsize=2, label=label)
        ax.set_xticks(xs, [x.title for x in lines], rotation=25, ha="right", fontsize=7)
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{pol} (K={t.k})", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_table(t: BenchTable, out: Path, *, figures: bool = True) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.json").write_text(json.dumps(t.to_dict(), indent=2, sort_keys=True) + "\n")
    (out / "table.md").write_text(markdown(t))
    paths = {"json": str(out / "table.json"), "markdown": str(out / "table.md")}
    if figures and plot(t, out / "table.png"):
        paths["png"] = str(out / "table.png")
    return paths


def load_table(path: str | Path) -> BenchTable:
    return BenchTable.from_dict(json.loads(Path(path).read_text()))


__all__ = ["BenchLine", "BenchTable", "COLUMNS", "load_table", "markdown", "plot", "write_table"]

