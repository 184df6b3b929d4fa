"""The demo's report: ``report/report.md`` (+ PNGs, ``demo_summary.json``) and the headline table.

Sections (the slow CI test checks every heading): policies, shuffled-problem control, SFT -> GRPO,
GRPO reward curve, selectors per policy, K-curves, distilled PRM, refinement, wall times, and what
the numbers do and do not show. Effect sizes are measured, never asserted here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calver.demo.config import is_base_pool
from calver.evaluation.results import Interval
from calver.verifier import SLOTS

SECTIONS = ("## Policies", "## Shuffled-problem control", "## SFT -> GRPO", "## GRPO reward curve",
            "## Selectors", "## K-curves", "## Distilled PRM", "## Refinement", "## Wall times",
            "## What this shows and does not show")


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def ci(r: Interval | dict[str, Any] | None, scale: float = 100, signed: bool = False, digits: int = 1) -> str:
    """``estimate [low, high]`` of an :class:`Interval` or of a policy statistic's interval dict."""
    if not r:
        return "-"
    est, lo, hi = (r.estimate, r.ci_low, r.ci_high) if isinstance(r, Interval) else (
        r["estimate"], r["ci_low"], r["ci_high"])
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{f.format(scale * est)} [{f.format(scale * lo)}, {f.format(scale * hi)}]"


SUMMARY_FIELDS = ("accuracy", "coverage", "paired", "k_scaling", "n_units", "n_clusters")


def summary_json(rep: dict[str, Any]) -> str:
    """``demo_summary.json``: the report dict, each evaluation cut to its headline fields."""
    import json

    from calver.evaluation.results import to_json

    evals = {name: {k: to_json(getattr(res, k)) for k in SUMMARY_FIELDS}
             for name, res in rep.get("evaluations", {}).items()}
    return json.dumps({**rep, "evaluations": evals}, indent=2, default=str)


def build_report(cfg, run: Path, out: dict[str, Any], pools: dict[str, Path], timings: dict[str, float],
                 units: dict[str, list] | None = None) -> dict:
    """Compute the policy-level statistics, write ``report/`` and return the summary dict (``units``: each
    pool's scored units, when the caller already loaded them)."""
    from calver.evaluation.policy import compare_policies, policy_stats, shuffled_control
    from calver.evaluation.report import plot_k_panels, write_report
    from calver.evaluation.units import load_units

    rdir = run / "report"
    rdir.mkdir(parents=True, exist_ok=True)
    units = units or {name: load_units(str(root)) for name, root in pools.items()}
    rep: dict[str, Any] = {"policies": {}, "shuffled": {}, "run": str(run), "k": cfg.k}
    for name, us in units.items():
        rep["policies"][name] = policy_stats(us, draws=cfg.decomp_draws, seed=cfg.seed)
        if not is_base_pool(name):
            rep["shuffled"][name] = shuffled_control(us, shuffles=cfg.shuffles, seed=cfg.seed, draws=cfg.decomp_draws)
    if "sft" in units and "grpo" in units:
        rep["sft_to_grpo"] = compare_policies(units["sft"], units["grpo"], draws=cfg.draws, seed=cfg.seed)
    rep["evaluations"] = {}
    for name, res in out.get("evaluations", {}).items():
        write_report(res, rdir / f"pool_{name}")
        rep["evaluations"][name] = res
    rep["grpo"] = _grpo_summary(out.get("grpo"))
    rep["prm"] = _prm_summary(out.get("prm"))
    rep["refine"] = (out.get("refine") or {}).get("summary")
    rep["sft"] = {k: (out.get("sft") or {}).get(k) for k in ("mode", "steps", "step_time_mean_s", "train_runtime")}
    rep["timings_s"] = dict(timings)
    rep["reproducibility"] = {name: pool_fingerprint(root) for name, root in pools.items()}
    plots = {"reward": _plot_reward(rep["grpo"], rdir / "grpo_reward.png"),
             "k_curves": plot_k_panels({n: e.k_scaling for n, e in rep["evaluations"].items() if e.k_scaling},
                                       rdir / "k_curves.png")}
    rep["plots"] = {k: str(v) for k, v in plots.items() if v}
    (rdir / "report.md").write_text(markdown(cfg, rep))
    return rep


# ---- pieces -------------------------------------------------------------------------------------
def weights_digest(path: Path) -> str | None:
    """SHA-256 over the tensors (sorted by name, with dtype and shape): equal weights give equal digests
    even when two saves order the safetensors header differently (the file bytes then differ)."""
    import hashlib

    if not path.is_file():
        return None
    from safetensors.numpy import load_file

    h = hashlib.sha256()
    for name, t in sorted(load_file(str(path)).items()):
        h.update(f"{name}:{t.dtype}:{t.shape}".encode())
        h.update(t.tobytes())
    return h.hexdigest()


