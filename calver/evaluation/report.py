"""Write an evaluation: ``results.json`` (unrounded), ``report.md`` (tables with CIs, rounded for
display only), PNG figures (K curve, decomposition bars, corruption ladder), optional wandb logging.
Everything reads the typed results of :mod:`calver.evaluation.results`; several pools get the Table 2
layout (:mod:`calver.evaluation.multi_report`)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from calver.evaluation.graph_recovery import GraphRecovery
from calver.evaluation.results import Breakdown, EvalResult, Interval, KCurve, MultiEvalResult

CURVE_SELECTORS = ("calver", "prm", "plurality")


def write_json_out(command: str, result: Any, out: str | None) -> int:
    """Write ``result`` as JSON to ``out`` (nothing when None): 0, or 2 with ``calver COMMAND: error`` on stderr
    when the file cannot be written (callers print the result first, so minutes of work are not lost)."""
    if not out:
        return 0
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    except OSError as e:
        print(f"calver {command}: error: cannot write {out}: {e}", file=sys.stderr)
        return 2
    return 0


def share(part: int, whole: int) -> float | None:
    """``part / whole``, or None (null in a JSON report, "n/a" in a table) where nothing was counted."""
    return part / whole if whole else None


def pct(x: Any, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def ci_text(r: Interval | Mapping[str, Any] | None, signed: bool = False) -> str:
    """``estimate [low, high]`` in percent (an :class:`Interval`, or the dict a bootstrap returns)."""
    if not r or (not isinstance(r, Interval) and "estimate" not in r):  # absent, or {"n_units": 0}
        return "n/a"
    if isinstance(r, Interval):
        return f"{pct(r.estimate, signed)} [{pct(r.ci_low, signed)}, {pct(r.ci_high, signed)}]"
    return f"{pct(r['estimate'], signed)} [{pct(r['ci_low'], signed)}, {pct(r['ci_high'], signed)}]"


def num(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub markdown table (every row as wide as the header)."""
    for r in rows:
        if len(r) != len(header):
            raise ValueError(f"table row has {len(r)} cells for {len(header)} columns: {r}")
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]


