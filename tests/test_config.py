"""One config system (``calver.config``): YAML then ``--field value``, unknown keys named with the
closest field, one ConfigError; and, for every stage command, a misspelled key in a YAML file and a
misspelled ``--field`` both exit 2 (CLI) / raise ConfigError (API), before any heavy import."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from testing_utils import require_trl

from calver.config import ConfigError, cfg_field, check_types, parse

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "trl", "vllm")


@dataclass
class Toy:
    name: str = cfg_field(help="required string")
    n: int = cfg_field(3, help="an int")
    rate: float | None = cfg_field(None, help="optional float")
    tags: list[str] = cfg_field(["a"], help="a list")
    on: bool = cfg_field(True, help="a bool defaulting to true")
    extra: dict = cfg_field({}, help="a mapping")

    def __post_init__(self) -> None:
        check_types(self)


def test_layers_in_order_and_flag_types(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("name: x\nn: 5\nrate: 0.5\n")
    t = parse(Toy, f, ["--n", "7", "--tags", "b", "c", "--no_on", "--extra", "{k: 1}"], overrides={"rate": None})
    assert (t.name, t.n, t.rate, t.tags, t.on, t.extra) == ("x", 7, 0.5, ["b", "c"], False, {"k": 1})
    t = parse(Toy, f, ["--rate", "null", "--on"], overrides={"n": 9})
    assert (t.n, t.rate, t.on) == (9, None, True)
    assert parse(Toy, None, ["--name", "y"], base={"n": 4}).n == 4  # base < flags < overrides
    assert Toy(name="z").tags is not Toy(name="z").tags  # mutable defaults are per instance


@pytest.mark.parametrize("args, match", [
    (["--name", "x", "--n", "three"], r"field 'n': cannot read 'three'"),
    (["--name", "x", "--on", "maybe"], r"field 'on'"),
    (["--name", "x", "--nn", "3"], r"--nn \(did you mean --n\?\)"),
    (["--name", "x", "--tgs", "a"], r"--tgs \(did you mean --tags\?\)"),
    (["--n", "3"], r"field 'name' is required"),
])
def test_flag_errors_name_the_field(args, match):
    with pytest.raises(ConfigError, match=match):
        parse(Toy, None, args)


def test_yaml_errors_name_the_field(tmp_path):
    f = tmp_path / "t.yaml"
    f.write_text("name: x\nrat: 0.5\n")
    with pytest.raises(ConfigError, match=r"'rat' \(did you mean 'rate'\?\)"):
        parse(Toy, f)
    f.write_text("name: x\nn: [1]\n")
    with pytest.raises(ConfigError, match="field 'n' must be int"):
        parse(Toy, f)
    f.write_text("- a\n")
    with pytest.raises(ConfigError, match="mapping"):
        parse(Toy, f)
    with pytest.raises(ConfigError, match="does not exist"):
        parse(Toy, tmp_path / "missing.yaml")


def test_all_config_errors_are_one_class(tmp_path):
    import calver.data_gen.gen_config as gen_config
    import calver.data_gen.generators as generators
    import calver.demo.config as demo_config
    import calver.infer.sample_config as sample_config
    import calver.train.common as train_common
    from calver.evaluation.cli import EvalConfig
    from calver.infer.cli import SelectConfig
    from calver.infer.refine.refine import load_refine_config

    assert {gen_config.ConfigError, generators.ConfigError, demo_config.ConfigError, sample_config.ConfigError,
            train_common.ConfigError} == {ConfigError}
    raised = []
    for make in (lambda: load_refine_config(None, rounds=-1),  # was a bare ValueError
                 lambda: load_refine_config(None, bogus=1),
                 lambda: gen_config.GenConfig(seed=0, density=2.0),
                 lambda: generators.generate("cycle_witness", 1, gen_config.GenConfig(seed=0, graph_class="DAG")),
                 lambda: sample_config.load_config(None, ["--problems", "a", "--out", "b", "--model", "m", "--k", "0"]),
                 lambda: demo_config.load_demo_config(None, tasks=["no_such_task"]),
                 lambda: parse(EvalConfig, None, ["--pool", "p", "--prefixes", "0"]),
                 lambda: parse(SelectConfig, None, ["--pool", "p", "--backend", "tpu"])):
        with pytest.raises(ValueError) as e:
            make()
        raised.append(type(e.value))
    assert set(raised) == {ConfigError}


def test_k_is_candidates_per_unit_and_prefixes_the_grid():
    from calver.demo.config import DemoConfig
    from calver.evaluation.cli import EvalConfig, RouteConfig
    from calver.evaluation.scaling import K_GRID
    from calver.infer.cli import SelectConfig
    from calver.infer.refine.refine import RefineConfig
    from calver.infer.sample_config import SampleConfig
    from calver.infer.selectors import NON_NEURAL

    for cls in (SampleConfig, DemoConfig, RefineConfig, RouteConfig):
        k = {f.name: f for f in fields(cls)}["k"]
        assert "candidates per unit" in k.metadata["help"], cls
    for cls in (SelectConfig, EvalConfig):
        names = {f.name for f in fields(cls)}
        assert "prefixes" in names and "k" not in names, cls
    assert parse(EvalConfig, None, ["--pool", "p"]).prefixes == list(K_GRID)
    assert DemoConfig().selectors == list(NON_NEURAL)  # derived, not a copied literal
    assert parse(SelectConfig, None, ["--pool", "p", "--selectors", "calver,first", "plurality"]).selectors == \
        ["calver", "first", "plurality"]


# ---- every stage command: a misspelled YAML key, a misspelled --field --------------------------------
def _cases(tmp_path: Path) -> dict[str, dict]:
    """command -> (valid argv without the config, YAML text with a typo, the typo, the field)."""
    return {
        "eval": {"argv": ["eval", "--pool", str(tmp_path / "pool")], "yaml": "pool: p\nprefixs: [1, 2]\n",
                 "flag": ["--prefixs", "1"], "wrong": "prefixs", "right": "prefixes"},
        "select": {"argv": ["select", "--pool", str(tmp_path / "pool")], "yaml": "pool: p\nselectrs: [calver]\n",
                   "flag": ["--selectrs", "calver"], "wrong": "selectrs", "right": "selectors"},
        "sample": {"argv": ["sample", "--problems", "a", "--out", "b", "--model", "m"],
                   "yaml": "problems: a\nout: b\nmodel: m\ntemprature: 0.7\n",
                   "flag": ["--temprature", "0.7"], "wrong": "temprature", "right": "temperature"},
        "gen": {"argv": ["gen", "--tasks", "mediator", "--n", "2", "--seed", "0", "--dry_run"],
                "yaml": "tasks: [mediator]\nn: 2\nseed: 0\ndensty: 0.2\n",
                "flag": ["--densty", "0.2"], "wrong": "densty", "right": "density"},
        "demo": {"argv": ["demo", "--out", str(tmp_path / "demo")], "yaml": "k: 4\nmax_tokns: 8\n",
                 "flag": ["--max_tokns", "8"], "wrong": "max_tokns", "right": "max_tokens"},
    }


_RUN = """
import json, sys
from calver.cli import main
try:
    rc = main(json.loads(sys.argv[1]))
