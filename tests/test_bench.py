"""``calver bench``: its settings, its suites, and a whole quick-suite run on the tiny model."""

from __future__ import annotations

import json

import pytest
from testing_utils import require_torch

from calver.bench import SUITES, BenchConfig, load_table, suite_rows
from calver.bench.table import COLUMNS
from calver.cli import main
from calver.config import ConfigError


def test_suites_have_the_paper_rows():
    # Table 3's rows, in its order, in both suites
    keys = ["clear_core", "bnlearn_supplied", "bnlearn_l1", "bnlearn_l2", "bnlearn_l3", "cg2llm",
            "kk_3", "kk_4", "kk_5"]
    for name in ("paper", "quick"):
        assert [r.key for r in SUITES[name]] == keys
        assert [r.constructed for r in SUITES[name]] == [k in ("bnlearn_l1", "bnlearn_l2", "bnlearn_l3") for k in keys]
    assert len(SUITES["paper"][1].settings["nets"]) == 10
    assert SUITES["paper"][3].seeds == (0, 1, 2)  # L2/L3 use three seeds, as the paper's
    assert all(r.settings["verification"] == "candidate_local" for r in SUITES["paper"] if r.adapter == "kk")


def test_row_subset_and_unknown_row():
    assert [r.key for r in suite_rows("quick", ["kk_4", "clear_core"])] == ["clear_core", "kk_4"]
    with pytest.raises(ValueError, match="no row nope; its rows: clear_core"):
        suite_rows("quick", ["nope"])
    with pytest.raises(ValueError, match="unknown suite"):
        suite_rows("huge")


@pytest.mark.parametrize("changes, message", [
    ({"policy": []}, "needs at least one model"),
    ({"adapter": ["a", "b"]}, "2 adapter"),
    ({"policy": ["x/model", "y/model"]}, "share the label"),
    ({"policy": ["bad name=x"]}, "letters, digits"),
    ({"suite": "huge"}, "unknown suite"),
    ({"k": 0}, "'k' must be >= 1"),
    ({"shard": 2, "num_shards": 2}, "0 <= shard < num_shards"),
    ({"kk_source": "web"}, "kk_source"),
    ({"seeds": [1, 1]}, "distinct"),
])
def test_bad_settings_are_config_errors(changes, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        BenchConfig(**{"out": str(tmp_path), "policy": ["m"], **changes})


def test_policy_labels_and_adapters(tmp_path):
    cfg = BenchConfig(out=str(tmp_path), policy=["sft=runs/a/model", "runs/b/grpo"], adapter=["none", "lora"])
    assert [(p.label, p.model, p.adapter) for p in cfg.policies()] == [
        ("sft", "runs/a/model", None), ("grpo", "runs/b/grpo", "lora")]


def test_bad_flags_exit_2(tmp_path, capsys):
    assert main(["bench", "--out", str(tmp_path), "--policy", "m", "--rows", "nope"]) == 2
    assert "calver bench: error" in capsys.readouterr().err


@pytest.mark.slow
@require_torch
def test_quick_suite_end_to_end_on_the_tiny_model(tiny_model_dir, tiny_lora_dir, tmp_path, capsys):
    """Every row and column of the table is there (not the effect sizes: the tiny model is untrained);
    a second run resumes: nothing is sampled again and the table is the same."""
    out = tmp_path / "bench"
    args = ["bench", "--suite", "quick", "--policy", f"tiny={tiny_model_dir}", "--policy", f"twin={tiny_model_dir}",
            "--adapter", "none", "--adapter", str(tiny_lora_dir),
            "--out", str(out), "--limit", "2", "--k", "2", "--max_tokens", "24", "--backend", "hf",
            "--draws", "200", "--kk_source", "calver"]
    assert main(args) == 0, capsys.readouterr().err
    t = load_table(out / "table.json")
    keys = [r.key for r in SUITES["quick"]]
    assert [(x.row, x.policy) for x in t.lines] == [(k, p) for k in keys for p in ("tiny", "twin")]
    for x in t.lines:
        assert x.n_units == 2 and x.n_problems == 2
        assert {"plurality", "medoid", "calver", "first", "confidence"} <= set(x.accuracy)
        assert 0.0 <= x.parse_rate <= 1.0
        assert x.gain_plurality.estimate == pytest.approx(x.accuracy["calver"].estimate
                                                          - x.accuracy["plurality"].estimate)
        assert (x.exact_recovery is not None) == x.row.startswith("bnlearn_l")
        assert x.verification
    assert [x.verification.split(" (")[0] for x in t.lines if x.policy == "tiny"] == [
        "source_graph", "source_graph", "candidate_graph", "candidate_graph", "candidate_graph", "source_graph",
        "candidate_local", "candidate_local", "candidate_local"]
    md = (out / "table.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| row"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(COLUMNS)
    assert (out / "table.png").stat().st_size > 0
    for k in keys:
        assert (out / "rows" / k / "report.md").exists()
    assert {"build", "sample tiny", "select tiny", "evaluate"} <= set(t.seconds)
    assert t.policies == {"tiny": str(tiny_model_dir), "twin": f"{tiny_model_dir} + {tiny_lora_dir}"}
    twin = json.loads(next(out.glob("pools/twin/clear_core/pool/manifest.json")).read_text())
    assert twin["adapter"]["path"] == str(tiny_lora_dir)
    pools = sorted(out.glob("pools/*/*/pool/candidates.jsonl"))
    assert len(pools) == 2 * len(keys)
    before = {p: p.read_bytes() for p in pools}
    assert main(args) == 0  # resumed: the frozen pools are reused as they are
    assert {p: p.read_bytes() for p in pools} == before
    again = load_table(out / "table.json")
    assert [x.to_dict() for x in again.lines] == [x.to_dict() for x in t.lines]
    assert json.loads((out / "problems" / "kk_3" / "summary.json").read_text())["n_problems"] == 2
