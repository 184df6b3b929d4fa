"""calver fit-report (calver.evaluation.trace_fit): each trace line's tokens are found, and each line's
teacher-forced loss equals the loss transformers computes over the same tokens."""

from __future__ import annotations

import json

import pytest
from testing_utils import require_modules

from calver.data_gen.export import to_sft_rows
from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import generate
from calver.data_gen.trace_style import TraceStyle
from calver.evaluation.trace_fit import compare_fits, fit_rows, fit_set, line_tokens, load_rows, trace_lines

REASONED = TraceStyle("rule", 0, "rule", system="compact")


def _rows(n=2):
    problems = []
    for task in ("backdoor_set", "blocking_set", "cycle_witness", "separation_set"):
        problems += generate(task, n, GenConfig(seed=7, n_nodes=(4, 6), naming=("phrases",)))
    return to_sft_rows(problems, style=REASONED)


def test_trace_lines_split_a_rule_at_its_lookup():
    text = ("GRAPH: a b -> c\nQUERY: task=backdoor_set; treatment=c\n\nRule: adjust for the parents of c. "
            "Edges into c: a b -> c.\n\nSTRATEGY: {a b}\nANSWER: {a b}")
    got = {name: text[a:b] for name, a, b in trace_lines(text)}
    assert got == {"GRAPH": "GRAPH: a b -> c", "QUERY": "QUERY: task=backdoor_set; treatment=c",
                   "Rationale": "Rule: adjust for the parents of c. Edges into c:", "Lookup": " a b -> c.",
                   "STRATEGY": "STRATEGY: {a b}", "ANSWER": "ANSWER: {a b}"}
    # two lookups: each header is the rule's words, each list a lookup
    two = "Rule: block every path. Edges into a: none. Edges into b c: x -> b c, a -> b c.\nANSWER: {x}"
    assert [(name, two[a:b]) for name, a, b in trace_lines(two)] == [
        ("Rationale", "Rule: block every path. Edges into a:"), ("Lookup", " none."),
        ("Rationale", " Edges into b c:"), ("Lookup", " x -> b c, a -> b c."), ("ANSWER", "ANSWER: {x}")]
    # a rule that reads nothing off the graph is all rationale
    assert [n for n, _, _ in trace_lines("Rule: the path has a collider at {F}, so the empty set blocks it.")] == [
        "Rationale"]


@require_modules("transformers", "torch")
def test_each_line_s_tokens_spell_that_line(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for row in _rows():
        ids, lines = line_tokens(tok, row["messages"])
        content = row["messages"][-1]["content"]
        want: dict[str, str] = {}
        for name, a, b in trace_lines(content):
            want[name] = want.get(name, "") + content[a:b]
        assert set(lines) == set(want)
        for name, at in lines.items():
            assert at == sorted(set(at))
            assert "".join(tok.decode([ids[i] for i in at]).split()) == "".join(want[name].split())


@require_modules("transformers", "torch")
def test_a_line_s_loss_is_transformers_loss_over_its_tokens(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    row = [r for r in _rows(1) if r["task"] == "backdoor_set"][0]
    fits = fit_rows(model, tok, [row])
    ids, lines = line_tokens(tok, row["messages"])
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(x).logits[0]
    for name, at in lines.items():
        labels = torch.full_like(x, -100)
        labels[0, at] = x[0, at]
        with torch.no_grad():
            oracle = model(x, labels=labels).loss.item()  # transformers shifts the labels itself
        assert fits[name].loss == pytest.approx(oracle, rel=1e-4)
        greedy = [int(logits[i - 1].argmax()) == ids[i] for i in at]
        assert fits[name].token_accuracy == pytest.approx(sum(greedy) / len(greedy))
        assert fits[name].exact == float(all(greedy))
        assert fits[f"backdoor_set/{name}"] == fits[name]
    assert {"Rationale", "Lookup"} <= set(fits)


def test_load_rows_skips_drills_spreads_the_sample_and_names_a_bad_line(tmp_path):
    rows = [{"messages": [], "task": t} for t in ["a"] * 6 + ["b"] * 6 + ["lookup_drill"] * 3]
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [r["task"] for r in load_rows(path, 4)] == ["a", "a", "b", "b"]
    assert len(load_rows(path, None)) == 12
    path.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"sft.jsonl:2"):
        load_rows(path, None)


def test_the_command_exits_2_on_a_missing_file_or_a_malformed_set(tmp_path, capsys):
    from calver.cli import main

    assert main(["fit-report", "--model", str(tmp_path), "--rows", f"h={tmp_path / 'none.jsonl'}"]) == 2
    assert "none.jsonl" in capsys.readouterr().err
    assert main(["fit-report", "--model", str(tmp_path), "--rows", "no-equals-sign"]) == 2
    assert "NAME=FILE" in capsys.readouterr().err


@require_modules("torch")
def test_a_row_without_a_trace_is_named():
    with pytest.raises(ValueError, match=r"row 'r1'.*assistant"):
        fit_rows(None, None, [{"id": "r1", "task": "t", "messages": [{"role": "user", "content": "x"}]}])


@require_modules("transformers", "torch")
def test_an_out_folder_that_cannot_be_written_exits_2_after_the_table(tiny_model_dir, tmp_path, capsys):
    from calver.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows(1)))
    (tmp_path / "file").write_text("")
    assert main(["fit-report", "--model", str(tiny_model_dir), "--rows", f"t={rows}",
                 "--out", str(tmp_path / "file" / "fit")]) == 2
    got = capsys.readouterr()
    assert "| GRAPH |" in got.out and "cannot write" in got.err