except SystemExit as e:
    rc = e.code
print(json.dumps({"rc": rc, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def _cli(argv: list[str]) -> tuple[dict, str]:
    """``calver ARGV`` in a fresh interpreter (calver.cli.main is the console script), plus which heavy
    modules it had imported by the time it exited."""
    res = subprocess.run([sys.executable, "-c", _RUN, json.dumps(argv)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def _did_you_mean(err: str, wrong: str, right: str) -> bool:
    import re

    return re.search(rf"'?(--)?{wrong}'? \(did you mean '?(--)?{right}'?\?\)", err) is not None


@pytest.mark.parametrize("command", ["eval", "select", "sample", "gen", "demo"])
@pytest.mark.parametrize("where", ["yaml", "flag"])
def test_cli_misspelling_exits_2_naming_the_field(tmp_path, command, where):
    case = _cases(tmp_path)[command]
    argv = list(case["argv"])
    if where == "yaml":
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(case["yaml"])
        argv += ["--config", str(cfg)]
    else:
        argv += case["flag"]
    out, err = _cli(argv)
    assert out["rc"] == 2, err
    assert _did_you_mean(err, case["wrong"], case["right"]), err
    assert out["heavy"] == [], f"the config error came after importing {out['heavy']}"


def test_api_misspelling_raises_config_error(tmp_path):
    from calver.data_gen.gen_config import parse_run
    from calver.demo.config import load_demo_config
    from calver.evaluation.cli import EvalConfig
    from calver.infer.cli import SelectConfig
    from calver.infer.sample_config import SampleConfig

    loaders = {"eval": lambda c, a: parse(EvalConfig, c, a), "select": lambda c, a: parse(SelectConfig, c, a),
               "sample": lambda c, a: parse(SampleConfig, c, a), "gen": parse_run, "demo": load_demo_config}
    for command, case in _cases(tmp_path).items():
        cfg = tmp_path / f"{command}.yaml"
        cfg.write_text(case["yaml"])
        with pytest.raises(ConfigError) as e:
            loaders[command](cfg, [])
        assert _did_you_mean(str(e.value), case["wrong"], case["right"]), (command, str(e.value))
        good = {k: v for k, v in __import__("yaml").safe_load(case["yaml"]).items() if k != case["wrong"]}
        cfg.write_text(__import__("yaml").safe_dump(good))
        loaders[command](cfg, [])  # the same file without the typo loads
        with pytest.raises(ConfigError) as e:
            loaders[command](cfg, case["flag"])
        assert _did_you_mean(str(e.value), case["wrong"], case["right"]), (command, str(e.value))


@require_trl
def test_train_misspelling_api_and_cli(tmp_path, capsys):
    """``calver train`` keeps TrlParser, so its field list needs trl: run in-process (one trl import)."""
    from calver.cli import main
    from calver.train.common import parse_config
    from calver.train.sft_config import config_types, load_sft_config

    recipe = ROOT / "configs/sft/tiny-cpu.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(recipe.read_text() + "max_stepz: 3\n")
    for config, flags in ((bad, []), (recipe, ["--max_stepz", "3"])):
        with pytest.raises(ConfigError) as e:
            load_sft_config(config, flags)
        assert _did_you_mean(str(e.value), "max_stepz", "max_steps"), str(e.value)
        assert main(["train", "sft", "--config", str(config), *flags]) == 2
        assert _did_you_mean(capsys.readouterr().err, "max_stepz", "max_steps")
    # typed values (calver demo's path: config objects, no argv strings) sit between the YAML and the flags
    s, t, m = parse_config(config_types(), recipe, ["--lora_r", "4"], values={"max_steps": 3, "generate_n": 5})
    assert (t.max_steps, s.generate_n, m.lora_r, t.learning_rate) == (3, 5, 4, 1e-3)
    with pytest.raises(ConfigError, match=r"'max_stepz' \(did you mean 'max_steps'\?\)"):
        parse_config(config_types(), recipe, values={"max_stepz": 3})
