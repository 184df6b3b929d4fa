"""Distilled PRM on the tiny model: a toy pool whose verifier totals are learnable (traces cut after k slots)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import truncated_trace_pool

pytest.importorskip("trl")
pytest.importorskip("peft")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/prm/tiny-cpu.yaml"


@pytest.fixture(scope="module")
def prm_run(tiny_model_dir, tmp_path_factory):
    from calver.train.prm import run_prm
    from calver.train.prm_config import load_prm_config

    tmp = tmp_path_factory.mktemp("prm")
    pool = truncated_trace_pool(tmp / "pool")
    args = load_prm_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp / "out"),
                                    "--pool_paths", str(pool), "--num_train_epochs", "2", "--max_length", "512"])
    return run_prm(*args), pool


@pytest.fixture(scope="module")
def ranking_run(tiny_model_dir, tmp_path_factory):
    from calver.train.prm import run_prm
    from calver.train.prm_config import load_prm_config

    tmp = tmp_path_factory.mktemp("prm-rank")
    pool = truncated_trace_pool(tmp / "pool")
    args = load_prm_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp / "out"),
                                    "--pool_paths", str(pool), "--num_train_epochs", "2", "--max_length", "512",
                                    "--loss", "ranking", "--metric_for_best_model", "pair_accuracy"])
    return run_prm(*args), pool


def test_ranking_prm_orders_a_problems_candidates(ranking_run, prm_run):
    """loss: ranking trains on pairs within a problem and keeps the checkpoint that orders held-out problems'
    candidates best; the pair accuracy is well above chance (0.5), as the regression PRM's is."""
    run, _ = ranking_run
    s = run.summary
    assert s["loss"] == "ranking"
    accs = [h["eval_pair_accuracy"] for h in s["eval_rmse_per_epoch"]]
    assert len(accs) == 2 and s["best_eval_pair_accuracy"] == pytest.approx(max(accs))
    assert s["best_eval_pair_accuracy"] > 0.75, s
    assert prm_run[0].summary["best_eval_pair_accuracy"] > 0.75


def test_prm_reports_rmse_per_epoch_and_beats_the_mean(prm_run):
    run, _ = prm_run
    s = run.summary
    assert s["trainer"] == "prm" and s["mode"] == "lora"
    assert [round(h["epoch"]) for h in s["eval_rmse_per_epoch"]] == [1, 2]
    assert s["best_eval_rmse"] == pytest.approx(min(h["eval_rmse"] for h in s["eval_rmse_per_epoch"]))
    assert s["best_eval_rmse"] < 0.75 * s["eval_rmse_mean_baseline"], s
    assert s["best_checkpoint"] and s["eval_problems"] >= 1
    # head + LoRA trainable, base frozen
    assert 0 < s["trainable_params"] < s["total_params"] / 10


def test_prm_scorer_loads_and_feeds_the_infer_selector(prm_run):
    from calver.data_gen.prompts import user_text
    from calver.infer.pool import Pool
    from calver.infer.selectors import PRMScorer, PRMSelector, load_prm
    from calver.infer.selectors.scorers import prm_text
    from calver.verifier import score

    run, pool_dir = prm_run
    out = Path(run.summary["output_dir"])
    scorer = load_prm(out)
    # read as a calver PRM (not a reward model): trained inputs, adapter merged into the recorded base
    assert isinstance(scorer, PRMScorer) and scorer.text_builder is prm_text and scorer.max_length == 512
    pool = Pool(pool_dir)
    problems = pool.problems()
    rows = list(pool.candidate_rows())[:24]
    pred = [scorer.score(user_text(problems[r["problem_id"]]), r["text"]) for r in rows]
    gold = [score(r["text"], problems[r["problem_id"]]).total for r in rows]
    mean = sum(gold) / len(gold)
    mse = sum((p - g) ** 2 for p, g in zip(pred, gold)) / len(gold)
    assert mse < sum((mean - g) ** 2 for g in gold) / len(gold)
    sel = PRMSelector(model_path=out)  # what `calver select --selector prm` builds
    assert isinstance(sel.scorer, PRMScorer) and sel.has_model()
