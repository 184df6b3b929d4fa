"""Configuration of ``calver recipe``: the training recipe's stages, each a calver command with its own config.

A recipe (``configs/demo/smollm2-recipe.yaml``) names the generator configs of the training mix and the
held-out splits, the training recipes (``configs/sft/*.yaml``, ``configs/rft/*.yaml``, ``configs/grpo/*.yaml``)
and the evaluation's sampling; ``*_overrides`` pass ``--field value`` pairs through to a stage (the CI smoke
size shrinks every stage this way, without a second copy of the recipe).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from calver.config import ConfigError, cfg_field, check_types, parse


@dataclass
class RecipeConfig:
    """``calver recipe --config FILE``: training mix -> SFT -> RFT -> GRPO -> held-out pools and the policy report."""

    out: str = cfg_field("runs/recipe", help="run directory (a rerun with the same config resumes stage by stage)")
    seed: int = cfg_field(0, help="seed of the evaluation's sampling (the stages' configs carry their own)")
    pretrained: str | None = cfg_field("smollm2", help="a pretrained model converted from its wheel (calver model "
                                       "NAME), or null with `model`")
    model: str | None = cfg_field(None, help="a model folder to start from instead of `pretrained`")
    mix: str = cfg_field("configs/gen/training-mix.yaml", help="calver gen config of the training mix")
    mix_overrides: list[str] = cfg_field(help="--field value pairs for the mix's calver gen", default_factory=list)
    heldout: list[str] = cfg_field(help="calver gen configs of the held-out splits (each a report of its own)",
                                   default_factory=lambda: ["configs/gen/heldout-4-9.yaml",
                                                            "configs/gen/heldout-7-12.yaml"])
    heldout_overrides: list[str] = cfg_field(help="--field value pairs for every held-out calver gen",
                                             default_factory=list)
    heldout_n: int | None = cfg_field(None, help="problems per family of every held-out split (null: each split "
                                      "config's n)")
    suite: str = cfg_field("paper", help="calver bench suite the training mix is checked against (contamination); "
                           "matched problems are dropped before training")
    sft: str = cfg_field("configs/sft/smollm2-135m-full.yaml", help="calver train sft recipe")
    sft_overrides: list[str] = cfg_field(help="--field value pairs for calver train sft (every SFT stage)",
                                         default_factory=list)
    continue_mix: list[str] = cfg_field(help="calver gen configs of further training mixes, one per continued SFT "
                                        "stage (a curriculum: each continues the policy before it)",
                                        default_factory=list)
    continue_sft: list[str] = cfg_field(help="calver train sft recipes of the continued SFT stages, aligned with "
                                        "continue_mix (their policies are sft2, sft3, ...)", default_factory=list)
    rft: str | None = cfg_field(None, help="calver train rft recipe, started from the SFT policy (null: no RFT)")
    rft_overrides: list[str] = cfg_field(help="--field value pairs for calver train rft", default_factory=list)
    grpo: str | None = cfg_field(None, help="calver train grpo recipe, started from the last policy (null: none)")
    grpo_overrides: list[str] = cfg_field(help="--field value pairs for calver train grpo", default_factory=list)
    base_prompt: str | None = cfg_field("few_shot:2", help="prompt style of the untrained base's pools (null: no "
                                        "base pools; the trained policies use the compact style they learned)")
    base_k: int = cfg_field(2, help="candidates per held-out problem and seed of the base's pools (its few-shot "
                            "prompts are long and its completions run to the token limit)")
    eval_k: int = cfg_field(4, help="candidates per held-out problem and seed of the trained policies")
    eval_seeds: list[int] = cfg_field(help="sampling seeds of the held-out pools", default_factory=lambda: [0])
    eval_temperature: float = cfg_field(0.8, help="sampling temperature of the held-out pools")
    eval_max_tokens: int = cfg_field(384, help="completion tokens at most")
    backend: str = cfg_field("auto", help="sampler: auto (vLLM when it imports) | vllm | hf")
    shuffles: int = cfg_field(3, help="derangements of the shuffled-problem control")
    draws: int = cfg_field(2000, help="bootstrap draws of the report's clustered CIs")

    def __post_init__(self) -> None:
        check_types(self)
        if (self.pretrained is None) == (self.model is None):
            raise ConfigError("exactly one of fields 'pretrained' and 'model' must be set")
        if not self.heldout:
            raise ConfigError("field 'heldout' must name at least one calver gen config")
        if self.heldout_n is not None and self.heldout_n < 1:
            raise ConfigError(f"field 'heldout_n' must be >= 1 or null, got {self.heldout_n!r}")
        for name in ("base_k", "eval_k", "eval_max_tokens", "shuffles", "draws"):
            if getattr(self, name) < 1:
                raise ConfigError(f"field {name!r} must be >= 1, got {getattr(self, name)!r}")
        if not self.eval_seeds:
            raise ConfigError("field 'eval_seeds' must list at least one seed")
        if self.backend not in ("auto", "vllm", "hf"):
            raise ConfigError(f"field 'backend' must be auto, vllm or hf, got {self.backend!r}")
        if len(self.continue_mix) != len(self.continue_sft):
            raise ConfigError(f"fields 'continue_mix' and 'continue_sft' must list as many configs, got "
                              f"{len(self.continue_mix)} and {len(self.continue_sft)}")
        files = {"mix": [self.mix], "sft": [self.sft], "rft": [self.rft], "grpo": [self.grpo],
                 "heldout": self.heldout, "continue_mix": self.continue_mix, "continue_sft": self.continue_sft}
        for name, paths in files.items():
            for path in paths:
                if path is not None and not Path(path).is_file():
                    raise ConfigError(f"field {name!r}: no config file {path}")
        for name in ("mix_overrides", "heldout_overrides", "sft_overrides", "rft_overrides", "grpo_overrides"):
            items = getattr(self, name)
            if any(not isinstance(v, str) for v in items) or (items and not items[0].startswith("--")):
                raise ConfigError(f"field {name!r} must be --field value strings, got {items!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# `calver recipe --smoke`: every stage at the size of a CI check (minutes on 2 cores), over the config file
SMOKE: dict[str, Any] = {
    "mix_overrides": ["--n", "8"], "heldout_n": 2, "base_k": 1,
    "sft_overrides": ["--max_steps", "3", "--save_steps", "2", "--warmup_steps", "0", "--logging_steps", "1"],
    "rft_overrides": ["--rounds", "1", "--rft_k", "2", "--max_steps", "2"],
    "grpo_overrides": ["--max_steps", "1"], "eval_k": 2, "eval_max_tokens": 96, "shuffles": 1, "draws": 200,
}


def load_recipe_config(config: str | Path | None = None, args: Any = (), *, smoke: bool = False,
                       **overrides: Any) -> RecipeConfig:
    """Defaults, the YAML file (``yaml.safe_load``), ``--field value`` flags, then ``SMOKE`` if asked (so the
    smoke is small whatever the file says), then keyword overrides (None = unset)."""
    return parse(RecipeConfig, config, args, overrides={**(SMOKE if smoke else {}), **overrides})


__all__ = ["SMOKE", "RecipeConfig", "load_recipe_config"]