def render_markdown(res: EvalResult, figures: dict[str, str]) -> str:
    m = res.meta
    assert m is not None, "render_markdown needs an evaluate() result (with meta)"
    L = [f"# CALVER evaluation: `{m.pool}`", "",
         f"{res.n_units} problem-seed units ({res.n_units_total} in the pool) in {res.n_clusters} clusters "
         f"(cluster key `{res.cluster_key}`). Headline intervals: {m.draws} clustered paired bootstrap draws; "
         f"decompositions: {m.decomp_draws}; seed {m.seed}. Percentages are rounded for display only; "
         "gains are computed from unrounded values (results.json).", ""]
    L += verification_lines(res.verification)
    L += headline_sections(res)
    if res.graph_recovery is not None:
        L += ["", *graph_recovery_section(res.graph_recovery)]
    t = res.tie_audit
    L += ["", "## Tie-rule audit (CALVER)", "", f"Units with a tied maximum score: {t.n_tied_units}.", ""]
    L += table(["tie rule", "accuracy [95% CI]", "draws"],
               [[n, ci_text(r), str(r.draws)]
                for n, r in (("first", t.calver_first), ("best", t.calver_best), ("worst", t.calver_worst))])
    L += ["", f"Best-worst band: {ci_text(t.band, True)} pp."]
    L += ["", f"## Repair decomposition vs `{res.baseline}`", ""]
    L += decomposition_table(res)
    f = res.fragmentation
    L += ["", "## Fragmentation condition", "",
          f"Pools with >= 1 valid candidate: {f.n_covered}; "
          f"fragmented (an invalid answer has strictly more mass than "
          f"every individual valid answer): {f.n_fragmented} ({pct(f.frac_of_covered)}%); "
          f"invalid unique plurality: "
          f"{f.n_invalid_unique_plurality} (CALVER valid in {pct(f.target_acc_in_invalid_plurality)}%).", ""]
    L += table(["stratum", "CALVER", "plurality", "gain (pp) [95% CI]"],
               [["fragmented", pct(f.target_acc_in_fragmented), pct(f.baseline_acc_in_fragmented),
                 ci_text(f.gain_in_fragmented, True)],
                ["covered, not fragmented", pct(f.target_acc_outside_fragmented),
                 pct(f.baseline_acc_outside_fragmented), ci_text(f.gain_outside_fragmented, True)]])
    c = res.calibration
    L += ["", f"## Calibration at score >= {c.threshold:g}", ""]
    L += table(["candidates", "precision", "recall", "FPR", "coverage", "AUROC"],
               [[str(c.n), num(c.precision), num(c.recall), num(c.fpr), num(c.coverage), num(c.auroc)]])
    if res.k_scaling is not None:
        k = res.k_scaling
        L += ["", "## K-prefix scaling (accuracy %)", ""]
        names = list(k.accuracy)
        rows = [[str(kk)] + [pct(k.accuracy[n][i]) for n in names] + [pct(k.coverage[i]), ci_text(k.gap[i], True)]
                for i, kk in enumerate(k.ks)]
        L += table(["K", *names, "coverage", f"{k.target} - {k.baseline} (pp)"], rows)
        if "k_curve" in figures:
            L += ["", f"![K curve]({figures['k_curve']})"]
    a = res.strict_ate
    L += ["", "## Strict-ATE audit", ""]
    if a is not None and a.n_units:
        L += [f"{a.n_max_score} max-score ATE traces: {a.n_correct} correct, {a.n_wrong} wrong; "
              f"strict certificates: {a.certified} ({a.certified_wrong} of them wrong).", ""]
        L += table(["guards violated (wrong max-score traces)", "traces"],
                   [[k, str(v)] for k, v in sorted(a.wrong_by_guard_set.items())] or [["none", "0"]])
    else:
        L += ["No ATE units in this pool."]
    if res.audits is not None:
        au = res.audits
        L += ["", "## Mechanism audits (frozen candidates)", ""]
        L += table(["perturbation", "candidates", "result"], [
            ["consistent renaming", str(au.rename.n), f"{au.rename.unchanged} scores unchanged"],
            ["answer swap (max-score)", f"{au.swap.applied_max_score} / {au.swap.n_max_score}",
             f"scores after: {au.swap.distribution}; lowered over all: {num(au.swap.lowered_all_frac)}"],
            ["witness damage (max-score)", f"{au.damage.applied_max_score} / {au.damage.n_max_score}",
             f"scores after: {au.damage.distribution}; lowered over all: {num(au.damage.lowered_all_frac)}"],
        ])
    if res.ladder is not None and res.ladder.rungs:
        lad = res.ladder
        L += ["", f"## Graph-corruption ladder (checker graph, {pct(lad.frac)}% edges)", ""]
        L += table(["rung", "CALVER", "plurality", "lift (pp) [95% CI]", "lift retained"],
                   [[r.rung, pct(r.calver), pct(r.plurality), ci_text(r.lift, True), num(r.retained, 2)]
                    for r in lad.rungs])
        if "ladder" in figures:
            L += ["", f"![ladder]({figures['ladder']})"]
    if "decomposition" in figures:
        L += ["", f"![decomposition]({figures['decomposition']})"]
    if res.builtin_agreement_with_stored:
        L += ["", "Built-in selector agreement with stored selections: "
              + ", ".join(f"{n}: {num(v)}" for n, v in res.builtin_agreement_with_stored.items())]
    for b in (res.breakdowns or {}).values():
        L += ["", *breakdown_section(b)]
    return "\n".join(L) + "\n"


def headline_sections(res: EvalResult) -> list[str]:
    """The selection-accuracy and paired-gain tables of one evaluation."""
    L = ["## Selection accuracy (%)", ""]
    rows = [[n, ci_text(r), str(r.n_units), str(r.draws)] for n, r in res.accuracy.items()]
    rows.append(["*candidate coverage (ceiling, not a selector)*", ci_text(res.coverage),
                 str(res.coverage.n_units), str(res.coverage.draws)])
    L += table(["selector", "accuracy [95% CI]", "n", "draws"], rows)
    L += ["", f"## Paired gains of `{res.target}` (pp)", ""]
    L += table(["vs", "gain [95% CI]", "cluster key", "draws"],
               [[n, ci_text(r, True), r.cluster_key, str(r.draws)] for n, r in res.paired.items()])
    if res.within_pool_auroc:
        L += ["", "## Within-pool AUROC of each selector's scores (pools of mixed validity; 50 is chance)", ""]
        L += table(["selector", "AUROC [95% CI]", "pools"],
                   [[n, ci_text(r), str(r.n_units)] for n, r in res.within_pool_auroc.items()])
    return L


# What the verifier sees in each mode (:func:`calver.infer.firewall.verification_mode`).
VERIFICATION_TEXT = {
    "source_graph": "(supplied graph): CALVER judged every candidate on the source graph the policy was shown.",
    "candidate_graph": "(constructed graph): the source graph is hidden, so CALVER judged each candidate on the graph "
                       "in its own GRAPH slot (read from the prose); correctness is graded on the source graph.",
    "grounded": "(K&K): CALVER checked each candidate against the puzzle's own statements.",
    "candidate_local": "(K&K): the formal statements are hidden; CALVER read each speaker's sentence from the "
                       "puzzle text and checked each candidate's CONSTRAINTS against it; correctness is graded on "
                       "the puzzle.",
}