def pool_fingerprint(root: Path) -> dict[str, Any]:
    """What a re-run with the same seed must reproduce: the sampled model's content hash and a hash
    of every candidate (problem, seed, index, text), independent of the order rows were written."""
    import hashlib
    import json

    from calver.infer.pool import Pool

    pool = Pool(root)
    rows = sorted((r["problem_id"], r["seed"], r["candidate_index"], r["text"]) for r in pool.candidate_rows())
    model = (pool.manifest().get("model") or {})
    return {"model_content_hash": model.get("content_hash"),
            "weights_sha256": weights_digest(Path(model.get("path") or "") / "model.safetensors"),
            "candidates_sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest(), "candidates": len(rows)}


def _grpo_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    if not s:
        return None
    curve = []
    for h in s.get("logged_metrics", []):
        if "reward" in h:
            curve.append({"step": h.get("step", len(curve) + 1), "reward": h["reward"],
                          **{slot: h.get(f"verifier/{slot.lower()}") for slot in SLOTS},
                          "six": h.get("verifier/max_score_rate")})
    for i, c in enumerate(curve):
        c["step"] = i + 1
    n = max(1, len(curve) // 4)
    first, last = curve[:n], curve[-n:]

    def mean(rows, key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    rs = s.get("reward_stats", {})
    return {"steps": s.get("steps"), "mode": s.get("mode"), "variant": rs.get("variant"), "curve": curve, "window": n,
            "reward_first": mean(first, "reward"), "reward_last": mean(last, "reward"),
            "six_first": mean(first, "six"), "six_last": mean(last, "six"),
            "step_time_mean_s": s.get("step_time_mean_s"), "reward_seconds": rs.get("seconds"),
            "reward_share": s.get("reward_share_of_step_time"), "unscorable": rs.get("unscorable"),
            "scored": rs.get("scored"), "train_seconds": sum(s.get("step_times_s") or [])}


def _prm_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    if not s:
        return None
    keys = ("best_eval_rmse", "eval_rmse", "eval_rmse_mean_baseline", "train_examples", "eval_examples", "mode",
            "steps", "train_runtime")
    return {k: s.get(k) for k in keys if k in s} | {"all_keys": sorted(s)}


def _rolling(values: list[float | None], window: int = 10) -> list[float | None]:
    out, buf = [], []
    for v in values:
        if v is not None:
            buf = (buf + [v])[-window:]
        out.append(sum(buf) / len(buf) if buf else None)
    return out


def _plot_reward(g: dict[str, Any] | None, path: Path) -> Path | None:
    if not g or not g["curve"]:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [c["step"] for c in g["curve"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for key, label, color in (("reward", f"reward ({g.get('variant') or 'verifier'})", "C0"),
                              ("six", "6/6 rate", "C1")):
        ys = [c[key] for c in g["curve"]]
        axes[0].plot(steps, ys, color=color, alpha=0.25, linewidth=0.8)
        axes[0].plot(steps, _rolling(ys), color=color, label=f"{label}, rolling mean of 10")
    axes[0].set_xlabel("GRPO step")
    axes[0].set_title("sampled completions, per step")
    axes[0].legend(fontsize=8)
    for slot in SLOTS:
        axes[1].plot(steps, _rolling([c[slot] for c in g["curve"]]), label=slot)
    axes[1].set_xlabel("GRPO step")
    axes[1].set_title("per-bit pass rate (rolling mean of 10 steps)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- markdown -----------------------------------------------------------------------------------
def markdown(cfg, rep: dict[str, Any]) -> str:
    from calver.demo.report_text import render

    return render(cfg, rep)


def print_headline(rep: dict[str, Any], run: Path, console) -> None:
    from rich.table import Table

    t = Table(title="calver demo: policies on the held-out problems (candidate-level, 95% clustered CIs)")
    for col in ("policy", "all six slots %", "mean S/6", "6/6 %", "valid answer %", "6/6 on a shuffled problem %"):
        t.add_column(col, justify="right" if col != "policy" else "left")
    for name, p in rep["policies"].items():
        sh = rep["shuffled"].get(name, {})
        t.add_row(name, pct(p["parse_rate"]["estimate"]), f"{p['mean_score']['estimate']:.2f}", ci(p["six_rate"]),
                  ci(p["valid_rate"]), ci(sh["six_rate"]["shuffled"]) if "six_rate" in sh else "-")
    console.print(t)
    for name, e in rep["evaluations"].items():
        s = Table(title=f"selectors on the {name} pool ({e.n_units} units, K={rep['k']})")
        s.add_column("selector")
        s.add_column("accuracy % [95% CI]", justify="right")
        for sel, r in sorted(e.accuracy.items(), key=lambda kv: -kv[1].estimate):
            s.add_row(sel, ci(r))
        s.add_row("coverage (ceiling)", ci(e.coverage))
        console.print(s)
    if rep.get("sft_to_grpo"):
        c = rep["sft_to_grpo"]
        console.print(f"SFT -> GRPO (paired, clustered): 6/6 {ci(c['six_rate'], signed=True)} pp, mean score "
                      f"{ci(c['mean_score'], 1, True, 3)}, CALVER accuracy {ci(c['calver'], signed=True)} pp")
    tm = rep["timings_s"]
    console.print("wall time " + f"{tm.get('total', 0):.0f}s (" + ", ".join(
        f"{k} {v:.0f}s" for k, v in tm.items() if k != "total") + ")")
    console.print(f"report: {run / 'report' / 'report.md'}")
