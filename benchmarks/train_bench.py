"""Per-step wall times of the three trainers on the tiny random Qwen2, from the tiny-cpu recipes.

    python benchmarks/train_bench.py [--model DIR] [--steps 5] [--out DIR] [--only sft,grpo,prm]

Builds the tiny model (calver.train.tiny_model) in a temp dir unless --model is given. Prints one JSON
object: for each trainer the mode, steps, mean/median step time (the first step, which includes
lazy initialisation, is reported separately) and the trainer-specific result (final loss, reward,
PRM RMSE vs the mean baseline). Runs SFT (LoRA and QLoRA), GRPO (LoRA) and the PRM, on the
truncated-trace pool of ``tests/fixtures.py`` (loaded by path).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from tests_module import tests_module

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _times(summary: dict) -> dict:
    t = summary.get("step_times_s") or []
    rest = t[1:] or t
    return {"steps": len(t), "first_step_s": t[0] if t else None,
            "step_s_mean": sum(rest) / len(rest) if rest else None,
            "step_s_median": sorted(rest)[len(rest) // 2] if rest else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--only", default="sft,sft_qlora,grpo,prm")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="train_bench_"))
    if args.model is None:
        from calver.train.tiny_model import build_tiny_model

        args.model = str(build_tiny_model(out / "tiny_model"))
    only = set(args.only.split(","))
    steps = str(args.steps)
    base = ["--model_name_or_path", args.model]
    report: dict = {"model": args.model, "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    if "sft" in only or "sft_qlora" in only:
        from calver.train.sft import run_sft
        from calver.train.sft_config import load_sft_config

        for name, extra in (("sft", []), ("sft_qlora", ["--qlora", "true"])):
            if name not in only:
                continue
            t0 = time.perf_counter()
            s = run_sft(*load_sft_config(ROOT / "configs/sft/tiny-cpu.yaml", base + [
                "--output_dir", str(out / name), "--max_steps", steps, *extra])).summary
            report[name] = {"mode": s["mode"], **_times(s), "last_loss": s["last_logged_loss"],
                            "wall_s": time.perf_counter() - t0}
    if "grpo" in only:
        from calver.train.grpo import run_grpo
        from calver.train.grpo_config import load_grpo_config

        t0 = time.perf_counter()
        s = run_grpo(*load_grpo_config(ROOT / "configs/grpo/tiny-cpu.yaml", base + [
            "--output_dir", str(out / "grpo"), "--max_steps", steps, "--generate_n", str(2 * args.steps)])).summary
        report["grpo"] = {"mode": s["mode"], **_times(s), "num_generations": s["num_generations"],
                          "reward_mean": [h.get("reward") for h in s["logged_metrics"]],
                          "unscorable": s["reward_stats"]["unscorable"], "wall_s": time.perf_counter() - t0}
    if "prm" in only:
        from calver.train.prm import run_prm
        from calver.train.prm_config import load_prm_config

        pool = tests_module("fixtures").truncated_trace_pool(out / "prm_pool")
        t0 = time.perf_counter()
        s = run_prm(*load_prm_config(ROOT / "configs/prm/tiny-cpu.yaml", base + [
            "--output_dir", str(out / "prm"), "--pool_paths", str(pool), "--num_train_epochs", "2",
            "--max_length", "512"])).summary
        report["prm"] = {"mode": s["mode"], **_times(s), "best_eval_rmse": s["best_eval_rmse"],
                         "eval_rmse_mean_baseline": s["eval_rmse_mean_baseline"],
                         "train_examples": s["train_examples"], "wall_s": time.perf_counter() - t0}
    report["loadavg_end"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
