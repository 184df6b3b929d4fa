"""GRPO step time with HF ``generate`` (use_vllm false) vs vLLM colocate, same model and prompts (one run).

    python benchmarks/grpo_generation.py [--model DIR] [--steps 4] [--max_completion_length 32]
        [--num_generations 2] [--prompts_per_step 2]

Both runs are ``calver train grpo`` on configs/grpo/tiny-cpu.yaml (LoRA, verifier reward, beta 0.04) with
the same model, seed, prompts (``generate_n`` = prompts_per_step x steps rows, so every step sees new
prompts, in the same order for both), num_generations and max_completion_length; only ``use_vllm`` (and
``vllm_mode: colocate``) differs. Each runs in its own process (a fresh torch.distributed env and vLLM
engine), from ``python -m calver.train.grpo``. The first step (lazy initialisation; with vLLM the first
weight sync) is reported separately and left out of the mean/median. ``process s`` is the whole process
(imports, model and engine load, training, save). Builds the tiny random Qwen2 (calver.train.tiny_model)
in a temp dir unless --model is given. Records os.getloadavg() before and after: on a shared machine
the ratio only means something when the load stayed low.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/grpo/tiny-cpu.yaml"
SUMMARY_FILE = "calver_train_summary.json"


def _run(name: str, model: str, out: Path, args, extra: list[str]) -> dict:
    batch = args.prompts_per_step * args.num_generations
    cmd = [sys.executable, "-m", "calver.train.grpo", "--config", str(RECIPE),
           "--model_name_or_path", model, "--output_dir", str(out / name),
           "--max_steps", str(args.steps), "--num_generations", str(args.num_generations),
           "--per_device_train_batch_size", str(batch), "--max_completion_length", str(args.max_completion_length),
           "--generate_n", str(args.prompts_per_step * args.steps), "--log_completions", "false",
           "--report_to", "none", *extra]
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{name} run failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    s = json.loads((out / name / SUMMARY_FILE).read_text())
    t = s["step_times_s"]
    rest = t[1:] or t
    lens = [h["completions/mean_length"] for h in s["logged_metrics"] if "completions/mean_length" in h]
    return {"process_s": wall, "steps": len(t), "first_step_s": t[0], "step_s_mean": sum(rest) / len(rest),
            "step_s_median": statistics.median(rest), "mean_completion_len": sum(lens) / len(lens),
            "reward_calls": s["reward_stats"]["calls"], "scored": s["reward_stats"]["scored"],
            "use_vllm": s["use_vllm"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model directory (default: the tiny random Qwen2, built in a temp dir)")
    ap.add_argument("--steps", type=int, default=4, help="GRPO steps per backend (the first is warm-up)")
    ap.add_argument("--max_completion_length", type=int, default=32)
    ap.add_argument("--num_generations", type=int, default=2)
    ap.add_argument("--prompts_per_step", type=int, default=2)
    ap.add_argument("--only", default="hf,vllm", help="comma list of hf, vllm")
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step is warm-up)")
    tmp = tempfile.TemporaryDirectory(prefix="grpo_gen_bench_")
    out = Path(tmp.name)
    model = args.model
    if model is None:
        from calver.train.tiny_model import build_tiny_model

        model = str(build_tiny_model(out / "tiny"))
    load_before = os.getloadavg()
    rows = {}
    backends = {"hf": ["--use_vllm", "false"], "vllm": ["--use_vllm", "true", "--vllm_mode", "colocate"]}
    for name in args.only.split(","):
        rows[name] = _run(name, model, out, args, backends[name])
    load_after = os.getloadavg()

    import torch

    print(f"\nmodel={model} steps={args.steps} prompts_per_step={args.prompts_per_step} "
          f"num_generations={args.num_generations} max_completion_length={args.max_completion_length} "
          f"torch_threads={torch.get_num_threads()} cpus={os.cpu_count()} "
          f"device={'cuda' if torch.cuda.is_available() else 'cpu'}")
    print(f"loadavg before={tuple(round(x, 2) for x in load_before)} after={tuple(round(x, 2) for x in load_after)}")
    print(f"{'backend':<8}{'process s':>11}{'1st step s':>12}{'step s mean':>13}{'step s med':>12}"
          f"{'compl len':>11}{'scored':>8}")
    for name, r in rows.items():
        print(f"{name:<8}{r['process_s']:>11.1f}{r['first_step_s']:>12.2f}{r['step_s_mean']:>13.3f}"
              f"{r['step_s_median']:>12.3f}{r['mean_completion_len']:>11.1f}{r['scored']:>8}")
    if {"hf", "vllm"} <= set(rows):
        hf, vl = rows["hf"], rows["vllm"]
        print(f"ratio vllm/hf step time (warm steps): mean {vl['step_s_mean'] / hf['step_s_mean']:.2f}x, "
              f"median {vl['step_s_median'] / hf['step_s_median']:.2f}x (< 1: vLLM colocate faster)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