def verification_lines(counts: Mapping[str, int]) -> list[str]:
    """``Verification: MODE N units; ...`` and one sentence per mode (nothing when no unit has a problem)."""
    if not counts:
        return []
    L = ["Verification: " + "; ".join(f"{m} {n} units" for m, n in counts.items()) + ".", ""]
    L += [f"- `{m}` {VERIFICATION_TEXT.get(m, ': a verification mode this report does not describe.')}"
          for m in counts]
    return L + [""]


def f1_text(r: Interval | None) -> str:
    """A mean edge F1 ``estimate [low, high]`` on its own 0-1 scale."""
    return "n/a" if r is None else f"{num(r.estimate)} [{num(r.ci_low)}, {num(r.ci_high)}]"


def graph_recovery_rows(g: GraphRecovery) -> list[list[str]]:
    """Candidate-level exact recovery and F1, then each selector's pick (units)."""
    rows = [["all candidates", str(g.n_candidates), ci_text(g.exact), f1_text(g.f1)]]
    rows += [[f"`{n}` pick", str(g.n_units), ci_text(s.exact), f1_text(s.f1)] for n, s in g.selected.items()]
    return rows


def graph_recovery_section(g: GraphRecovery, heading: str = "##") -> list[str]:
    """Exact graph recovery and edge F1 of the constructed-mode units (the bnlearn ladder's numbers)."""
    L = [f"{heading} Graph recovery (constructed mode)", "",
         f"{g.n_units} constructed-mode units in {g.n_clusters} clusters: each candidate's GRAPH slot against the "
         "source graph. Exact: same nodes, directed and bidirected edges; edge F1 over directed (ordered) and "
         "bidirected (unordered) edges, 1 when both have none. A GRAPH slot that does not parse is no graph "
         f"(not exact, F1 0): {g.n_unparsed} of {g.n_candidates} candidates.", ""]
    return L + table(["graphs", "n", "exact recovery (%) [95% CI]", "edge F1 [95% CI]"], graph_recovery_rows(g))


def decomposition_table(res: EvalResult) -> list[str]:
    return table(["pools", "n", "repairs", "new errors", "ratio", "net gain (pp) [95% CI]"],
                 [[k, str(d.n), str(d.repairs), str(d.new_errors), num(d.ratio, 2), ci_text(d.net_gain_ci, True)]
                  for k, d in res.decomposition.items()])


def breakdown_section(b: Breakdown) -> list[str]:
    """``## Breakdown by FIELD``: per stratum, units, clusters, accuracy per selector and the paired gains."""
    names = list(b.rows[0].accuracy) if b.rows else []
    gains = [n for n in names if n != b.target]
    L = [f"## Breakdown by `{b.field}` (accuracy %, 95% CI clustered within the stratum)", ""]
    if b.n_missing:
        L += [f"{b.n_missing} unit(s) whose problem does not record `{b.field}` are in stratum `n/a`.", ""]
    L += table([b.field, "units", "clusters", *names, "coverage", *[f"{b.target} - {n} (pp)" for n in gains]],
               [[r.stratum, str(r.n_units), str(r.n_clusters), *[ci_text(r.accuracy[n]) for n in names],
                 ci_text(r.coverage), *[ci_text(r.paired.get(n), True) for n in gains]] for r in b.rows])
    rec = [r for r in b.rows if r.graph_recovery is not None]
    if rec:  # strata with constructed-mode units
        L += ["", f"Graph recovery by `{b.field}` (constructed-mode units of the stratum):", ""]
        L += table([b.field, "graphs", "n", "exact recovery (%) [95% CI]", "edge F1 [95% CI]"],
                   [[r.stratum, *row] for r in rec for row in graph_recovery_rows(r.graph_recovery)])
    return L


