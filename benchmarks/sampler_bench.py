"""Tokens/s of the vLLM sampler vs HF generate on the same tiny model and the same requests (one run).

    python benchmarks/sampler_bench.py [--model DIR] [--prompts 16] [--n 4] [--max-tokens 128]

Builds the tiny random Qwen2 (calver.train.tiny_model) in a temp dir unless --model is given.
HF runs first (in this process), then vLLM (engine in its own process, as vLLM does by default).
Throughput counts generated tokens only; engine/model load time is reported separately.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def _prompts(k: int) -> list:
    letters = "ABCDEFGHIJKLMNOP"
    out: list = []
    for i in range(k):
        a, b, c = letters[i % 16], letters[(i + 3) % 16], letters[(i + 7) % 16]
        graph = f"GRAPH: {a} -> {b}, {b} -> {c}, {a} -> {c}"
        out.append([{"role": "user", "content": f"{graph}\nQ: effect of {a} on {c}?"}] if i % 2 == 0 else graph)
    return out


def _run(make, prompts, cfg) -> dict:
    t0 = time.perf_counter()
    sampler = make()
    t1 = time.perf_counter()
    res = sampler.generate(prompts, cfg, progress=False)
    t2 = time.perf_counter()
    sampler.close()
    toks = sum(c.num_tokens for r in res for c in r)
    return {"init_s": t1 - t0, "gen_s": t2 - t1, "samples": sum(len(r) for r in res), "tokens": toks,
            "tok_s": toks / (t2 - t1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.8)
    args = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from calver.infer.sampler import HFSampler, SamplingConfig, VLLMSampler, vllm_available

    tmp = None
    model = args.model
    if model is None:
        from calver.train.tiny_model import build_tiny_model

        tmp = tempfile.TemporaryDirectory(prefix="calver_bench_")
        model = str(build_tiny_model(os.path.join(tmp.name, "tiny")))
    prompts = _prompts(args.prompts)
    cfg = SamplingConfig(temperature=args.temperature, max_tokens=args.max_tokens, n=args.n, seed=0)

    rows = {"hf": _run(lambda: HFSampler(model), prompts, cfg)}
    if vllm_available():
        rows["vllm"] = _run(lambda: VLLMSampler(model, max_model_len=1024), prompts, cfg)

    import torch

    print(f"\nmodel={model} prompts={args.prompts} n={args.n} max_tokens={args.max_tokens} "
          f"temperature={args.temperature} torch_threads={torch.get_num_threads()} "
          f"device={'cuda' if torch.cuda.is_available() else 'cpu'}")
    print(f"{'backend':<8}{'init s':>9}{'gen s':>9}{'samples':>9}{'tokens':>9}{'tok/s':>10}")
    for name, r in rows.items():
        print(f"{name:<8}{r['init_s']:>9.1f}{r['gen_s']:>9.2f}{r['samples']:>9}{r['tokens']:>9}{r['tok_s']:>10.1f}")
    if "vllm" in rows:
        print(f"ratio vllm/hf tok/s: {rows['vllm']['tok_s'] / rows['hf']['tok_s']:.2f}x")
    else:
        print("vllm not importable: HF only")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
