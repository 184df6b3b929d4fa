"""``report/report.md`` of ``calver demo``: tables from the measured numbers and the plain reading of
them (each statement is chosen by a test on the numbers, never written in advance)."""

from __future__ import annotations

from typing import Any

from calver.demo.report import SECTIONS, ci, pct
from calver.verifier import SLOTS


def _excludes_zero(r: dict[str, Any] | None) -> int:
    """+1 / -1 when the CI lies above / below 0, else 0."""
    if not r:
        return 0
    return 1 if r["ci_low"] > 0 else (-1 if r["ci_high"] < 0 else 0)


def stage_table(c: dict[str, Any]) -> list[str]:
    """SFT, GRPO and GRPO - SFT per measure, from ``compare_policies(sft_units, grpo_units)``."""
    rows = ["| measure | SFT | GRPO | GRPO - SFT [95% CI] |", "|---|---|---|---|"]
    for key, label, scale, digits in (("six_rate", "6/6 rate %", 100, 1), ("mean_score", "mean S/6", 1, 3),
                                      ("valid_rate", "valid answer %", 100, 1),
                                      ("calver", "CALVER accuracy %", 100, 1), ("coverage", "coverage %", 100, 1)):
        r = c[key]
        rows.append(f"| {label} | {scale * r['mean_a']:.{digits}f} | {scale * r['mean_b']:.{digits}f} | "
                    f"{ci(r, scale, True, digits)} |")
    return rows


