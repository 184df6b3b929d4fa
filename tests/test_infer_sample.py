"""`calver sample`: config parsing, manifest, freezing, and resume without loss or duplication
(model-free with a deterministic fake sampler; the kill -9 test on the tiny model is in
test_infer_pool_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import synthetic_units
from testing_utils import is_available, require_modules

from calver.data_gen.prompts import render_prompt, user_text
from calver.infer.manifest import hash_dir, prompts_hash, unit_seed
from calver.infer.pool import Pool, PoolError
from calver.infer.sample import load_problem_rows, run_sample
from calver.infer.sample_config import ConfigError, SampleConfig, from_dict, load_config
from calver.infer.sampler import Completion


class DetSampler:
    """Completions that depend only on (prompt, seed, n): what a seeded backend guarantees."""

    backend = "hf"

    def __init__(self, fail_after: int | None = None):
        self.calls, self.fail_after, self.prompts = 0, fail_after, []

    def generate(self, prompts, cfg, seeds, *, progress=None):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1
        self.prompts += prompts
        out = []
        for p, s in zip(prompts, seeds):
            h = abs(hash((json.dumps(p), s))) % 997
            out.append([Completion(f"ANSWER: {{X{h}_{i}}}", "stop", 3 + i, -0.5 - i / 10) for i in range(cfg.n)])
        return out

    def close(self):
        pass


@pytest.fixture()
def problems_file(tmp_path):
    units = synthetic_units(5, 2, seed=4)
    path = tmp_path / "problems.jsonl"
    rows = [{"problem": p.to_dict(), "labels": {"note": "kept out of views"}} if i % 2 else p.to_dict()
            for i, (p, _, _) in enumerate(units)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Fake"]}')
    return path, model


def cfg_for(tmp_path, problems_file, out="pool", **kw) -> SampleConfig:
    path, model = problems_file
    return from_dict({"problems": str(path), "out": str(tmp_path / out), "model": str(model), "k": 3,
                      "seeds": [0, 1], "batch_units": 2, "backend": "hf", **kw})


def rows_of(pool: Pool):
    return sorted((r["problem_id"], r["seed"], r["candidate_index"], r["text"], r["num_tokens"])
                  for r in pool.candidate_rows())


def test_config_errors_name_the_field(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("problems: a\nout: b\nmodel: m\ntemprature: 0.7\n")
    with pytest.raises(ConfigError, match="temprature"):
        load_config(p)
    p.write_text("problems: a\nout: b\nmodel: m\nk: eight\n")
    with pytest.raises(ConfigError, match="'k'"):
        load_config(p)
    p.write_text("problems: a\nmodel: m\n")
    with pytest.raises(ConfigError, match="out"):
        load_config(p)
    p.write_text("problems: a\nout: b\nmodel: m\n")
    cfg = load_config(p, ["--k", "4", "--seeds", "3", "4", "--backend", "vllm"])
    assert (cfg.k, cfg.seeds, cfg.backend) == (4, [3, 4], "vllm")
    with pytest.raises(ConfigError, match="backend"):
        load_config(p, ["--backend", "tpu"])
    with pytest.raises(ConfigError, match="seeds"):
        load_config(p, ["--seeds", "1", "1"])


def test_repo_configs_parse():
    root = Path(__file__).resolve().parents[1] / "configs" / "sample"
    files = sorted(root.glob("*.yaml"))
    assert files
    for f in files:
        load_config(f)


def test_sample_writes_pool_manifest_and_freezes(tmp_path, problems_file):
    cfg = cfg_for(tmp_path, problems_file, selector_context={"domain": "synthetic"})
    pool = run_sample(cfg, sampler=DetSampler(), log=lambda m: None)
    # the parquet copy is written exactly when pyarrow is installed (JSONL is the source of truth)
    assert pool.frozen and (pool.root / "candidates.parquet").exists() == is_available("pyarrow")
    assert len(pool.units()) == 10 and all(len(u.texts) == 3 for u in pool.units())
    m = pool.manifest()
    for key in ("model", "adapter", "prompt", "quantization", "sampling", "seeds", "corpus", "versions", "backend"):
        assert key in m, key
    assert m["model"]["content_hash"] == hash_dir(problems_file[1]) and m["seeds"] == [0, 1]
    assert m["sampling"]["k"] == 3 and m["versions"]["scorer"]["contract_version"]
    assert m["selector_context"] == {"domain": "synthetic"}
    # the manifest hashes the user turns that were sampled, in problem order
    users = [render_prompt(p)[1]["content"] for p in pool.problems().values()]
    assert m["prompt"]["user_prompts_hash"] == prompts_hash(users)
    row = next(pool.candidate_rows())
    assert set(row) >= {"problem_id", "source_id", "seed", "candidate_index", "text", "finish_reason", "num_tokens",
                        "mean_logprob"}
    with pytest.raises(PoolError):
        pool.append_candidates([row])
    # rerunning a frozen complete pool is a no-op; a different config is refused
    run_sample(cfg, sampler=DetSampler(fail_after=0), log=lambda m: None)
    with pytest.raises(PoolError, match="sampling"):
        run_sample(cfg_for(tmp_path, problems_file, temperature=0.5), sampler=DetSampler(), log=lambda m: None)


def test_resume_refuses_changed_user_prompts(tmp_path, problems_file, monkeypatch):
    cfg = cfg_for(tmp_path, problems_file)
    run_sample(cfg, sampler=DetSampler(), log=lambda m: None)
    monkeypatch.setattr("calver.infer.sample.user_text", lambda p: "another renderer")
    with pytest.raises(PoolError, match="prompt"):
        run_sample(cfg, sampler=DetSampler(), log=lambda m: None)


def test_resume_equals_uninterrupted(tmp_path, problems_file):
    ref = run_sample(cfg_for(tmp_path, problems_file, out="ref"), sampler=DetSampler(), log=lambda m: None)
    cfg = cfg_for(tmp_path, problems_file, out="run")
    with pytest.raises(KeyboardInterrupt):
        run_sample(cfg, sampler=DetSampler(fail_after=2), log=lambda m: None)
    pool = Pool(cfg.out)
    assert not pool.frozen and len(list(pool.candidate_rows())) == 4 * 3
    # a kill in the middle of one unit's append: two of its rows and a torn third line
    done = {(r["problem_id"], r["seed"]) for r in pool.candidate_rows()}
    pid = next(r["problem"]["id"] for r in pool.problem_rows() if (r["problem"]["id"], 1) not in done)
    with open(pool.candidates_path, "a") as fh:
        for i in range(2):
            fh.write(json.dumps({"problem_id": pid, "source_id": pid, "seed": 1, "candidate_index": i,
                                 "text": "partial", "finish_reason": "stop", "num_tokens": 1,
                                 "mean_logprob": 0.0}) + "\n")
        fh.write('{"problem_id": "torn", "se')
    logs = []
    resumed = run_sample(cfg, sampler=DetSampler(), log=logs.append)
    assert any("dropping 2 row" in m for m in logs)
    assert resumed.frozen and rows_of(resumed) == rows_of(ref)
    assert len(rows_of(resumed)) == len(set(rows_of(resumed))) == 30


def test_unit_seed_and_prompts(problems_file):
    assert unit_seed(0, "p1") == unit_seed(0, "p1") != unit_seed(1, "p1")
    rows = load_problem_rows(problems_file[0])
    from calver.verifier import Problem

    p = Problem.from_dict(rows[0]["problem"])
    msgs = render_prompt(p)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "STRATEGY" in msgs[0]["content"] and msgs[1]["content"] == user_text(p)
    assert p.graph.to_text().split(",")[0].split("->")[0].strip() in msgs[1]["content"]


@require_modules("huggingface_hub")
def test_a_hub_id_is_resolved_to_its_snapshot_and_commit(tmp_path, monkeypatch):
    """Ecosystem review: a pool sampled from a hub id recorded neither its revision nor a content hash."""
    import huggingface_hub.constants as hc

    from calver.infer.manifest import is_hub_id, model_record, resolve_hub_model

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--acme--tiny-chat"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert is_hub_id("acme/tiny-chat") and not is_hub_id(str(snap))
    path, rev = resolve_hub_model("acme/tiny-chat")
    assert Path(path) == snap and rev == commit
    rec = model_record(path, rev)
    assert rec["id"] == "acme/tiny-chat" and rec["revision"] == commit and rec["content_hash"].startswith("sha256:")
    assert resolve_hub_model(str(snap), None) == (str(snap), None)  # a local path stays as it is
    with pytest.raises(ValueError, match="cannot resolve the hub id"):
        resolve_hub_model("acme/not-cached")


def test_loaders_parse_each_row_once(problems_file, monkeypatch):
    from calver.infer.sample import load_problems
    from calver.verifier import Problem, parsers

    path, _ = problems_file
    want = [Problem.from_dict(r.get("problem", r)).to_dict() for r in map(json.loads, path.read_text().splitlines())]
    calls = []
    real = parsers.parse_graph
    monkeypatch.setattr(parsers, "parse_graph", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert [p.to_dict() for p in load_problems(path)] == want
    assert len(calls) == len(want)  # the rows' text, not a rewritten copy of it
    rows = load_problem_rows(path)
    assert [r["problem"] for r in rows] == want and len(calls) == 2 * len(want)
    assert [r["labels"] for r in rows] == [{"note": "kept out of views"} if i % 2 else {} for i in range(len(want))]
