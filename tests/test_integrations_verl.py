"""calver.integrations.verl: verl's compute_score contract (bits equal ``score()`` on gold, wrong and garbage
traces; unscorable rows get score 0.0, bits 0, unscorable 1; never raises) and the parquet export."""

from __future__ import annotations

import importlib.util
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from calver import reward as reward_core
from calver.data_gen.export import problem_json, to_grpo_rows
from calver.data_gen.generators import GenConfig, canonical_trace, generate
from calver.evaluation.audits import replace_slot
from calver.integrations import verl as cv
from calver.reward import RewardEngine, RewardOptions
from calver.verifier import SLOTS, score

KEYS = ("score", "graph", "query", "strategy", "derivation", "result", "answer", "unscorable")
TASKS = ("backdoor_set", "intervention_reachability", "cycle_witness")
pytestmark = pytest.mark.usefixtures("reward_worker_pools")  # stop the budgeted path's workers



@pytest.fixture(scope="module")
def problems():
    cfg = GenConfig(seed=11, n_nodes=(4, 6))
    return [p for t in TASKS for p in generate(t, 3, cfg)]


def _variants(p) -> list[str]:
    """Gold, wrong (corrupted slots, truncations) and garbage traces for ``p``."""
    gold = canonical_trace(p)
    lines = gold.splitlines()
    return [
        gold,
        "\n".join(lines[:3]),
        "\n".join(lines[1:]),
        replace_slot(gold, "ANSWER", "{}"),
        replace_slot(gold, "GRAPH", "A -> B"),
        replace_slot(gold, "DERIVATION", "because"),
        gold.upper(),
        "",
        "no slots at all",
        "GRAPH: ->->-> ((( \x00 \u202e",
        "ANSWER: " * 2000,
        "".join(random.Random(0).choice("GRAPH:ANSWER->{}, \n") for _ in range(3000)),
    ]


def _extra(p, **more):
    return {"problem_json": problem_json(p), "index": 0, "split": "train", **more}


def _check_shape(out):
    assert tuple(out) == KEYS
    assert isinstance(out["score"], float) and math.isfinite(out["score"])
    assert all(out[k] in (0, 1) and isinstance(out[k], int) for k in KEYS[1:])


def test_gold_wrong_garbage_bits_equal_score(problems):
    seen_partial = False
    for p in problems:
        for text in _variants(p):
            out = cv.compute_score("calver/" + p.task, text, "", _extra(p))
            _check_shape(out)
            ts = score(text, p)
            assert [out[s.lower()] for s in SLOTS] == list(ts.bits), (p.id, text[:80])
            assert out["score"] == pytest.approx(ts.total / 6)
            assert out["unscorable"] == 0
            seen_partial |= 0 < ts.total < 6
        gold = cv.compute_score("calver/" + p.task, canonical_trace(p), "", _extra(p))
        assert gold["score"] == 1.0 and all(gold[s.lower()] == 1 for s in SLOTS)
    assert seen_partial


def test_variants_and_verl_extras(problems):
    p = problems[0]
    half = "\n".join(canonical_trace(p).splitlines()[:4])
    bits = score(half, p).bits
    # verl adds its own keys to extra_info and may pass reward_router_address etc.: ignored
    extra = _extra(p, num_turns=None, rollout_reward_scores={}, experiment_name="x")
    strict = cv.compute_score("calver/x", half, "", extra, variant="strict", reward_router_address=None)
    assert strict["score"] == 0.0 and [strict[s.lower()] for s in SLOTS] == list(bits)
    w = [3, 1, 1, 1, 1, 3]
    weighted = cv.compute_score("calver/x", half, "", extra, variant="weighted", weights=w)
    assert weighted["score"] == pytest.approx(sum(a * b for a, b in zip(w, bits)) / sum(w))
    validity = cv.compute_score("calver/x", half, "", extra, variant="validity")
    assert validity["score"] == pytest.approx(RewardOptions(variant="validity").spec.value(bits))
    for bad in ({"variant": "nope"}, {"weights": [1, 2]}, {"budget_s": -1}, {"workers": "two"}):
        with pytest.raises(ValueError, match="reward option"):  # a configuration error stops the run, named
            cv.compute_score("calver/x", half, "", extra, **bad)


def test_problem_in_ground_truth_is_a_fallback(problems):
    p = problems[1]
    out = cv.compute_score("calver/x", canonical_trace(p), problem_json(p), None)
    assert out["score"] == 1.0
    out = cv.compute_score("calver/x", canonical_trace(p), p.to_dict(), {})
    assert out["score"] == 1.0


GARBAGE_PROBLEMS = [None, "", "not json", "[1, 2]", '{"task": "nope"}', '{"task": "backdoor_set"}', 12, 3.5,
                    b"{}", ["a"], {"task": "backdoor_set", "query": 7}, "[" * 100_000, '{"a": ' + "9" * 5000 + "}",
                    {1: {2, 3}}]


