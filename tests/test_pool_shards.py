"""Sharded sampling: 3 shards of the tiny model (HF backend, CPU), merged, equal the unsharded pool byte for
byte (candidates.jsonl, problems.jsonl; the manifest except its ``created`` timestamp); the merge refuses a
missing, duplicate, unfrozen or disagreeing shard; the shard fields are validated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures import synthetic_units

from calver.cli import main as calver_main
from calver.infer.manifest import canonical_units, shard_units
from calver.infer.pool import Pool
from calver.infer.pool_merge import PoolMergeError, merge_pools
from calver.infer.sample_config import ConfigError, from_dict, load_config

N_SHARDS = 3


def write_cfg(tmp: Path, model: Path, **extra) -> Path:
    probs = tmp / "problems.jsonl"
    if not probs.exists():
        probs.write_text("".join(json.dumps(p.to_dict()) + "\n" for p, _, _ in synthetic_units(5, 2, seed=5)))
    d = {"problems": str(probs), "out": str(tmp / "unused"), "model": str(model), "k": 4, "seeds": [0, 1],
         "max_tokens": 24, "backend": "hf", **extra}
    path = tmp / "cfg.yaml"
    path.write_text(json.dumps(d))  # JSON is YAML
    return path


def manifest_without_created(pool: Pool) -> dict:
    m = pool.manifest()
    m.pop("created")
    return m


@pytest.fixture(scope="module")
def pools(tiny_model_dir, tmp_path_factory):
    """The unsharded pool, the 3 shard pools (sampled through the CLI, batched differently) and their merge."""
    tmp = tmp_path_factory.mktemp("shards")
    cfg = write_cfg(tmp, tiny_model_dir)
    assert calver_main(["sample", "--config", str(cfg), "--out", str(tmp / "full"), "--batch_units", "5"]) == 0
    shards = []
    for i in range(N_SHARDS):
        # both spellings of the flag: --num_shards and the kebab-case --num-shards
        flag = "--num_shards" if i == 0 else "--num-shards"
        out = tmp / f"shard{i}"
        assert calver_main(["sample", "--config", str(cfg), "--out", str(out), "--batch_units", "2",
                            "--shard", str(i), flag, str(N_SHARDS)]) == 0
        shards.append(out)
    assert calver_main(["pool", "merge", "--out", str(tmp / "merged"), *map(str, shards)]) == 0
    return {"tmp": tmp, "cfg": cfg, "full": Pool(tmp / "full"), "shards": [Pool(s) for s in shards],
            "merged": Pool(tmp / "merged")}


def test_merged_shards_equal_the_unsharded_pool(pools):
    full, merged, shards = pools["full"], pools["merged"], pools["shards"]
    assert full.frozen and merged.frozen and all(s.frozen for s in shards)
    ids = [r["problem"]["id"] for r in full.problem_rows()]
    units = canonical_units(ids, [0, 1])
    assert len(units) == 10
    # each shard holds exactly the units i with i % 3 == shard, in canonical order, K rows each
    for i, s in enumerate(shards):
        got = [(u.problem_id, u.seed) for u in s.units()]
        assert got == shard_units(units, i, N_SHARDS) == units[i::N_SHARDS]
        assert all(len(u.texts) == 4 for u in s.units())
        m = s.manifest()
        assert m["shard"]["index"] == i and m["shard"]["num_shards"] == N_SHARDS and m["n_units"] == 10
        assert m["shard"]["n_units"] == len(range(i, 10, N_SHARDS))
        # shards hold the full problem list (same corpus hash)
        assert s.problems_path.read_bytes() == full.problems_path.read_bytes()
    # byte-identical candidates and problems; the manifest equals the unsharded one except 'created'
    # (a wall-clock timestamp of when sampling began, which differs between any two runs)
    assert merged.candidates_path.read_bytes() == full.candidates_path.read_bytes()
    assert merged.problems_path.read_bytes() == full.problems_path.read_bytes()
    assert "shard" not in full.manifest() and "shard" not in merged.manifest()
    assert manifest_without_created(merged) == manifest_without_created(full)
    assert [(u.problem_id, u.seed) for u in merged.units()] == units
    # the texts are real samples (not all the same), so equality is not vacuous
    assert len({r["text"] for r in full.candidate_rows()}) > 10
    rec = json.loads((merged.root / "merge.json").read_text())
    assert [s["index"] for s in rec["shards"]] == [0, 1, 2]


def test_shard_resume_of_a_frozen_shard_is_a_noop_and_other_shard_is_refused(pools):
    cfg, shard0 = pools["cfg"], pools["shards"][0].root
    before = (shard0 / "candidates.jsonl").read_bytes()
    assert calver_main(["sample", "--config", str(cfg), "--out", str(shard0), "--shard", "0",
                        "--num_shards", str(N_SHARDS)]) == 0
    assert (shard0 / "candidates.jsonl").read_bytes() == before
    # the same directory under another shard index is a different configuration: refused, exit 2
    assert calver_main(["sample", "--config", str(cfg), "--out", str(shard0), "--shard", "1",
                        "--num_shards", str(N_SHARDS)]) == 2


def _copy_shards(pools, tmp: Path) -> list[Path]:
    out = []
    for s in pools["shards"]:
        dst = tmp / s.root.name
        shutil.copytree(s.root, dst)
        out.append(dst)
    return out


def _edit_manifest(root: Path, fn) -> None:
    m = json.loads((root / "manifest.json").read_text())
    fn(m)
    (root / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True))


def test_merge_refuses_missing_duplicate_and_mismatched_shards(pools, tmp_path, capsys):
    s0, s1, s2 = (str(s.root) for s in pools["shards"])
    with pytest.raises(PoolMergeError, match=r"missing shard\(s\) \[1\]"):
        merge_pools([s0, s2], tmp_path / "a", log=lambda m: None)
    with pytest.raises(PoolMergeError, match="shard 1 given twice"):
        merge_pools([s0, s1, s1, s2], tmp_path / "b", log=lambda m: None)
    # the CLI says so and exits 2, leaving no output directory behind
    assert calver_main(["pool", "merge", "--out", str(tmp_path / "c"), s0, s2]) == 2
    assert "missing shard" in capsys.readouterr().err and not (tmp_path / "c").exists()
    # an unsharded pool is not a shard
    with pytest.raises(PoolMergeError, match="not a shard"):
        merge_pools([str(pools["full"].root)], tmp_path / "d", log=lambda m: None)
    # --out must be new (or empty)
    with pytest.raises(PoolMergeError, match="not empty"):
        merge_pools([s0, s1, s2], pools["merged"].root, log=lambda m: None)


def test_merge_refuses_disagreeing_unfrozen_and_overlapping_shards(pools, tmp_path):
    # a shard sampled at another temperature
    a = _copy_shards(pools, tmp_path / "temp")
    _edit_manifest(a[1], lambda m: m["sampling"].update(temperature=0.7))
    with pytest.raises(PoolMergeError, match=r"sampling\.temperature"):
        merge_pools(a, tmp_path / "out_temp", log=lambda m: None)
    # ... from another model
    b = _copy_shards(pools, tmp_path / "model")
    _edit_manifest(b[2], lambda m: m["model"].update(content_hash="sha256:other"))
    with pytest.raises(PoolMergeError, match=r"model\.content_hash"):
        merge_pools(b, tmp_path / "out_model", log=lambda m: None)
    # ... with a different num_shards
    c = _copy_shards(pools, tmp_path / "n")
    _edit_manifest(c[2], lambda m: m["shard"].update(num_shards=4))
    with pytest.raises(PoolMergeError, match="num_shards disagrees"):
        merge_pools(c, tmp_path / "out_n", log=lambda m: None)
    # an unfinished (unfrozen) shard
    d = _copy_shards(pools, tmp_path / "unfrozen")
    (d[1] / "FROZEN").unlink()
    with pytest.raises(PoolMergeError, match="not frozen"):
        merge_pools(d, tmp_path / "out_unfrozen", log=lambda m: None)
    # a unit appearing in two shards
    e = _copy_shards(pools, tmp_path / "dup")
    first_unit_of_1 = (e[1] / "candidates.jsonl").read_text().splitlines(keepends=True)[:4]
    with open(e[0] / "candidates.jsonl", "a") as fh:
        fh.writelines(first_unit_of_1)
    with pytest.raises(PoolMergeError, match="not one of its units|appears in shard"):
        merge_pools(e, tmp_path / "out_dup", log=lambda m: None)
    # a shard missing one of its units (a gap)
    f = _copy_shards(pools, tmp_path / "gap")
    lines = (f[2] / "candidates.jsonl").read_text().splitlines(keepends=True)
    (f[2] / "candidates.jsonl").write_text("".join(lines[:-4]))
    with pytest.raises(PoolMergeError, match="lacks 1 of its unit"):
        merge_pools(f, tmp_path / "out_gap", log=lambda m: None)
    # a unit with a missing candidate
    g = _copy_shards(pools, tmp_path / "partial")
    (g[2] / "candidates.jsonl").write_text("".join(lines[:-1]))
    with pytest.raises(PoolMergeError, match="candidate indices"):
        merge_pools(g, tmp_path / "out_partial", log=lambda m: None)
    assert not any(p.name.startswith("out_") for p in tmp_path.iterdir())


def test_shard_config_validation(tmp_path):
    base = {"problems": "p", "out": "o", "model": "m"}
    cfg = from_dict({**base, "shard": 2, "num_shards": 3})
    assert (cfg.shard, cfg.num_shards) == (2, 3)
    assert (from_dict(base).shard, from_dict(base).num_shards) == (0, 1)
    with pytest.raises(ConfigError, match="'shard'"):
        from_dict({**base, "shard": 3, "num_shards": 3})
    with pytest.raises(ConfigError, match="'shard'"):
        from_dict({**base, "shard": -1, "num_shards": 3})
    with pytest.raises(ConfigError, match="'num_shards'"):
        from_dict({**base, "num_shards": 0})
    with pytest.raises(ConfigError, match="num_shards"):
        from_dict({**base, "num_shards": "three"})
    p = tmp_path / "c.yaml"
    p.write_text("problems: a\nout: b\nmodel: m\n")
    for flag in ("--num_shards", "--num-shards"):
        cfg = load_config(p, ["--shard", "1", flag, "4"])
        assert (cfg.shard, cfg.num_shards) == (1, 4)
    with pytest.raises(ConfigError, match="'shard'"):
        load_config(p, ["--shard", "4", "--num-shards", "4"])


def test_shard_rule_partitions_the_units():
    units = canonical_units([f"p{i}" for i in range(7)], [3, 1])
    assert units[:3] == [("p0", 3), ("p0", 1), ("p1", 3)]
    for n in (1, 2, 3, 5, 20):
        parts = [shard_units(units, i, n) for i in range(n)]
        assert sorted(u for p in parts for u in p) == sorted(units)
        assert all(parts[i] == [u for j, u in enumerate(units) if j % n == i] for i in range(n))