def render(cfg, rep: dict[str, Any]) -> str:
    L: list[str] = [f"# calver demo report (seed {cfg.seed})", "",
                    f"Tasks: {', '.join(cfg.tasks)}; {cfg.n_train_per_task} training and {cfg.n_eval_per_task} "
                    f"held-out problems per task; pools of K={cfg.k} at temperature {cfg.temperature}. Every interval "
                    "is a 95% percentile bootstrap clustered by source problem.", ""]
    pol = rep["policies"]
    L += [SECTIONS[0], "", "Candidate-level rates on the held-out problems (mean over units of the per-unit rate).", "",
          "| policy | candidates | all six slots % | mean S/6 | 6/6 % | " + " | ".join(f"{s} %" for s in SLOTS)
          + " | valid answer % | coverage % |", "|---" * (7 + len(SLOTS)) + "|"]
    for name, p in pol.items():
        L.append(f"| {name} | {p['n_candidates']} | {pct(p['parse_rate']['estimate'])} | "
                 f"{ci(p['mean_score'], 1, digits=2)} | {ci(p['six_rate'])} | "
                 + " | ".join(pct(p["bit_pass_rates"][s]) for s in SLOTS)
                 + f" | {ci(p['valid_rate'])} | {ci(p['coverage'])} |")
    L += ["", SECTIONS[1], "",
          "Each unit's candidates re-graded against another held-out problem of the same family (a derangement "
          f"within the family, {cfg.shuffles} shuffle(s)). A policy that reads its prompt scores far higher on its "
          "own problem; one that guesses scores the same on both.", "",
          "| policy | 6/6 own % | 6/6 shuffled % | valid answer own % | valid answer shuffled % | own - shuffled "
          "(valid answer, pp) | coverage own % | coverage shuffled % |", "|---|---|---|---|---|---|---|---|"]
    for name, sh in rep["shuffled"].items():
        if "error" in sh:
            L.append(f"| {name} | {sh['error']} |||||||")
            continue
        L.append(f"| {name} | {ci(sh['six_rate']['own'])} | {ci(sh['six_rate']['shuffled'])} | "
                 f"{ci(sh['valid_rate']['own'])} | {ci(sh['valid_rate']['shuffled'])} | "
                 f"{ci(sh['valid_rate']['own_minus_shuffled'], signed=True)} | {ci(sh['coverage']['own'])} | "
                 f"{ci(sh['coverage']['shuffled'])} |")
    L += ["", SECTIONS[2], ""]
    c = rep.get("sft_to_grpo")
    if c:
        L += [f"Paired over the {c['n_units']} units both pools hold (same problems, same sampling seeds); "
              "differences GRPO - SFT.", "", *stage_table(c)]
    else:
        L.append("No GRPO stage in this run (grpo_steps: 0).")
    g = rep.get("grpo")
    L += ["", SECTIONS[3], ""]
    if g:
        L += [f"{g['steps']} steps ({g['mode']} fine-tuning, reward variant {g.get('variant')}); mean reward over "
              f"the first {g['window']} logged steps "
              f"{_f(g['reward_first'])}, over the last {g['window']} {_f(g['reward_last'])}; 6/6 rate of the "
              f"sampled completions {pct(g['six_first'])}% -> {pct(g['six_last'])}%. "
              f"![GRPO reward](grpo_reward.png)", "",
              f"Verifier reward time: {_f(g['reward_seconds'])} s of {_f(g['train_seconds'])} s of GRPO steps = "
              f"**{pct(g['reward_share'])}%** of step time ({g['scored']} completions scored, {g['unscorable']} "
              f"unscorable). Mean step {_f(g['step_time_mean_s'])} s."]
    else:
        L.append("No GRPO stage in this run.")
    L += ["", SECTIONS[4], ""]
    for name, e in rep["evaluations"].items():
        L += [f"{name} pool: {e.n_units} units, {e.n_clusters} source problems.", "",
              "| selector | accuracy % [95% CI] | CALVER - selector, pp [95% CI] |", "|---|---|---|"]
        for sel, r in sorted(e.accuracy.items(), key=lambda kv: -kv[1].estimate):
            d = e.paired.get(sel)
            L.append(f"| {sel} | {ci(r)} | {ci(d, signed=True) if d else '-'} |")
        L += [f"| coverage (ceiling) | {ci(e.coverage)} | |", ""]
    L += [SECTIONS[5], "", "![K-curves](k_curves.png)", ""]
    for name, e in rep["evaluations"].items():
        ks = e.k_scaling
        if ks is None:
            continue
        names = [s for s in ("calver", "prm", "plurality") if s in ks.accuracy]
        L += [f"{name} pool:", "", "| K | " + " | ".join(f"{s} %" for s in names) + " | coverage % |",
              "|---" * (len(names) + 2) + "|"]
        for i, k in enumerate(ks.ks):
            cells = [f"{pct(ks.accuracy[s][i])} [{pct(ks.ci[s][i][0])}, {pct(ks.ci[s][i][1])}]" for s in names]
            cv = f"{pct(ks.coverage[i])} [{pct(ks.ci['coverage'][i][0])}, {pct(ks.ci['coverage'][i][1])}]"
            L.append(f"| {k} | " + " | ".join(cells) + f" | {cv} |")
        L.append("")
    L += [SECTIONS[6], ""]
    p = rep.get("prm")
    if p:
        L.append(f"Regression head + LoRA on the SFT policy, trained on verifier scores of pools over "
                 f"{cfg.prm_problems} *training* problems (K={cfg.prm_k} from each policy); the evaluation pools "
                 f"never reach it. Validation RMSE {_f(p.get('best_eval_rmse', p.get('eval_rmse')))} (predicting the "
                 f"training mean: {_f(p.get('eval_rmse_mean_baseline'))}). Its selection accuracy is the `prm` row "
                 "above.")
    else:
        L.append("No PRM in this run (with_prm: false).")
    L += ["", SECTIONS[7], ""]
    rf = rep.get("refine")
    if rf:
        L += [f"GRPO pool, {rf['units']} units, starting from each unit's first {cfg.refine_k} candidates.", "",
              "| arm | accuracy % [95% CI] | max-score rate % | sampled tokens |", "|---|---|---|---|"]
        for a, r in rf["arms"].items():
            L.append(f"| {a} | {ci(r['accuracy'])} | {pct(r['max_score_rate'])} | {r['sampled_tokens']} |")
        d = rf.get("refine_minus_best_of_K'")
        if d:
            L += ["", f"Refine - token-matched best-of-K' (paired): {ci(d, signed=True)} pp."]
    else:
        L.append("No refinement in this run.")
    L += ["", SECTIONS[8], "", "| stage | seconds |", "|---|---|"]
    L += [f"| {k} | {v:.0f} |" for k, v in rep["timings_s"].items()]
    L += ["", SECTIONS[9], ""] + reading(rep, policy=_policy_words(cfg))
    return "\n".join(L) + "\n"


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _policy_words(cfg) -> str:
    """What the policy is, for the closing reading: the tiny model built here, or the named real model."""
    if cfg.model is None and getattr(cfg, "pretrained", None) is None:
        return "a tiny policy's"
    return f"the {cfg.model or cfg.pretrained} policy's"