@pytest.mark.parametrize("bad", GARBAGE_PROBLEMS, ids=range(len(GARBAGE_PROBLEMS)))
def test_unscorable_problem_gets_zero_and_the_flag(problems, bad):
    reward_core.reset_stats()
    out = cv.compute_score("calver/x", canonical_trace(problems[0]), "", {"problem_json": bad})
    _check_shape(out)
    assert out == {"score": 0.0, **{k: 0 for k in KEYS[1:-1]}, "unscorable": 1}
    assert reward_core.stats()["unscorable"] == 1


@pytest.mark.parametrize("solution", [None, 7, b"GRAPH: A -> B", ["GRAPH"], {"text": "x"}, float("nan")])
def test_unscorable_solution_and_odd_arguments(problems, solution):
    out = cv.compute_score("calver/x", solution, "", _extra(problems[0]))
    assert out["unscorable"] == 1 and out["score"] == 0.0
    for info in (None, [], "x", 5, {"problem_json": None}):
        _check_shape(cv.compute_score(None, "GRAPH: A -> B", None, info))
    _check_shape(cv.compute_score())


def test_ungrounded_problem_is_unscorable_unless_allowed():
    from calver.data_gen.text_levels import constructed_problems
    from calver.infer.firewall import strip_problem
    from calver.verifier import get_family

    probs = generate("backdoor_set", 10, GenConfig(seed=3, n_nodes=(5, 8)))
    p = constructed_problems(probs, 1, random.Random(3))[0][0]
    fam = get_family("backdoor_set")
    trace = fam.canonical_trace(p, fam.validity_class(p.graph, fam.normalize_query(p))[0])
    stripped = json.dumps(strip_problem(p).to_dict())
    out = cv.compute_score("calver/x", trace, "", {"problem_json": stripped})
    assert out["unscorable"] == 1 and out["score"] == 0.0
    assert cv.compute_score("calver/x", trace, "", {"problem_json": stripped}, allow_ungrounded=True)["score"] == 1.0
    assert cv.compute_score("calver/x", trace, "", {"problem_json": json.dumps(p.to_dict())})["score"] == 1.0


def test_async_entry_point_agrees(problems):
    import asyncio
    import inspect

    assert inspect.iscoroutinefunction(cv.compute_score_async)  # verl awaits it instead of using an executor
    texts, infos = [], []
    for p in problems[:3]:
        for t in _variants(p)[:4]:
            texts.append(t)
            infos.append(_extra(p))

    async def run():
        return await asyncio.gather(*(cv.compute_score_async("calver/x", t, "", i) for t, i in zip(texts, infos)))

    assert asyncio.run(run()) == [cv.compute_score("calver/x", t, "", i) for t, i in zip(texts, infos)]


def test_budget_path_returns_the_same_bits(problems):
    """``budget_s``/``workers`` score on the worker pool and give the same bits as in-process scoring."""
    texts, pjs = [], []
    for p in problems:
        for t in _variants(p)[:7]:
            texts.append(t)
            pjs.append(problem_json(p))
    plain = reward_core.score_batch(texts, pjs)
    pooled = reward_core.score_batch(texts, pjs, RewardOptions(workers=1))
    budgeted = reward_core.score_batch(texts, pjs, RewardOptions(budget_s=30.0, workers=2))
    assert [v.bits for v in pooled] == [v.bits for v in plain] == [v.bits for v in budgeted]
    assert [v.bits for v in plain] == [score(t, json_problem(pj)).bits for t, pj in zip(texts, pjs)]


def json_problem(pj):
    from calver.verifier import Problem

    return Problem.from_dict(json.loads(pj))