def plot_k_panels(curves: Mapping[str, KCurve], path: Path,
                  selectors: tuple[str, ...] = CURVE_SELECTORS) -> Path | None:
    """One panel per policy: CALVER, plurality and the PRM (when present) with clustered 95% bands, and
    candidate coverage dashed, against K (prefixes of the frozen pool)."""
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(curves))
    rows = -(-len(curves) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.8 * rows), squeeze=False)
    for ax, (name, ks) in zip(axes.flat, curves.items()):
        x = ks.ks
        series = [(s, ks.accuracy[s], ks.ci.get(s)) for s in selectors if s in ks.accuracy]
        series.append(("coverage", ks.coverage, ks.ci.get("coverage")))
        for label, y, band in series:
            style = {"linestyle": "--", "marker": "s", "color": "grey"} if label == "coverage" else {"marker": "o"}
            ax.plot(x, [100 * v for v in y], label=label, **style)
            if band:
                ax.fill_between(x, [100 * b[0] for b in band], [100 * b[1] for b in band], alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(k) for k in x])
        ax.set_xlabel("K (first K candidates of the frozen pool)")
        ax.set_ylabel("% of units correct")
        ax.set_title(f"{name} policy")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(curves):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_figures(res: EvalResult, out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, str] = {}
    if res.k_scaling is not None:
        k = res.k_scaling
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for n, ys in k.accuracy.items():
            ax.plot(k.ks, [100 * y for y in ys], marker="o", label=n)
        ax.plot(k.ks, [100 * y for y in k.coverage], ls="--", color="gray", label="candidate coverage")
        ax.set_xscale("log", base=2)
        ax.set_xticks(k.ks, [str(x) for x in k.ks])
        ax.set_xlabel("K (prefix of one frozen pool)")
        ax.set_ylabel("accuracy (%)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "k_curve.png", dpi=120)
        plt.close(fig)
        figs["k_curve"] = "k_curve.png"
    dec = res.decomposition
    fig, ax = plt.subplots(figsize=(5, 3.5))
    strata = list(dec)
    x = np.arange(len(strata))
    ax.bar(x - 0.2, [dec[s].repairs for s in strata], 0.4, label="repairs")
    ax.bar(x + 0.2, [dec[s].new_errors for s in strata], 0.4, label="new errors")
    ax.set_xticks(x, strata)
    ax.set_ylabel("units")
    ax.set_title(f"{res.target} vs {res.baseline}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "decomposition.png", dpi=120)
    plt.close(fig)
    figs["decomposition"] = "decomposition.png"
    if res.ladder is not None and res.ladder.rungs:
        rungs = res.ladder.rungs
        fig, ax = plt.subplots(figsize=(5, 3.5))
        est = np.array([r.lift.estimate for r in rungs], float)
        lo = np.array([r.lift.ci_low for r in rungs], float)
        hi = np.array([r.lift.ci_high for r in rungs], float)
        err = 100 * np.nan_to_num(np.vstack([est - lo, hi - est])).clip(min=0)
        est = 100 * est
        ax.bar(range(len(rungs)), est, yerr=err, capsize=3)
        ax.set_xticks(range(len(rungs)), [r.rung for r in rungs], rotation=20)
        ax.set_ylabel("lift over plurality (pp)")
        fig.tight_layout()
        fig.savefig(out / "ladder.png", dpi=120)
        plt.close(fig)
        figs["ladder"] = "ladder.png"
    return figs


def log_wandb(res: EvalResult, project: str = "calver", mode: str = "offline", run_name: str | None = None,
              out_dir: str | None = None) -> str | None:
    """Log the report's tables to wandb (offline unless asked). Returns a note, or None on success."""
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError:
        return "wandb is not installed; skipped"
    run = wandb.init(project=project, mode=mode, name=run_name, dir=out_dir,
                     config=res.meta.to_dict() if res.meta else {})
    acc = wandb.Table(columns=["selector", "accuracy", "ci_low", "ci_high", "n", "draws", "cluster_key"])
    for n, r in res.accuracy.items():
        acc.add_data(n, r.estimate, r.ci_low, r.ci_high, r.n_units, r.draws, r.cluster_key)
    gains = wandb.Table(columns=["vs", "gain", "ci_low", "ci_high", "draws", "cluster_key"])
    for n, r in res.paired.items():
        gains.add_data(n, r.estimate, r.ci_low, r.ci_high, r.draws, r.cluster_key)
    run.log({"accuracy": acc, "paired_gains": gains, "calibration": res.calibration.to_dict()})
    if res.k_scaling is not None:
        k = res.k_scaling
        kt = wandb.Table(columns=["K", *k.accuracy, "coverage"])
        for i, kk in enumerate(k.ks):
            kt.add_data(kk, *[k.accuracy[n][i] for n in k.accuracy], k.coverage[i])
        run.log({"k_scaling": kt})
    run.finish()
    return None


def write_report(res: EvalResult, out_dir: str | Path, *, figures: bool = True) -> dict[str, str]:
    """Write results.json, report.md and the PNGs into ``out_dir``; returns {artifact: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = plot_figures(res, out) if figures else {}
    (out / "results.json").write_text(json.dumps(res.to_dict(), indent=2, sort_keys=True))
    (out / "report.md").write_text(render_markdown(res, figs))
    return {"results": str(out / "results.json"), "report": str(out / "report.md"),
            **{k: str(out / v) for k, v in figs.items()}}


# ---- several pools ---------------------------------------------------------------------------------
def policy_table(res: MultiEvalResult) -> list[str]:
    """The Table 2 layout: per policy (and pooled) the accuracy of every selector and CALVER's paired gains
    over the medoid and plurality selectors."""
    names = list(res.pooled.accuracy)
    target = res.pooled.target
    gains = [n for n in ("medoid", res.pooled.baseline) if n in names and n != target]
    rows = [[r.stratum, str(r.n_units), str(r.n_clusters), *[ci_text(r.accuracy[n]) for n in names],
             ci_text(r.coverage), *[ci_text(r.paired.get(n), True) for n in gains]] for r in res.table]
    return table(["policy", "units", "clusters", *names, "coverage", *[f"{target} - {n} (pp)" for n in gains]], rows)


def render_multi_markdown(res: MultiEvalResult, figures: dict[str, str], policy_reports: Mapping[str, str]) -> str:
    p = res.pooled
    m = next(iter(res.policies.values())).meta
    sets = res.problem_sets
    scope = (f"**Union of different problem sets** (--union): problems per policy "
             f"{', '.join(f'{k}: {v}' for k, v in sets.items() if k != 'shared')}; in every pool: {sets['shared']}."
             if res.union else f"Every pool covers the same {sets['shared']} problems.")
    L = [f"# CALVER evaluation: {len(res.policies)} policies, {sum(len(v) for v in res.pools.values())} pools", "",
         f"{p.n_units} problem-seed units in {p.n_clusters} clusters (cluster key `{p.cluster_key}`, shared across "
         f"pools: one source problem sampled by several policies is one cluster). {scope} Headline intervals: "
         f"{m.draws if m else '?'} clustered paired bootstrap draws; decompositions: {m.decomp_draws if m else '?'}; "
         f"seed {m.seed if m else '?'}. Percentages are rounded for display only (results.json is unrounded).", ""]
    L += verification_lines(p.verification)
    L += ["## Policies (accuracy %, 95% CI)", ""]
    L += policy_table(res)
    rec = {k: r.graph_recovery for k, r in res.policies.items() if r.graph_recovery is not None}
    if rec:
        L += ["", "## Graph recovery per policy (constructed-mode units)", ""]
        L += table(["policy", "graphs", "n", "exact recovery (%) [95% CI]", "edge F1 [95% CI]"],
                   [[k, *row] for k, g in rec.items() for row in graph_recovery_rows(g)])
    L += ["", "Pools: " + "; ".join(f"`{k}`: " + ", ".join(f"`{x}`" for x in v) for k, v in res.pools.items())]
    L += ["", "## Pooled over policies", ""]
    L += [x.replace("## ", "### ", 1) if x.startswith("## ") else x for x in headline_sections(p)]
    L += ["", f"### Repair decomposition vs `{p.baseline}`, pooled over policies", ""]
    L += decomposition_table(p)
    if "k_curves" in figures:
        L += ["", "## K-curves per policy", "", f"![K-curves]({figures['k_curves']})"]
    for b in res.breakdowns.values():
        L += ["", *breakdown_section(b)]
    L += ["", "## Per-policy reports", ""]
    L += [f"- `{k}`: [{v}]({v})" for k, v in policy_reports.items()]
    return "\n".join(L) + "\n"


def write_multi_report(res: MultiEvalResult, out_dir: str | Path, *, figures: bool = True) -> dict[str, str]:
    """results.json, report.md, the K-curve panel grid and one full report per policy (``policy_<name>/``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs: dict[str, str] = {}
    curves = {k: r.k_scaling for k, r in res.policies.items() if r.k_scaling is not None}
    if figures and plot_k_panels(curves, out / "k_curves.png"):
        figs["k_curves"] = "k_curves.png"
    sub = {}
    for name, r in res.policies.items():
        d = f"policy_{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}"
        write_report(r, out / d, figures=figures)
        sub[name] = f"{d}/report.md"
    # key order kept: the policies stay in the order they were given
    (out / "results.json").write_text(json.dumps(res.to_dict(), indent=2))
    (out / "report.md").write_text(render_multi_markdown(res, figs, sub))
    return {"results": str(out / "results.json"), "report": str(out / "report.md"),
            **{k: str(out / v) for k, v in figs.items()}}
