"""End to end: ``calver demo --quick`` on CPU (real tiny model, real training, real sampling)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from testing_utils import markdown_table_problems, require_data, require_full_stack, require_torch

ROOT = Path(__file__).resolve().parents[1]


def test_demo_config_errors_name_the_field(tmp_path):
    from calver.config import ConfigError
    from calver.demo.config import load_demo_config

    bad = tmp_path / "d.yaml"
    bad.write_text("k: 0\n")
    with pytest.raises(ConfigError, match="'k'"):
        load_demo_config(bad)
    bad.write_text("nonsense_field: 1\n")
    with pytest.raises(ConfigError, match="nonsense_field"):
        load_demo_config(bad)
    with pytest.raises(ConfigError, match="tasks"):
        load_demo_config(None, tasks=["no_such_task"])
    assert load_demo_config(None, quick=True).sft_steps < load_demo_config(None).sft_steps
    with pytest.raises(ConfigError, match="'model' and 'pretrained' exclude each other"):
        load_demo_config(None, model="x", pretrained="smollm2")
    with pytest.raises(ConfigError, match=r"'pretrained' must be one of \['smollm2'\]"):
        load_demo_config(None, pretrained="gpt2")
    with pytest.raises(ConfigError, match="'base_prompts': prompt style must be"):
        load_demo_config(None, base_prompts=["two_shot"])
    with pytest.raises(ConfigError, match="names a style twice"):
        load_demo_config(None, base_prompts=["few_shot:2", "few_shot:2"])
    with pytest.raises(ConfigError, match="'base_prompts' is empty"):
        load_demo_config(None, base_prompts=[])


def test_base_pool_names():
    from calver.demo.config import base_pool_names, is_base_pool, load_demo_config

    cfg = load_demo_config(None, base_prompts=["zero_shot", "few_shot:2", "completion"])
    assert base_pool_names(cfg) == {"base": "zero_shot", "base_few_shot_2": "few_shot:2",
                                    "base_completion": "completion"}
    assert all(is_base_pool(n) for n in base_pool_names(cfg)) and not is_base_pool("sft")
    assert not is_base_pool("baseline")


def test_demo_problems_are_held_out():
    from calver.demo.config import load_demo_config
    from calver.demo.stages import make_problems, problem_key

    cfg = load_demo_config(None, quick=True, n_train_per_task=20, n_eval_per_task=5)
    _gen, train, held_out = make_problems(cfg)
    assert len(held_out) == 5 * len(cfg.tasks)
    assert not {problem_key(p) for p in train} & {problem_key(p) for p in held_out}
    # no held-out graph appears in training under any query
    assert not {p.graph.to_text() for p in train} & {p.graph.to_text() for p in held_out}


@require_torch
@require_data  # the rows come from export_dataset
def test_tiny_model_cli_builds_a_model_whose_phrases_are_single_tokens(tmp_path):
    from transformers import AutoTokenizer

    from calver.cli import main
    from calver.data_gen.export import export_dataset
    from calver.data_gen.trace_style import TraceStyle
    from calver.demo.config import load_demo_config
    from calver.demo.stages import make_problems

    cfg = load_demo_config(None, quick=True, n_train_per_task=10, n_eval_per_task=1)
    gen, train, _ = make_problems(cfg)
    export_dataset(train, tmp_path / "data", gen, style=TraceStyle("rule", 1))
    assert main(["tiny-model", "--out", str(tmp_path / "m"), "--dataset", str(tmp_path / "data" / "sft.jsonl")]) == 0
    tok = AutoTokenizer.from_pretrained(tmp_path / "m")
    row = json.loads((tmp_path / "data" / "sft.jsonl").read_text().splitlines()[0])
    system, user, trace = (m["content"] for m in row["messages"])
    assert len(tok(system)["input_ids"]) == 1  # the contract instructions: one token
    graph_line = trace.splitlines()[0].removeprefix("GRAPH: ")
    edges = [e for e in graph_line.split(", ") if " " in e]  # (isolated nodes are listed bare)
    ids = tok(", ".join(edges))["input_ids"]
    assert len(ids) == len(edges)  # one token per edge (", " folded into the next edge)
    text = tok.apply_chat_template(row["messages"], tokenize=False)
    assert tok.decode(tok(text)["input_ids"]) == text  # lossless
    assert main(["tiny-model", "--out", str(tmp_path / "x"), "--hidden", "100", "--heads", "3"]) == 2


# Runs ``calver demo --quick`` in a fresh interpreter with every ``score`` binding counted (a demo in the
# test process would leave wandb's and torch's process-wide state to the tests after it).
_COUNTING_DEMO = """
import json, sys
import pytest
sys.path.insert(0, sys.argv[1])
from fixtures import count_score_calls
from calver.cli import main
calls = count_score_calls(pytest.MonkeyPatch())
rc = main(["demo", "--quick", "--out", sys.argv[2]])
json.dump([[t, fp, n] for (t, fp), n in calls.items()], open(sys.argv[3], "w"))
sys.exit(rc)
"""


@pytest.mark.slow
@require_full_stack
def test_quick_demo_end_to_end(tmp_path):
    """Every stage runs, the report holds every section, and no pool candidate is scored twice over
    the whole run (effect sizes belong to the benchmark run)."""
    from calver.demo.report import SECTIONS
    from calver.infer.firewall import strip_problem
    from calver.infer.pool import Pool
    from calver.verifier import problem_fingerprint, score

    out, counts = tmp_path / "demo", tmp_path / "score_calls.json"
    env = dict(os.environ, WANDB_MODE="offline", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    res = subprocess.run([sys.executable, "-c", _COUNTING_DEMO, str(Path(__file__).parent), str(out), str(counts)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-4000:]
    stderr = res.stderr
    counted = Counter({(t, fp): n for t, fp, n in json.loads(counts.read_text())})
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["out"] == str(out) and cfg["k"] == 8
    for name, k in (("base", cfg["base_k"]), ("sft", cfg["k"]), ("grpo", cfg["k"])):
        pool = Pool(out / "pools" / name)
        assert pool.frozen and pool.manifest()["sampling"], name
        units = pool.units()
        assert units and all(len(u.texts) == k for u in units), name
    for name in ("sft", "grpo"):  # the PRM's pools hold training problems only
        prm_ids = set(Pool(out / "prm_pools" / name).problems())
        assert prm_ids and not prm_ids & set(Pool(out / "pools" / name).problems())
    # score once: every candidate of every pool was scored, and none twice, over the whole run
    pairs = set()
    for root in sorted([*(out / "pools").iterdir(), *(out / "prm_pools").iterdir()]):
        pool = Pool(root)
        assert (root / "scores" / "verifier.jsonl").exists(), root
        fps = {pid: problem_fingerprint(strip_problem(p)) for pid, p in pool.problems().items()}
        pairs |= {(t, fps[u.problem_id]) for u in pool.units() for t in u.texts}
    assert pairs and pairs <= set(counted)
    twice = {t[:60]: n for (t, fp), n in counted.items() if (t, fp) in pairs and n > 1}
    assert not twice, f"{len(twice)} pool candidate(s) scored more than once: {twice}"
    report = (out / "report" / "report.md").read_text()
    for heading in SECTIONS:
        assert heading in report, heading
    tables, problems = markdown_table_problems(report)
    assert tables >= 8 and not problems, problems
    for png in ("grpo_reward.png", "k_curves.png"):
        assert (out / "report" / png).stat().st_size > 1000, png
    summary = json.loads((out / "report" / "demo_summary.json").read_text())
    assert set(summary["policies"]) == {"base", "sft", "grpo"}
    for name in ("sft", "grpo"):
        acc = summary["evaluations"][name]["accuracy"]
        for sel in cfg["selectors"] + ["prm"]:
            assert sel in acc, (name, sel)
        assert set(summary["shuffled"][name]) >= {"six_rate", "valid_rate", "coverage"}
    assert {"six_rate", "mean_score", "calver"} <= set(summary["sft_to_grpo"])
    assert summary["grpo"]["curve"] and summary["grpo"]["reward_share"] is not None
    assert summary["refine"]["arms"]
    assert list((out / "wandb").glob("offline-run-*")), "GRPO logs to wandb offline"
    # CALVER's choice has the unit's maximum score, re-derived here from the frozen texts
    pool = Pool(out / "pools" / "grpo")
    problems, chosen = pool.problems(), pool.selection("calver")
    for u in pool.units():
        totals = [score(t, problems[u.problem_id]).total for t in u.texts]
        assert totals[chosen[(u.problem_id, u.seed)]["index"]] == max(totals)
    assert "6/6" in stderr and "coverage" in stderr


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*/*.yaml")
                                        if p.parent.name in ("demo", "sample", "gen")))
def test_shipped_recipes_parse(path):
    from calver.data_gen.gen_config import load_config as load_gen
    from calver.demo.config import load_demo_config
    from calver.demo.recipe_config import load_recipe_config
    from calver.infer.sample_config import load_config as load_sample

    loader = {"demo": load_demo_config, "sample": load_sample, "gen": load_gen}[Path(path).parent.name]
    if path.endswith("-recipe.yaml"):  # `calver recipe` configs live beside the demos'
        loader = load_recipe_config
    assert loader(ROOT / path) is not None


def test_finished_training_stages_are_reused_on_resume(tmp_path):
    """The same config in the same run directory: a finished SFT / GRPO run (its summary is written last) and a
    finished merge are reused; without resume, or with no summary, they are not."""
    import json

    from calver.demo import stages
    from calver.demo.config import load_demo_config
    from calver.train.common import SUMMARY_FILE

    cfg = load_demo_config(None, model="base-model", sft_recipe="configs/sft/smollm2-135m.yaml")
    sft = tmp_path / "model" / "sft"
    sft.mkdir(parents=True)
    (sft / SUMMARY_FILE).write_text(json.dumps({"trainer": "sft", "mode": "lora", "steps": 3}))
    assert stages.train_sft(cfg, tmp_path / "data", tmp_path, None, resume=True) == (
        "base-model", str(sft), {"trainer": "sft", "mode": "lora", "steps": 3})
    merged = tmp_path / "model" / "sft_merged"
    merged.mkdir()
    for f in ("config.json", "model.safetensors"):
        (merged / f).write_text("{}")
    grpo = tmp_path / "model" / "grpo"
    grpo.mkdir()
    (grpo / SUMMARY_FILE).write_text(json.dumps({"trainer": "grpo", "mode": "lora"}))
    summary, policy = stages.train_grpo(cfg, tmp_path / "data", tmp_path, "base-model", str(sft), resume=True)
    assert summary["trainer"] == "grpo" and policy == (str(merged), str(grpo))
    (grpo / SUMMARY_FILE).unlink()
    assert stages.finished_summary(grpo) is None