def reading(rep: dict[str, Any], policy: str = "a tiny policy's") -> list[str]:
    """Plain statements, each chosen by the numbers it cites."""
    out = []
    for name, sh in rep["shuffled"].items():
        if "error" in sh:
            continue
        d = sh["valid_rate"]["own_minus_shuffled"]
        s6 = sh["six_rate"]
        if _excludes_zero(d) > 0:
            out.append(f"- The {name} policy's answers depend on its own problem: valid on their own problem "
                       f"{ci(sh['valid_rate']['own'])}%, on a shuffled one {ci(sh['valid_rate']['shuffled'])}%. "
                       f"6/6 falls from {pct(s6['own']['estimate'])}% to {pct(s6['shuffled']['estimate'])}% on a "
                       "shuffled problem.")
        else:
            out.append(f"- The {name} policy's answers are as often valid on a shuffled problem as on their own "
                       f"({ci(sh['valid_rate']['own'])}% vs {ci(sh['valid_rate']['shuffled'])}%): its coverage comes "
                       "from guesses, and selection accuracy then measures the verifier filtering chance.")
    c = rep.get("sft_to_grpo")
    if c:
        for key, label in (("six_rate", "6/6 rate"), ("mean_score", "mean score"), ("calver", "CALVER accuracy")):
            sign = _excludes_zero(c[key])
            word = {1: "raised", -1: "lowered", 0: "did not detectably change"}[sign]
            scale, digits = (1, 3) if key == "mean_score" else (100, 1)
            out.append(f"- GRPO {word} the {label} (paired CI {ci(c[key], scale, True, digits)}).")
    for name, e in rep["evaluations"].items():
        acc, cov, ks = e.accuracy.get("calver"), e.coverage, e.k_scaling
        if acc and cov:
            out.append(f"- On the {name} pool CALVER reaches {pct(acc.estimate)}% against a coverage ceiling of "
                       f"{pct(cov.estimate)}%. The problems supply their graph, so a 6/6 candidate's answer is "
                       "valid by construction: CALVER's accuracy here measures how often some candidate is fully "
                       "verified, not an independent judgment.")
        if ks and "prm" in ks.accuracy and len(ks.ks) >= 2:
            prm_k, cal_k = ks.accuracy["prm"], ks.accuracy["calver"]
            out.append(f"- K-curve, {name} pool: from K={ks.ks[0]} to K={ks.ks[-1]} CALVER goes "
                       f"{pct(cal_k[0])}% -> {pct(cal_k[-1])}% and the distilled PRM {pct(prm_k[0])}% -> "
                       f"{pct(prm_k[-1])}%.")
    for name, e in rep["evaluations"].items():
        es, graph = e.accuracy.get("extract_solve"), rep["policies"].get(name, {}).get("bit_pass_rates", {})
        if es and graph.get("GRAPH") is not None and es.estimate >= 0.9:
            out.append(f"- Extract-then-solve reaches {pct(es.estimate)}% on the {name} pool: the policy copies the "
                       f"graph ({pct(graph['GRAPH'])}% of GRAPH slots pass) and the solver needs nothing else. On "
                       "supplied-graph problems it is an oracle given a faithful copy, not a selector of reasoning.")
    rf = rep.get("refine") or {}
    d = rf.get("refine_minus_best_of_K'")
    if d:
        word = {1: "beat", -1: "lost to", 0: "did not detectably differ from"}[_excludes_zero(d)]
        out.append(f"- Refinement {word} token-matched best-of-K' ({ci(d, signed=True)} pp): the policy was never "
                   "trained on revision prompts.")
    moved = c is not None and any(_excludes_zero(c[k]) > 0 for k in ("six_rate", "mean_score"))
    out.append(f"- These are {policy} numbers on synthetic problems of 4-6 nodes. They show the loop (SFT, "
               "verifier-reward GRPO, frozen pools, symbolic and learned selection) running end to end"
               + (" and GRPO moving the policy" if moved else "; this run shows no GRPO lift")
               + ", not how a real model behaves on benchmark problems.")
    return out