@require_modules("transformers", "torch")
def test_each_row_s_exact_lines_add_up_to_the_set_s(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    rows = _rows(2)
    got = fit_set(model, tok, rows)
    assert set(got.rows) == {r["id"] for r in rows} and got.tasks == {r["id"]: r["task"] for r in rows}
    for key, fit in got.lines.items():
        task, _, line = key.rpartition("/")
        outcomes = [ex[line] for i, ex in got.rows.items() if line in ex and (not task or got.tasks[i] == task)]
        assert len(outcomes) == fit.lines and sum(outcomes) / len(outcomes) == pytest.approx(fit.exact)
    assert got.lines == fit_rows(model, tok, rows)


@require_modules("transformers", "torch")
def test_fit_report_writes_per_row_outcomes_that_fit_compare_pairs(tiny_model_dir, tmp_path, capsys):
    from calver.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows(1)))
    out = str(tmp_path / "f")
    assert main(["fit-report", "--model", str(tiny_model_dir), "--rows", f"t={rows}", "--out", out]) == 0
    report = json.loads((tmp_path / "f" / "fit.json").read_text())
    assert set(report["per_row"]["t"]["exact"]) == {r["id"] for r in _rows(1)}
    assert main(["fit-compare", "--a", str(tmp_path / "f"), "--b", str(tmp_path / "f")]) == 0
    same = compare_fits(report, report)["sets"]["t"]
    assert same["paired_rows"] == 4 and all(r["b_minus_a"] == 0 for r in same["lines"].values())


def _report(model, exact, tasks):
    return {"model": model, "per_row": {"train": {"tasks": tasks, "exact": exact}}}


def test_compare_fits_pairs_rows_by_id_and_task():
    tasks = {"r1": "backdoor_set", "r2": "backdoor_set", "r3": "separation_set", "r4": "separation_set"}
    a = _report("A", {"r1": {"Lookup": 0, "GRAPH": 1}, "r2": {"Lookup": 0, "GRAPH": 1},
                      "r3": {"Lookup": 1, "GRAPH": 1}, "r4": {"Lookup": 0}}, tasks)
    b = _report("B", {"r1": {"Lookup": 1, "GRAPH": 1}, "r2": {"Lookup": 1, "GRAPH": 0},
                      "r3": {"Lookup": 0, "GRAPH": 1}, "r5": {"Lookup": 1}},
                {**tasks, "r5": "separation_set"})
    b["per_row"]["held_out"] = {"tasks": {}, "exact": {}}  # a set only one report has is not compared
    got = compare_fits(a, b)
    assert set(got["sets"]) == {"train"} and got["sets"]["train"]["paired_rows"] == 3  # r4, r5: one side only
    lines = got["sets"]["train"]["lines"]
    assert lines["Lookup"]["rows"] == 3 and lines["Lookup"]["a"] == pytest.approx(1 / 3)
    assert lines["Lookup"]["b"] == pytest.approx(2 / 3) and lines["Lookup"]["b_minus_a"] == pytest.approx(1 / 3)
    assert lines["backdoor_set/Lookup"]["b_minus_a"] == pytest.approx(1.0)
    assert lines["backdoor_set/Lookup"]["ci"] == [pytest.approx(1.0), pytest.approx(1.0)]  # every row moved
    assert lines["separation_set/Lookup"]["b_minus_a"] == pytest.approx(-1.0)
    assert lines["GRAPH"]["b_minus_a"] == pytest.approx(-1 / 3)
    lo, hi = lines["Lookup"]["ci"]
    assert lo <= 1 / 3 <= hi
    # a row whose task differs between the two is not a pair
    b["per_row"]["train"]["tasks"]["r1"] = "frontdoor_set"
    assert compare_fits(a, b)["sets"]["train"]["paired_rows"] == 2


def test_fit_compare_command_reads_two_reports_and_refuses_one_without_rows(tmp_path, capsys):
    from calver.cli import main

    tasks = {"r1": "backdoor_set", "r2": "backdoor_set"}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "fit.json").write_text(json.dumps(_report("A", {"r1": {"Lookup": 0}, "r2": {"Lookup": 0}},
                                                                tasks)))
    (tmp_path / "b.json").write_text(json.dumps(_report("B", {"r1": {"Lookup": 1}, "r2": {"Lookup": 0}}, tasks)))
    out = tmp_path / "cmp.json"
    assert main(["fit-compare", "--a", str(tmp_path / "a"), "--b", str(tmp_path / "b.json"), "--out", str(out)]) == 0
    assert "| Lookup | 2 | 0.0% | 50.0% | +50.0" in capsys.readouterr().out
    assert json.loads(out.read_text())["sets"]["train"]["lines"]["Lookup"]["b_minus_a"] == pytest.approx(0.5)
    (tmp_path / "old.json").write_text(json.dumps({"model": "A", "fits": {}}))
    assert main(["fit-compare", "--a", str(tmp_path / "old.json"), "--b", str(tmp_path / "b.json")]) == 2
    assert "per-row" in capsys.readouterr().err
    assert main(["fit-compare", "--a", str(tmp_path / "missing"), "--b", str(tmp_path / "b.json")]) == 2
    for bad in ({"t": {"exact": {"r1": {"Lookup": 0}}}}, {"t": {"tasks": {}, "exact": {"r1": {"Lookup": "yes"}}}},
                {"t": []}):
        (tmp_path / "bad.json").write_text(json.dumps({"model": "A", "per_row": bad}))
        capsys.readouterr()
        assert main(["fit-compare", "--a", str(tmp_path / "bad.json"), "--b", str(tmp_path / "b.json")]) == 2
        assert "per_row['t']" in capsys.readouterr().err
