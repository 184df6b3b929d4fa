"""``calver gen --drills N`` and ``calver contamination`` over drill rows: the drills are appended beside the
run's traces byte for byte, drawn in the run's encodings and lookup style, and a drill whose graph repeats a
benchmark graph is found and dropped."""

from __future__ import annotations

import json

import pytest
from fixtures import iso_brute_force
from testing_utils import require_modules

from calver.bench.contamination import check, write_clean
from calver.cli import main as cli_main
from calver.data_gen.drills import (
    DrillConfig,
    drills,
    load_drill_graphs,
)
from calver.data_gen.gen_config import ConfigError, parse_run
from calver.evaluation.drill_report import (
    DrillReportConfig,
    asked_drills,
)
from calver.infer.sample import load_problems


# ---- `calver gen --drills N` and `calver contamination` over the drills --------------------------------------
def _gen(tmp_path, name, *extra):
    out = tmp_path / name
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "6", "--seed", "5", "--n_nodes", "5", "7",
                     "--naming", "identifiers", "phrases", "--system", "compact", "--answers", "rule",
                     "--rationale", "scan", "--out", str(out), *extra]) == 0
    return out


def _lines(path):
    return path.read_text().splitlines()


@require_modules("datasets")
def test_gen_appends_drills_and_keeps_the_trace_rows(tmp_path):
    plain, drilled = _gen(tmp_path, "plain"), _gen(tmp_path, "drilled", "--drills", "7")
    rows = _lines(drilled / "sft.jsonl")
    assert rows[:6] == _lines(plain / "sft.jsonl")  # the traces are the run's, byte for byte
    assert not (plain / "drills.jsonl").exists()
    want = drills(DrillConfig(n=7, seed=5, min_nodes=5, max_nodes=7, namings=("identifiers", "phrases")))
    assert [json.loads(r)["messages"] for r in rows[6:]] == [d.row()["messages"] for d in want]
    manifest = json.loads((drilled / "manifest.json").read_text())
    assert manifest["n_drills"] == 7 and manifest["drill_config"]["namings"] == ["identifiers", "phrases"]
    for d, (drill_id, g) in zip(want, load_drill_graphs(drilled)):
        assert drill_id == d.id and g.directed == d.graph.directed and g.bidirected == d.graph.bidirected
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "2", "--seed", "5", "--drills", "-1",
                     "--out", str(tmp_path / "bad")]) == 2


@require_modules("datasets")
def test_gen_draws_transcription_drills_in_the_runs_encodings(tmp_path):
    out = _gen(tmp_path, "tr", "--drills", "9", "--drill_kinds", "transcribe", "into", "--encoding", "matrix",
               "json_parents")
    want = drills(DrillConfig(n=9, seed=5, min_nodes=5, max_nodes=7, namings=("identifiers", "phrases"),
                              kinds=("transcribe", "into"), encodings=("matrix", "json_parents")))
    rows = [json.loads(r) for r in _lines(out / "sft.jsonl")][-9:]
    assert [r["messages"] for r in rows] == [d.row()["messages"] for d in want]
    assert {d.kind for d in want} == {"transcribe", "into"}
    records = [json.loads(r) for r in _lines(out / "drills.jsonl")]
    assert all(r["encoding"] in ("matrix", "json_parents") for r in records if r["kind"] == "transcribe")
    assert "ends with 9 drills" in (out / "README.md").read_text()  # the dataset card says so
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "2", "--drills", "2", "--drill_kinds", "sideways",
                     "--out", str(tmp_path / "bad")]) == 2


@require_modules("datasets")
def test_gen_writes_rule_style_drills_alone_with_n_0(tmp_path, capsys):
    out = tmp_path / "alone"
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "0", "--seed", "5", "--n_nodes", "4", "6",
                     "--naming", "phrases", "--drills", "8", "--drill_lookup", "rule", "--out", str(out)]) == 0
    want = drills(DrillConfig(n=8, seed=5, min_nodes=4, max_nodes=6, namings=("phrases",), lookup="rule"))
    rows = [json.loads(r) for r in _lines(out / "sft.jsonl")]
    assert [r["messages"] for r in rows] == [d.row()["messages"] for d in want]
    assert all(not r["messages"][2]["content"].startswith("Scan") for r in rows)
    assert _lines(out / "problems.jsonl") == [] and _lines(out / "grpo.jsonl") == []
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["n_rows"], manifest["n_drills"], manifest["drill_config"]["lookup"]) == (0, 8, "rule")
    for bad in (["--drills", "0"], ["--drills", "3", "--drill_lookup", "guess"]):
        assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "0", "--seed", "1", *bad,
                         "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "field 'n' must be a positive integer (or 0 beside --drills N)" in err and "lookup must be one of" in err
    assert not (tmp_path / "bad").exists()


@require_modules("datasets")
def test_gen_drills_alone_need_no_task(tmp_path, capsys):
    args = ["gen", "--n", "0", "--seed", "5", "--n_nodes", "4", "6", "--drills", "6", "--drill_lookup", "rule"]
    assert cli_main([*args, "--out", str(tmp_path / "bare")]) == 0
    assert cli_main([*args, "--tasks", "backdoor_set", "--out", str(tmp_path / "named")]) == 0
    assert _lines(tmp_path / "bare" / "sft.jsonl") == _lines(tmp_path / "named" / "sft.jsonl")  # the task adds nothing
    assert len(_lines(tmp_path / "bare" / "sft.jsonl")) == 6
    # problems still need a task: n > 0 without one is refused before anything is written
    assert cli_main(["gen", "--n", "2", "--seed", "5", "--drills", "6", "--out", str(tmp_path / "bad")]) == 2
    assert "field 'tasks' is required" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_drill_report_asks_the_lookup_style_it_is_given():
    cfg = DrillReportConfig(model="m", n=5, seed=3, lookup="rule")
    asked = asked_drills(cfg).items
    assert [d.row()["messages"] for d in asked] == [d.row()["messages"] for d in drills(
        DrillConfig(n=5, seed=3, namings=tuple(cfg.naming), lookup="rule"))]
    assert {d.system for d in asked} == {"Task: lookup. List the edges asked for."}
    with pytest.raises(ValueError, match="lookup"):
        asked_drills(DrillReportConfig(model="m", lookup="guess"))


