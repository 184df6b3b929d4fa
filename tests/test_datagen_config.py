"""GenConfig validation (errors name the field), YAML configs, and the ``calver gen`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calver.data_gen.gen_config import ConfigError, GenConfig, load_config, run_config_from_dict
from calver.data_gen.generators import generate

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kwargs, field", [
    ({"seed": "x"}, "seed"),
    ({"seed": 0, "n_nodes": [9, 4]}, "n_nodes"),
    ({"seed": 0, "n_nodes": 2}, "n_nodes"),
    ({"seed": 0, "n_nodes": 99}, "n_nodes"),
    ({"seed": 0, "density": 1.5}, "density"),
    ({"seed": 0, "latent": -0.1}, "latent"),
    ({"seed": 0, "graph_class": "tree"}, "graph_class"),
    ({"seed": 0, "naming": "klingon"}, "naming"),
    ({"seed": 0, "encoding": ["arrows", "yaml"]}, "encoding"),
    ({"seed": 0, "many_satisfier": "yes"}, "many_satisfier"),
    ({"seed": 0, "min_valid": 0}, "min_valid"),
    ({"seed": 0, "max_attempts": 0}, "max_attempts"),
    ({"seed": 0, "variants": []}, "variants"),
])
def test_bad_values_name_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=repr(field)):
        GenConfig.from_dict(kwargs)


def test_seed_required_and_unknown_keys():
    with pytest.raises(ConfigError, match="'seed' is required"):
        GenConfig.from_dict({"density": 0.2})
    with pytest.raises(ConfigError, match="densty"):
        GenConfig.from_dict({"seed": 0, "densty": 0.2})
    with pytest.raises(TypeError):
        GenConfig()  # no silent random seed


def test_family_level_errors_name_the_field():
    with pytest.raises(ConfigError, match="'graph_class'"):
        generate("cycle_witness", 1, GenConfig(seed=0, graph_class="DAG"))
    with pytest.raises(ConfigError, match="'variants'"):
        generate("cycle_witness", 1, GenConfig(seed=0, variants=["minimal"]))


def test_yaml_round_trip(tmp_path):
    cfg = GenConfig(seed=5, n_nodes=[4, 6], encoding=["dot", "prose"], graph_class=["DAG", "ADMG"], latent=0.1)
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**cfg.to_dict(), "tasks": ["mediator"], "n": 3}))
    rc = load_config(path)
    assert rc.gen == cfg and rc.tasks == ("mediator",) and rc.n == 3
    path.write_text("seed: 1\nbogus: 2\n")
    with pytest.raises(ConfigError, match="bogus"):
        load_config(path)
    path.write_text("seed: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="'level'"):
        run_config_from_dict({"seed": 0, "level": "L9"})


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "gen").glob("*.yaml")))
def test_shipped_configs_load(path):
    rc = load_config(path)
    assert rc.tasks and rc.n > 0 and rc.out
    assert generate(rc.tasks[0] if rc.tasks[0] != "all" else "mediator", 2, rc.gen)


def test_cli_gen(tmp_path, capsys):
    pytest.importorskip("datasets")
    from calver.cli import main

    out = tmp_path / "ds"
    rc = main(["gen", "--task", "mediator", "--task", "blocking_set", "--n", "4", "--seed", "3",
               "--encoding", "json", "dot", "--n_nodes", "5", "7", "--out", str(out)])
    assert rc == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tasks"] == {"blocking_set": 4, "mediator": 4}
    assert manifest["config"]["n_nodes"] == [5, 7] and manifest["config"]["encoding"] == ["json", "dot"]


def test_cli_config_and_overrides(tmp_path, capsys):
    from calver.cli import main

    cfg = tmp_path / "run.yaml"
    cfg.write_text("tasks: [separation_set]\nn: 3\nseed: 0\nmany_satisfier: true\n")
    assert main(["gen", "--config", str(cfg), "--dry-run"]) == 0
    assert "3 problems" in capsys.readouterr().out
    assert main(["gen", "--task", "mediator", "--n", "2", "--dry-run"]) == 2
    assert "'seed' is required" in capsys.readouterr().err
    assert main(["gen", "--task", "nope", "--n", "2", "--seed", "0", "--dry-run"]) == 2
    assert "no generator" in capsys.readouterr().err


def test_cli_level(tmp_path, capsys):
    import importlib.util

    from calver.cli import main

    rc = main(["gen", "--task", "mediator", "--n", "6", "--seed", "0", "--level", "L1", "--dry-run"])
    err = capsys.readouterr().err
    if importlib.util.find_spec("calver.data_gen.text_levels") is None:
        assert rc == 2 and "text_levels" in err
        return
    assert rc == 0 and "level L1: admitted" in err


def test_level_problems_score(capsys):
    pytest.importorskip("calver.data_gen.text_levels")
    from calver.data_gen.cli import apply_level
    from calver.data_gen.generators import canonical_trace
    from calver.verifier import grade, score

    problems = generate("backdoor_set", 8, GenConfig(seed=1)) + generate("mediator", 4, GenConfig(seed=1))
    for level in ("L1", "L2"):
        made, stats = apply_level(problems, level)
        assert stats["total"] == 12 and stats["admitted"] == len(made)
        for p in made:
            assert p.mode == "constructed" and p.meta["text_level"] == level
            sc = score(canonical_trace(p), p)
            assert sc.total == 6 and grade(p, sc.answer), sc.reasons
