"""GRPO on the tiny model from the tiny-cpu recipe: 2 steps with the verifier reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/grpo/tiny-cpu.yaml"


@pytest.fixture(scope="module")
def grpo_run(tiny_model_dir, tmp_path_factory, monkeypatch_module):
    """2 GRPO steps over 4 prompt rows (2 prompts x 2 generations per step: one epoch covers every row),
    one row's problem deliberately malformed; rewards recorded through a spy subclass."""
    import calver.train.grpo as grpo_mod
    from calver.train.common import generate_problems, prompt_rows
    from calver.train.grpo_config import load_grpo_config
    from calver.train.rewards import VerifierReward

    tmp = tmp_path_factory.mktemp("grpo")
    rows = prompt_rows(generate_problems(["backdoor_set"], 3, seed=2, n_nodes=(4, 5)))
    rows.append({"prompt": rows[0]["prompt"], "problem_json": '{"task": "no_such_task", "query": {}}'})
    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    calls = []

    class Spy(VerifierReward):
        def __call__(self, prompts=None, completions=(), **kw):
            out = super().__call__(prompts, completions, **kw)
            calls.append((list(completions), list(kw["problem_json"]), out, sorted(kw)))
            return out

    monkeypatch_module.setattr(grpo_mod, "VerifierReward", Spy)
    monkeypatch_module.setenv("WANDB_MODE", "offline")
    monkeypatch_module.setenv("WANDB_DIR", str(tmp))
    monkeypatch_module.setenv("WANDB_SILENT", "true")
    args = load_grpo_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp / "out"),
                                     "--dataset_path", str(data), "--report_to", "wandb"])
    run = grpo_mod.run_grpo(*args)
    return run, calls, tmp


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_rewards_are_real_verifier_scores(grpo_run):
    from calver.train.rewards import completion_text
    from calver.verifier import Problem, score

    run, calls, _ = grpo_run
    assert len(calls) == 2  # one reward call per generation batch (= per step here)
    n = 0
    for comps, pjs, out, kwargs in calls:
        assert {"log_metric", "trainer_state", "problem_json"} <= set(kwargs)
        for c, pj, r in zip(comps, pjs, out):
            if "no_such_task" in pj:
                assert r is None
                continue
            assert r == pytest.approx(score(completion_text(c), Problem.from_dict(json.loads(pj))).total / 6)
            n += 1
    assert n == 6
    stats = run.summary["reward_stats"]
    assert stats["unscorable"] == 2 and stats["scored"] == 6
    assert any("unregistered task" in k for k in stats["unscorable_reasons"])


def test_per_bit_metrics_logged_and_summary(grpo_run):
    run, _, tmp = grpo_run
    s = run.summary
    assert s["trainer"] == "grpo" and s["mode"] == "lora" and s["steps"] == 2
    assert s["reference_model"] == "adapter-disabled base" and s["beta"] > 0
    logged = s["logged_metrics"]
    assert len(logged) == 2
    for h in logged:
        for slot in ("graph", "query", "strategy", "derivation", "result", "answer"):
            assert 0.0 <= h[f"verifier/{slot}"] <= 1.0
        assert "reward" in h and "rewards/verifier/mean" in h and "verifier/unscorable" in h
    assert sum(h["verifier/unscorable"] for h in logged) == 2
    assert (Path(s["output_dir"]) / "adapter_model.safetensors").exists()
    assert list((tmp / "wandb").glob("offline-run-*")), "wandb offline run (completions table) was written"


def test_qlora_grpo_step_on_cpu(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb

    from calver.train.grpo import run_grpo
    from calver.train.grpo_config import load_grpo_config

    args = load_grpo_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "q"),
                                     "--qlora", "true", "--max_steps", "1", "--generate_n", "2",
                                     "--max_completion_length", "8"])
    run = run_grpo(*args)
    assert run.summary["mode"] == "qlora" and run.summary["steps"] == 1
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in run.trainer.model.modules())
    assert run.summary["reward_stats"]["scored"] == 4 and run.summary["reward_stats"]["unscorable"] == 0