def test_loads_the_way_verl_does(problems):
    """verl: ``pkg://calver.integrations.verl`` (importlib.import_module) or a file path
    (spec_from_file_location under a private name)."""
    spec = importlib.util.spec_from_file_location("custom_module_test", cv.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = problems[2]
    assert mod.compute_score("calver/x", canonical_trace(p), "", _extra(p))["score"] == 1.0


# ---- export -------------------------------------------------------------------------------------
def test_export_parquet_layout_and_round_trip(problems, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "train.parquet"
    assert cv.export_parquet(problems, path) == len(problems)
    table = pq.read_table(str(path))
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    grpo = to_grpo_rows(problems)
    for i, (row, p, g) in enumerate(zip(rows, problems, grpo)):
        assert row["data_source"] == f"calver/{p.task}" and row["ability"] == "causal_reasoning"
        assert row["prompt"] == g["prompt"] and [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["reward_model"]["style"] == "rule"
        assert row["reward_model"]["ground_truth"] == g["validity_class_json"]
        info = row["extra_info"]
        assert info["index"] == i and info["split"] == "train" and info["id"] == p.id and info["task"] == p.task
        assert info["problem_json"] == problem_json(p)
        # what verl hands compute_score for this row, on the gold trace
        out = cv.compute_score(row["data_source"], canonical_trace(p), row["reward_model"]["ground_truth"], info)
        assert out["score"] == 1.0 and out["unscorable"] == 0


def test_export_refuses_ungrounded_and_empty(tmp_path):
    pytest.importorskip("pyarrow")
    from calver.data_gen.text_levels import constructed_problems
    from calver.infer.firewall import strip_problem

    probs = generate("backdoor_set", 10, GenConfig(seed=3, n_nodes=(5, 8)))
    p = strip_problem(constructed_problems(probs, 1, random.Random(3))[0][0])
    with pytest.raises(ValueError, match="allow_ungrounded"):
        cv.export_parquet([p], tmp_path / "x.parquet")
    assert cv.export_parquet([p], tmp_path / "x.parquet", allow_ungrounded=True) == 1
    with pytest.raises(ValueError, match="no rows"):
        cv.export_parquet([], tmp_path / "y.parquet")


def test_cli_from_a_gen_folder(problems, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    gen = tmp_path / "gen"
    gen.mkdir()
    rows = to_grpo_rows(problems)
    (gen / "grpo.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "verl" / "train.parquet"
    assert cv.main(["--from", str(gen), "--out", str(out), "--split", "val"]) == 0
    got = pq.read_table(str(out)).to_pylist()
    assert [r["extra_info"]["problem_json"] for r in got] == [r["problem_json"] for r in rows]
    assert {r["extra_info"]["split"] for r in got} == {"val"}
    # problems.jsonl only (re-rendered prompts): the same rows
    only = tmp_path / "only"
    only.mkdir()
    (only / "problems.jsonl").write_text("".join(problem_json(p) + "\n" for p in problems), encoding="utf-8")
    assert cv.main(["--from", str(only), "--out", str(tmp_path / "b.parquet")]) == 0
    again = pq.read_table(str(tmp_path / "b.parquet")).to_pylist()
    assert [(r["extra_info"]["id"], r["prompt"]) for r in again] == [(r["id"], r["prompt"]) for r in rows]
    assert cv.main(["--from", str(tmp_path / "missing"), "--out", str(tmp_path / "c.parquet")]) == 2
    r = subprocess.run([sys.executable, "-m", "calver.integrations.verl", "--from", str(gen), "--out",
                        str(tmp_path / "d.parquet")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "wrote" in r.stdout and Path(tmp_path / "d.parquet").exists()


def test_import_is_torch_free():
    code = ("import sys, calver.integrations.verl, calver.integrations.openrlhf; "
            "bad = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]; "
            "assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_a_row_over_budget_is_unscorable_with_its_reason(problems, monkeypatch):
    """A row over its budget reaches verl as an unscorable row (score 0.0, bits 0, unscorable 1), counted
    under ``timeout``; the other rows keep their bits. The stall is a real hung worker (tests' slow scorer)."""
    from test_reward_workers import STALL, slow_scorer

    p = problems[0]
    gold = canonical_trace(p)
    engine = RewardEngine(budget_s=0.5, workers=1, scorer=slow_scorer)
    monkeypatch.setattr(reward_core, "engine_for", lambda options, end_markers=None: engine)
    reward_core.reset_stats()
    try:
        outs = [cv.compute_score("calver/x", t, "", _extra(p), budget_s=0.5) for t in (gold, gold + STALL)]
    finally:
        engine.close()
    assert outs[0]["score"] == 1.0 and outs[0]["unscorable"] == 0
    assert outs[1] == {"score": 0.0, **{k: 0 for k in KEYS[1:-1]}, "unscorable": 1}
    assert reward_core.stats()["unscorable_reasons"] == {"timeout": 1}


def test_the_exporter_warns_for_prompts_verl_would_truncate(problems, caplog):
    """Ecosystem review: verl's default data.max_prompt_length (512) left-truncated 43% of the GPU chain's
    prompts, cutting the contract's system message first, with no word from the exporter."""
    rows = to_grpo_rows(problems)
    lengths = [sum(len(m["content"]) for m in r["prompt"]) for r in rows]
    with caplog.at_level("WARNING", logger="calver.integrations.verl"):
        assert cv.check_prompt_lengths(rows, 10_000) == 0
        assert not caplog.records
        over = cv.check_prompt_lengths(rows, 64)
    assert over == len(rows) and "data.max_prompt_length=" in caplog.text and "estimated" in caplog.text

    class Tok:  # a tokenizer whose chat template counts one token per character
        @staticmethod
        def apply_chat_template(msgs, tokenize=True, add_generation_prompt=True):
            return [0] * sum(len(m["content"]) for m in msgs)

    assert cv.check_prompt_lengths(rows, max(lengths) - 1, Tok()) == lengths.count(max(lengths))
    assert cv.check_prompt_lengths(rows, max(lengths), Tok()) == 0
