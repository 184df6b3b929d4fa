"""Write an evaluation: ``results.json`` (unrounded), ``report.md`` (tables with CIs, rounded for
display only), PNG figures (K curve, decomposition bars, corruption ladder), optional wandb logging."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """Plain JSON: numpy scalars unwrapped, NaN -> null, ±inf -> "inf"/"-inf", tuple keys joined."""
    if isinstance(obj, dict):
        return {("/".join(map(str, k)) if isinstance(k, tuple) else str(k)): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        x = float(obj)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, (set, frozenset)):
        return sorted(jsonable(v) for v in obj)
    return obj


def pct(x: Any, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def ci_text(r: dict[str, Any] | None, signed: bool = False) -> str:
    if not r:
        return "n/a"
    return f"{pct(r['estimate'], signed)} [{pct(r['ci_low'], signed)}, {pct(r['ci_high'], signed)}]"


def num(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def render_markdown(res: dict[str, Any], figures: dict[str, str]) -> str:
    m = res["meta"]
    L = [f"# CALVER evaluation: `{m['pool']}`", "",
         f"{res['n_units']} problem-seed units ({res['n_units_total']} in the pool) in {res['n_clusters']} clusters "
         f"(cluster key `{res['cluster_key']}`). Headline intervals: {m['draws']} clustered paired bootstrap draws; "
         f"decompositions: {m['decomp_draws']}; seed {m['seed']}. Percentages are rounded for display only; "
         "gains are computed from unrounded values (results.json).", "",
         "## Selection accuracy (%)", ""]
    rows = [[n, ci_text(r), str(r["n_units"]), str(r["draws"])] for n, r in res["accuracy"].items()]
    rows.append(["*candidate coverage (ceiling, not a selector)*", ci_text(res["coverage"]),
                 str(res["coverage"]["n_units"]), str(res["coverage"]["draws"])])
    L += _table(["selector", "accuracy [95% CI]", "n", "draws"], rows)
    L += ["", f"## Paired gains of `{res['target']}` (pp)", ""]
    L += _table(["vs", "gain [95% CI]", "cluster key", "draws"],
                [[n, ci_text(r, True), r["cluster_key"], str(r["draws"])] for n, r in res["paired"].items()])
    t = res["tie_audit"]
    L += ["", "## Tie-rule audit (CALVER)", "", f"Units with a tied maximum score: {t['n_tied_units']}.", ""]
    L += _table(["tie rule", "accuracy [95% CI]", "draws"],
                [[n.replace("calver_", ""), ci_text(t[n]), str(t[n]["draws"])]
                 for n in ("calver_first", "calver_best", "calver_worst")])
    L += ["", f"Best-worst band: {ci_text(t['band'], True)} pp."]
    L += ["", f"## Repair decomposition vs `{res['baseline']}`", ""]
    L += _table(["pools", "n", "repairs", "new errors", "ratio", "net gain (pp) [95% CI]"],
                [[k, str(d["n"]), str(d["repairs"]), str(d["new_errors"]), num(d["ratio"], 2),
                  ci_text(d["net_gain_ci"], True)]
                 for k, d in res["decomposition"].items()])
    f = res["fragmentation"]
    L += ["", "## Fragmentation condition", "",
          f"Pools with >= 1 valid candidate: {f['n_covered']}; "
          f"fragmented (an invalid answer has strictly more mass than "
          f"every individual valid answer): {f['n_fragmented']} ({pct(f['frac_of_covered'])}%); "
          f"invalid unique plurality: "
          f"{f['n_invalid_unique_plurality']} (CALVER valid in {pct(f['target_acc_in_invalid_plurality'])}%).", ""]
    L += _table(["stratum", "CALVER", "plurality", "gain (pp) [95% CI]"],
                [["fragmented", pct(f["target_acc_in_fragmented"]), pct(f["baseline_acc_in_fragmented"]),
                  ci_text(f["gain_in_fragmented"], True)],
                 ["covered, not fragmented", pct(f["target_acc_outside_fragmented"]),
                  pct(f["baseline_acc_outside_fragmented"]), ci_text(f["gain_outside_fragmented"], True)]])
    c = res["calibration"]
    L += ["", "## Calibration at score >= "
          f"{num(c['threshold'], 0) if isinstance(c['threshold'], float) else c['threshold']}", ""]
    L += _table(["candidates", "precision", "recall", "FPR", "coverage", "AUROC"],
                [[str(c["n"]), num(c["precision"]), num(c["recall"]), num(c["fpr"]), num(c["coverage"]),
                  num(c["auroc"])]])
    if "k_scaling" in res:
        k = res["k_scaling"]
        L += ["", "## K-prefix scaling (accuracy %)", ""]
        names = list(k["accuracy"])
        rows = [[str(kk)] + [pct(k["accuracy"][n][i]) for n in names] + [pct(k["coverage"][i]),
                ci_text(k["gap"][i], True)] for i, kk in enumerate(k["ks"])]
        L += _table(["K", *names, "coverage", f"{k['target']} - {k['baseline']} (pp)"], rows)
        if "k_curve" in figures:
            L += ["", f"![K curve]({figures['k_curve']})"]
    a = res["strict_ate"]
    L += ["", "## Strict-ATE audit", ""]
    if a["n_units"]:
        L += [f"{a['n_max_score']} max-score ATE traces: {a['n_correct']} correct, {a['n_wrong']} wrong; "
              f"strict certificates: {a['certified']} ({a['certified_wrong']} of them wrong).", ""]
        L += _table(["guards violated (wrong max-score traces)", "traces"],
                    [[k, str(v)] for k, v in sorted(a["wrong_by_guard_set"].items())] or [["none", "0"]])
    else:
        L += ["No ATE units in this pool."]
    if "audits" in res:
        au = res["audits"]
        L += ["", "## Mechanism audits (frozen candidates)", ""]
        L += _table(["perturbation", "candidates", "result"], [
            ["consistent renaming", str(au["rename"]["n"]), f"{au['rename']['unchanged']} scores unchanged"],
            ["answer swap (max-score)", f"{au['swap']['applied_max_score']} / {au['swap']['n_max_score']}",
             f"scores after: {au['swap']['distribution']}; lowered over all: {num(au['swap']['lowered_all_frac'])}"],
            ["witness damage (max-score)", f"{au['damage']['applied_max_score']} / {au['damage']['n_max_score']}",
             f"scores after: {au['damage']['distribution']}; "
             f"lowered over all: {num(au['damage']['lowered_all_frac'])}"],
        ])
    if res.get("ladder", {}).get("rungs"):
        lad = res["ladder"]
        L += ["", f"## Graph-corruption ladder (checker graph, {pct(lad['frac'])}% edges)", ""]
        L += _table(["rung", "CALVER", "plurality", "lift (pp) [95% CI]", "lift retained"],
                    [[r["rung"], pct(r["calver"]), pct(r["plurality"]), ci_text(r["lift"], True), num(r["retained"], 2)]
                     for r in lad["rungs"]])
        if "ladder" in figures:
            L += ["", f"![ladder]({figures['ladder']})"]
    if "decomposition" in figures:
        L += ["", f"![decomposition]({figures['decomposition']})"]
    if res.get("builtin_agreement_with_stored"):
        L += ["", "Built-in selector agreement with stored selections: "
              + ", ".join(f"{n}: {num(v)}" for n, v in res["builtin_agreement_with_stored"].items())]
    return "\n".join(L) + "\n"


def plot_figures(res: dict[str, Any], out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, str] = {}
    if "k_scaling" in res:
        k = res["k_scaling"]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for n, ys in k["accuracy"].items():
            ax.plot(k["ks"], [100 * y for y in ys], marker="o", label=n)
        ax.plot(k["ks"], [100 * y for y in k["coverage"]], ls="--", color="gray", label="candidate coverage")
        ax.set_xscale("log", base=2)
        ax.set_xticks(k["ks"], [str(x) for x in k["ks"]])
        ax.set_xlabel("K (prefix of one frozen pool)")
        ax.set_ylabel("accuracy (%)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "k_curve.png", dpi=120)
        plt.close(fig)
        figs["k_curve"] = "k_curve.png"
    dec = res["decomposition"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    strata = list(dec)
    x = np.arange(len(strata))
    ax.bar(x - 0.2, [dec[s]["repairs"] for s in strata], 0.4, label="repairs")
    ax.bar(x + 0.2, [dec[s]["new_errors"] for s in strata], 0.4, label="new errors")
    ax.set_xticks(x, strata)
    ax.set_ylabel("units")
    ax.set_title(f"{res['target']} vs {res['baseline']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "decomposition.png", dpi=120)
    plt.close(fig)
    figs["decomposition"] = "decomposition.png"
    if res.get("ladder", {}).get("rungs"):
        rungs = res["ladder"]["rungs"]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        est = np.array([r["lift"]["estimate"] for r in rungs], float)
        lo = np.array([np.nan if r["lift"]["ci_low"] is None else r["lift"]["ci_low"] for r in rungs], float)
        hi = np.array([np.nan if r["lift"]["ci_high"] is None else r["lift"]["ci_high"] for r in rungs], float)
        err = 100 * np.nan_to_num(np.vstack([est - lo, hi - est])).clip(min=0)
        est = 100 * est
        ax.bar(range(len(rungs)), est, yerr=err, capsize=3)
        ax.set_xticks(range(len(rungs)), [r["rung"] for r in rungs], rotation=20)
        ax.set_ylabel("lift over plurality (pp)")
        fig.tight_layout()
        fig.savefig(out / "ladder.png", dpi=120)
        plt.close(fig)
        figs["ladder"] = "ladder.png"
    return figs


def log_wandb(res: dict[str, Any], project: str = "calver", mode: str = "offline", run_name: str | None = None,
              out_dir: str | None = None) -> str | None:
    """Log the report's tables to wandb (offline unless asked). Returns a note, or None on success."""
    try:
        import wandb  # type: ignore[import-not-found]
    except ImportError:
        return "wandb is not installed; skipped"
    run = wandb.init(project=project, mode=mode, name=run_name, dir=out_dir, config=jsonable(res["meta"]))
    acc = wandb.Table(columns=["selector", "accuracy", "ci_low", "ci_high", "n", "draws", "cluster_key"])
    for n, r in res["accuracy"].items():
        acc.add_data(n, r["estimate"], r["ci_low"], r["ci_high"], r["n_units"], r["draws"], r["cluster_key"])
    gains = wandb.Table(columns=["vs", "gain", "ci_low", "ci_high", "draws", "cluster_key"])
    for n, r in res["paired"].items():
        gains.add_data(n, r["estimate"], r["ci_low"], r["ci_high"], r["draws"], r["cluster_key"])
    run.log({"accuracy": acc, "paired_gains": gains, "calibration": jsonable(res["calibration"])})
    if "k_scaling" in res:
        k = res["k_scaling"]
        kt = wandb.Table(columns=["K", *k["accuracy"], "coverage"])
        for i, kk in enumerate(k["ks"]):
            kt.add_data(kk, *[k["accuracy"][n][i] for n in k["accuracy"]], k["coverage"][i])
        run.log({"k_scaling": kt})
    run.finish()
    return None


def write_report(res: dict[str, Any], out_dir: str | Path, *, figures: bool = True) -> dict[str, str]:
    """Write results.json, report.md and the PNGs into ``out_dir``; returns {artifact: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = plot_figures(res, out) if figures else {}
    (out / "results.json").write_text(json.dumps(jsonable(res), indent=2, sort_keys=True))
    (out / "report.md").write_text(render_markdown(res, figs))
    return {"results": str(out / "results.json"), "report": str(out / "report.md"),
            **{k: str(out / v) for k, v in figs.items()}}
