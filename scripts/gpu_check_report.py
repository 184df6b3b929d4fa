"""Markdown and JSON output of ``scripts/gpu_check.py`` (its table, settings and caveats)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


# ---- markdown ----------------------------------------------------------------------------------------
def _fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def table_rows(report: dict[str, Any], jobs: Sequence[tuple[str, str]]) -> list[list[str]]:
    rows = []
    s = report["settings"]
    for m, res_m in report["results"].items():
        for job, label in jobs:
            r = res_m.get(job, {"status": "skipped: not run"})
            status = r.get("status", "?")
            if status == "ok":
                note = "ok"
            elif status in ("error", "timeout"):
                note = f"{status}: {r.get('error', '')}".replace("|", "/").replace("\n", " ")[:160]
            else:
                note = status
            step = tps = share = "—"
            if status == "ok" and job.startswith(("sft", "grpo")):
                step = _fmt(r.get("step_time_mean_s"))
                tps = _fmt(r.get("tokens_per_s"))
                if job.startswith("grpo"):
                    share = f"{100 * r['reward_share_of_step_time']:.2g}%" \
                        if r.get("reward_share_of_step_time") is not None else "—"
                    tps = "—"
            elif status == "ok":
                tps = _fmt(r.get("tokens_per_s"))
            if job.startswith("sft"):
                setting = f"batch {s['sft_batch']}, max_length {s['sft_max_length']}"
            elif job.startswith("grpo"):
                setting = (f"{s['grpo_prompts_per_step']} prompts x {s['grpo_num_generations']} gens, "
                           f"{s['grpo_max_completion']} new tokens, beta {s['grpo_beta']}")
            else:
                setting = f"{s['pool_prompts']} prompts x K={s['pool_k']}, {s['pool_max_tokens']} new tokens"
            rows.append([m, label, setting, step, tps, share, note])
    return rows


def render_markdown(report: dict[str, Any], json_name: str, jobs: Sequence[tuple[str, str]]) -> str:
    s = report["settings"]
    v = report["versions"]
    lora = report["lora"]
    lines = []
    if report["tiny"]:
        lines += ["# GPU check: `--tiny` CPU code-path check only", "",
                  "> **Not a GPU measurement.** This table comes from `python scripts/gpu_check.py --tiny`: the tiny",
                  "> random model (hidden 128, 2 layers) on CPU. It only shows that every section's code path runs;",
                  "> its numbers say nothing about Qwen2.5-0.5B/7B throughput. No GPU run is recorded in this file:",
                  "> `python scripts/gpu_check.py` on a CUDA machine replaces it with real numbers.", ""]
    else:
        lines += ["# GPU check: random-init Qwen2.5 architectures", ""]
    lines += [f"- date: {report['date']}", f"- device: {report['device']}",
              "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
              f"- models: {', '.join(report['results'])} (random weights"
              + ("; Qwen2.5 sizes from the published configs, bf16" if not report["tiny"] else "; float32")
              + "); tokenizer: calver BPE on the data (target vocab " + str(s["tokenizer_vocab"]) + "; "
              + ", ".join(f"{m} {r['build'].get('tokenizer_tokens', '?')}" for m, r in report["results"].items())
              + " tokens)",
              f"- data: calver.data_gen {', '.join(s['tasks'])}, {report['data']['rows']} rows "
              f"(content hash {report['data']['content_hash'][:12]})",
              f"- LoRA r={lora['lora_r']}, alpha={lora['lora_alpha']} on {', '.join(lora['lora_target_modules'])}; "
              "QLoRA: NF4, double quant, bf16 compute",
              f"- timing: 1 warm-up step/call, then the mean over {s['steps']} steps (pool: one timed call); "
              f"budget {report['budget_s']:.0f} s, total {report.get('total_wall_s', 0):.0f} s",
              f"- raw JSON: [{json_name}]({json_name})", "",
              "| model | measurement | settings | step time (s) | tokens/s | reward share of step | status |",
              "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(report, jobs)]
    lines += ["", "SFT tokens/s: the tokens TRL counts (`num_tokens`) per second of step time; pool tokens/s: "
              "generated tokens per second of the timed call. "
              "The reward share is `VerifierReward.seconds` over the step time (steps after the warm-up); "
              "random weights emit text the verifier rejects quickly, so on a trained policy it is larger.", ""]
    return "\n".join(lines)


def write_outputs(report: dict[str, Any], out_md: Path, jobs: Sequence[tuple[str, str]]) -> None:
    out_md.parent.mkdir(parents=True, exist_ok=True)
    js = out_md.with_suffix(".json")
    js.write_text(json.dumps(report, indent=2, default=str) + "\n")
    out_md.write_text(render_markdown(report, js.name, jobs))
