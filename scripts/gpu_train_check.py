#!/usr/bin/env python
"""Training throughput check on a random-init model of Qwen2.5-0.5B's architecture (no download).

    python scripts/gpu_train_check.py                 # GPU: Qwen2.5-0.5B sizes, bf16, LoRA r=64/alpha=128 on q,k,v,o
    python scripts/gpu_train_check.py --qlora         # NF4 base (bitsandbytes), same adapter
    python scripts/gpu_train_check.py --tiny --steps 2  # CPU dry run on a tiny config

Weights are random (throughput does not depend on them) and data are synthetic token ids, so no
tokenizer or Hub access is needed. It runs ``--steps`` SFT steps (causal-LM loss on the second half
of each sequence, AdamW on the adapter) and ``--steps`` GRPO steps (HF ``generate`` of
``--num-generations`` completions for each of ``--prompts`` prompts, a synthetic per-completion
reward, group-normalized advantages, the policy-gradient loss plus a KL term to the frozen reference
= the adapter-disabled base), then prints one JSON object: steps/s, tokens/s, per-step times and
peak memory for each phase. The first step of each phase is a warm-up and is reported separately.

This is the raw-PyTorch loop check (synthetic ids and reward). ``scripts/gpu_check.py`` measures the same
architectures through calver's own trainers and samplers (TRL SFT/GRPO with the verifier reward, vLLM
colocate, the K=32 pool) and writes docs/gpu.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time

# Qwen2.5-0.5B(-Instruct)'s published config.json sizes
QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1_000_000.0,
                  rms_norm_eps=1e-6, tie_word_embeddings=True)
TINY = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=2, vocab_size=1024, max_position_embeddings=2048, rope_theta=10000.0,
            rms_norm_eps=1e-6, tie_word_embeddings=True)


def peak_memory_gib(torch, device) -> dict:
    if device.type == "cuda":
        return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
                "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}
    return {"peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def reset_peak(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def build_model(args, torch, device):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sizes = TINY if args.tiny else QWEN25_05B
    cfg = Qwen2Config(**sizes, head_dim=sizes["hidden_size"] // sizes["num_attention_heads"], use_cache=True,
                      bos_token_id=0, eos_token_id=1, pad_token_id=2)
    dtype = torch.bfloat16 if (device.type == "cuda" and not args.fp32) else torch.float32
    torch.manual_seed(0)
    if args.qlora:
        import tempfile

        from transformers import BitsAndBytesConfig

        # quantization happens at load time: save the random model, reload it in NF4
        tmp = tempfile.mkdtemp(prefix="gpu_train_check_")
        Qwen2ForCausalLM(cfg).to(dtype).save_pretrained(tmp)
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.bfloat16)
        model = Qwen2ForCausalLM.from_pretrained(tmp, quantization_config=q, dtype=dtype,
                                                 device_map={"": device.index or 0} if device.type == "cuda" else None)
    else:
        model = Qwen2ForCausalLM(cfg).to(dtype).to(device)
    model.config.use_cache = False
    if args.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], lora_dropout=0.0, task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    if args.qlora and device.type == "cpu":
        # bitsandbytes' CPU backend repacks 4-bit weights for an inference-only kernel on the first
        # eval/no-grad forward (generation), after which training forwards fail; keep the trainable layout
        for m in model.modules():
            if hasattr(m, "support_avx512bf16_for_cpu"):
                m.support_avx512bf16_for_cpu = False
    return model, cfg, dtype


def sft_phase(args, torch, model, cfg, device) -> dict:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
    g = torch.Generator().manual_seed(1)
    times, tokens = [], 0
    reset_peak(torch, device)
    model.train()
    for _ in range(args.steps + 1):
        ids = torch.randint(3, cfg.vocab_size, (args.batch, args.seq_len), generator=g).to(device)
        labels = ids.clone()
        labels[:, : args.seq_len // 2] = -100  # loss on the "assistant" half only
        sync(torch, device)
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(torch, device)
        times.append(time.perf_counter() - t0)
        tokens += ids.numel()
    return summarize(times, tokens - args.batch * args.seq_len, loss=float(loss), mem=peak_memory_gib(torch, device))


def grpo_phase(args, torch, model, cfg, device) -> dict:
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    g = torch.Generator().manual_seed(2)
    G, P, L = args.num_generations, args.prompts, args.prompt_len
    times, gen_times, gen_tokens, train_tokens = [], [], 0, 0
    reset_peak(torch, device)
    for _ in range(args.steps + 1):
        prompts = torch.randint(3, cfg.vocab_size, (P, L), generator=g).to(device)
        sync(torch, device)
        t0 = time.perf_counter()
        model.eval()
        model.config.use_cache = True
        with torch.no_grad():
            seqs = model.generate(input_ids=prompts.repeat_interleave(G, 0),
                                  attention_mask=torch.ones(P * G, L, dtype=torch.long, device=device),
                                  max_new_tokens=args.gen_len, min_new_tokens=args.gen_len, do_sample=True,
                                  temperature=1.0, top_k=0, pad_token_id=2, eos_token_id=None)
        sync(torch, device)
        t_gen = time.perf_counter() - t0
        model.config.use_cache = False
        comp = seqs[:, L:]
        # synthetic reward in [0, 1] (stands in for the verifier's S/6, which needs real text)
        reward = (comp % 7 == 0).float().mean(1)
        grouped = reward.view(P, G)
        adv = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)
        model.train()
        mask = torch.zeros_like(seqs, dtype=torch.float)
        mask[:, L:] = 1.0
        with torch.no_grad(), model.disable_adapter():
            ref_logp = token_logps(torch, model, seqs)
        logp = token_logps(torch, model, seqs)
        m = mask[:, 1:]
        kl = torch.exp(ref_logp - logp) - (ref_logp - logp) - 1
        per_tok = -(torch.exp(logp - logp.detach()) * adv[:, None]) + args.beta * kl
        loss = (per_tok * m).sum() / m.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(torch, device)
        times.append(time.perf_counter() - t0)
        gen_times.append(t_gen)
        gen_tokens += comp.numel()
        train_tokens += seqs.numel()
    out = summarize(times, train_tokens - P * G * (L + args.gen_len), loss=float(loss),
                    mem=peak_memory_gib(torch, device))
    steady = gen_times[1:] or gen_times
    out["generation_tokens_per_s"] = (gen_tokens - P * G * args.gen_len) / sum(steady) if gen_times[1:] else None
    out["generation_time_mean_s"] = sum(steady) / len(steady)
    return out


def token_logps(torch, model, seqs):
    logits = model(input_ids=seqs).logits[:, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, seqs[:, 1:, None]).squeeze(-1)


def summarize(times, tokens, *, loss, mem) -> dict:
    steady = times[1:]
    total = sum(steady)
    return {"warmup_step_s": times[0], "steps": len(steady), "step_times_s": steady,
            "steps_per_s": len(steady) / total if total else None,
            "tokens_per_s": tokens / total if total else None, "last_loss": loss, **mem}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="tiny config (CPU dry run)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="SFT sequences per step")
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--prompts", type=int, default=4, help="GRPO prompts per step")
    ap.add_argument("--num-generations", type=int, default=4)
    ap.add_argument("--prompt-len", type=int, default=512)
    ap.add_argument("--gen-len", type=int, default=256)
    ap.add_argument("--beta", type=float, default=0.04)
    ap.add_argument("--lora-r", type=int, default=64)
    ap.add_argument("--lora-alpha", type=int, default=128)
    ap.add_argument("--qlora", action="store_true", help="NF4 base via bitsandbytes")
    ap.add_argument("--grad-ckpt", action="store_true")
    ap.add_argument("--fp32", action="store_true")
    ap.add_argument("--skip-grpo", action="store_true")
    args = ap.parse_args(argv)
    if args.tiny:
        args.seq_len, args.prompt_len = min(args.seq_len, 128), min(args.prompt_len, 64)
        args.gen_len = min(args.gen_len, 16)
        args.batch, args.prompts = min(args.batch, 2), min(args.prompts, 2)
        args.num_generations = min(args.num_generations, 2)

    import torch
    import transformers

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and not args.tiny:
        print("warning: no CUDA device; the full-size check on CPU is very slow (use --tiny)", file=sys.stderr)
    t0 = time.perf_counter()
    model, cfg, dtype = build_model(args, torch, device)
    build_s = time.perf_counter() - t0
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "model": "tiny" if args.tiny else "qwen2.5-0.5b-architecture (random init)",
        "dtype": str(dtype), "qlora": args.qlora, "params_total": total, "params_trainable": trainable,
        "build_s": build_s, "config": vars(args),
        "sft": sft_phase(args, torch, model, cfg, device),
    }
    if not args.skip_grpo:
        report["grpo"] = grpo_phase(args, torch, model, cfg, device)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