def _drill_encodings(*flags):
    run = parse_run(args=["--seed", "1", "--drills", "40", "--drill_kinds", "transcribe", *flags])
    return run.drill_config().encodings


def test_a_verbatim_graph_slot_draws_no_transcription_from_what_it_copies():
    every = ("arrows", "clear", "json_parents", "prose", "matrix")
    assert _drill_encodings("--encoding", *every) == every
    assert _drill_encodings("--encoding", *every, "--graph_slot", "verbatim") == ("arrows", "clear", "prose")
    assert _drill_encodings("--encoding", "matrix", "json_parents", "--graph_slot", "verbatim") == ("arrows",)
    assert _drill_encodings("--encoding", *every, "--graph_slot", "verbatim", "--drill_encodings", "matrix") == (
        "matrix",)  # asked for by name
    cfg = parse_run(args=["--seed", "1", "--drills", "40", "--drill_kinds", "transcribe", "--encoding", *every,
                          "--graph_slot", "verbatim"]).drill_config()
    assert {d.encoding for d in drills(cfg)} == {"arrows", "clear", "prose"}
    for bad in (["sideways"], []):
        with pytest.raises(ConfigError, match="drill_encodings"):
            parse_run(args=["--seed", "1"], overrides={"drill_encodings": bad})


@require_modules("datasets")
def test_contamination_finds_and_drops_a_drill_graph(tmp_path):
    src = _gen(tmp_path, "src", "--drills", "5")
    train = load_problems(src)
    graphs = load_drill_graphs(src)
    target_id, target = graphs[3]
    names = {n: f"q{i}" for i, n in enumerate(reversed(target.nodes))}
    renamed = target.relabel(names)
    rep = check(train, [("held-out", renamed)], graphs)
    assert target_id in {m.train_id for m in rep.matches}
    assert rep.n_train_graphs == len(train) + len(graphs)
    clean = tmp_path / "clean"
    write_clean(train, rep, src, clean)
    dropped = {m.train_id for m in rep.matches}
    kept_rows = [json.loads(r) for r in _lines(clean / "sft.jsonl")]
    src_rows = [json.loads(r) for r in _lines(src / "sft.jsonl")]
    assert kept_rows == [r for r in src_rows if r["id"] not in dropped]
    assert target_id not in {i for i, _ in load_drill_graphs(clean)}
    assert check(load_problems(clean), [("held-out", renamed)], load_drill_graphs(clean)).clean


@require_modules("datasets")
def test_contamination_cleans_a_set_of_rule_style_drills_alone(tmp_path):
    src = tmp_path / "alone"
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "0", "--seed", "4", "--n_nodes", "4", "6",
                     "--drills", "6", "--drill_lookup", "rule", "--out", str(src)]) == 0
    graphs = load_drill_graphs(src)
    target_id, target = graphs[2]
    rep = check([], [("held-out", target.relabel({n: f"z{i}" for i, n in enumerate(target.nodes)}))], graphs)
    assert target_id in {m.train_id for m in rep.matches}
    write_clean([], rep, src, tmp_path / "clean")
    dropped = {m.train_id for m in rep.matches}
    src_rows = [json.loads(r) for r in _lines(src / "sft.jsonl")]
    assert [json.loads(r) for r in _lines(tmp_path / "clean" / "sft.jsonl")] == [
        r for r in src_rows if r["id"] not in dropped]  # the rule-style rows, as written, less the repeat


@require_modules("datasets")  # calver gen writes the training folders
def test_drills_that_repeat_a_training_graph_are_left_out(tmp_path, capsys):
    train = _gen(tmp_path, "train", "--drills", "12", "--drill_kinds", "transcribe", "into", "--encoding", "matrix")
    same = dict(model="m", seed=5, n=12, min_nodes=5, max_nodes=7, naming=["identifiers", "phrases"],
                kinds=["transcribe", "into"], encodings=["matrix"])
    # the training run's own drills: every one repeats a training graph
    assert asked_drills(DrillReportConfig(**same, exclude=[str(train)])).items == []
    small_train = tmp_path / "small"
    assert cli_main(["gen", "--tasks", "backdoor_set", "--n", "6", "--seed", "3", "--n_nodes", "4", "--drills", "40",
                     "--out", str(small_train)]) == 0
    seen = [g for path in (train, small_train) for g in [*(g for _, g in load_drill_graphs(path)),
                                                          *(p.graph for p in load_problems(path))]]
    small = DrillReportConfig(**{**same, "seed": 77, "n": 60, "min_nodes": 3, "max_nodes": 5,
                                 "exclude": [str(train), str(small_train)]})
    asked = asked_drills(small)
    every = drills(small.drill_config())
    want = [d.id for d in every if not any(iso_brute_force(d.graph, g) for g in seen)]
    assert [d.id for d in asked.items] == want and asked.left_out == len(every) - len(want) > 0
    (small_train / "drills.jsonl").write_text('{"id": "x"}\n')
    assert cli_main(["drill-report", "--model", "m", "--exclude", str(small_train)]) == 2
    assert "drills.jsonl:1: not a drill record" in capsys.readouterr().err
