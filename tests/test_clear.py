"""CLEAR adapter: coverage of the vendored sample (tests/data), listed answers grade valid, synthetic phrasings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calver.data_gen.clear import add_clear_command, load_clear, load_clear_with_stats, map_question
from calver.verifier import grade

SAMPLE = Path(__file__).parent / "data" / "clear-sample.jsonl"  # vendored with its license (tests/data/README.md)


def _obj(p, a):
    if p.task in ("path", "backdoor_path"):
        return (tuple(a[0]), tuple(a[1]) if a[1] else None)
    return tuple(a) if p.task == "cycle_witness" else frozenset(a)


def test_sample_coverage_per_task_type():
    problems, stats = load_clear_with_stats(SAMPLE)
    report = stats.to_dict()
    per = report["per_task_type"]
    assert report["total"] == 24
    for ttype in ("backdoor_adjustment_set", "frontdoor_adjustment_set", "d-separation", "blocked_path", "cycle",
                  "backdoor_path", "path"):
        assert per[ttype]["skipped"] == 0 and per[ttype]["covered"] > 0, ttype
    assert len(problems) == report["covered"] == 24
    assert {p.task for p in problems} == {"backdoor_set", "frontdoor_set", "separation_set", "blocking_set",
                                          "cycle_witness", "path", "backdoor_path"}


def test_every_listed_answer_grades_valid():
    problems = load_clear(SAMPLE)
    n = 0
    for p in problems:
        listed = p.meta["listed_answers"]
        assert listed, p.id
        for a in listed:
            assert grade(p, _obj(p, a)), (p.id, a)
            n += 1
    assert n > 150


def test_find_one_lists_are_the_validity_class():
    """For plain "Find one valid ..." items CLEAR lists every valid set: compare with the family."""
    for p in load_clear(SAMPLE):
        if p.task == "cycle_witness" or p.query.get("variant") != "any":
            continue
        fam = p.family
        valid = set(fam.validity_class(p.graph, fam.normalize_query(p)))
        assert {p.family.canonical_answer_key(_obj(p, a)) for a in p.meta["listed_answers"]} == {
            p.family.canonical_answer_key(v) for v in valid}, p.id


def test_problem_fields_keep_the_item():
    p = load_clear(SAMPLE)[0]
    item = json.loads(SAMPLE.read_text().splitlines()[0])
    assert p.id == f"clear-{item['uid']}-{item['sid']}" and p.source_id == item["uid"]
    for k, v in item.items():
        assert p.meta[k] == v
    assert p.mode == "supplied" and p.graph.kind.value == "ADMG"
    json.dumps(p.to_dict())  # JSON-serializable


def _item(desc, question, answer, ttype="x", gtype="DAG", uid="1"):
    return {"description": desc, "graph_type": gtype, "uid": uid, "sid": 0, "question": question,
            "answer": answer, "question_type": "FO", "task_type": ttype}


DAG = "Given a DAG (directed acyclic graph) with nodes X1, Z, M, Y1 and directed edges Z->X1, Z->Y1, X1->M, M->Y1."
CHAIN = "Given a DAG (directed acyclic graph) with nodes A, B, C and directed edges A->B, B->C."
CYC = "Given a directed graph with nodes A, B, C and directed edges A->B, B->C, C->A."


@pytest.mark.parametrize("question,answer,task", [
    ("Find one valid backdoor adjustment set for the effect of treatment X1 on outcome Y1.", "[{'Z'}]", "backdoor_set"),
    ("Find one minimal valid back-door adjustment set for treatment X1 and outcome Y1", "{'Z'}", "backdoor_set"),
    ("Find one maximal valid backdoor adjustment set from X1 to Y1.", "{'Z'}", "backdoor_set"),
    ("Find one valid front-door adjustment set for treatment X1 and outcome Y1.", "[{'M'}]", "frontdoor_set"),
    ("Find one minimal valid nodeset that can d-separate node X1 and node Y1 .", "{'M', 'Z'}", "separation_set"),
    ("Find one valid node set that separates nodes X1 from node Y1.", "[{'Z', 'M'}]", "separation_set"),
    ("Find one valid nodeset that can block the path X1<-Z->Y1.", "[{'Z'}, {'Z', 'M'}]", "blocking_set"),
    ("Find the minimal nodeset that can block path X1->M->Y1.", "{'M'}", "blocking_set"),
])
def test_synthetic_phrasings(tmp_path, question, answer, task):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps(_item(DAG, question, answer)) + "\n")
    (p,) = load_clear(f)
    assert p.task == task
    for a in p.meta["listed_answers"]:
        assert grade(p, frozenset(a))


def test_skips_and_odd_items(tmp_path):
    lines = [
        _item(CYC, "Find one cycle in the given graph.", "B->C->A->B", "cycle", "DG"),
        _item(CHAIN, "Find the maximal nodeset that can block path A->B->C.", "{'B'}", "blocked_path"),
        _item(CHAIN, "Is there a cycle in this graph?", "No", "cycle", "DAG"),
        _item(CHAIN, "Find all valid backdoor adjustment sets for treatment A and outcome C.", "[set()]"),
        _item(CHAIN, "Find one valid backdoor adjustment set for treatment A and outcome Q.", "[set()]"),
        _item("Given a thing.", "Find one cycle in this graph.", "A->B->A", "cycle"),
        _item(CHAIN, "Find one valid nodeset that can d-separate node A and node C .", "[set(), {'B'}]"),
    ]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n\n")
    problems, stats = load_clear_with_stats(f)
    assert [p.task for p in problems] == ["cycle_witness", "separation_set"]
    assert grade(problems[0], ("B", "C", "A")) and not grade(problems[0], ("A", "C", "B"))
    # set() parsed; set() is not a separator of a chain, {B} is
    assert problems[1].meta["listed_answers"] == [[], ["B"]]
    assert not grade(problems[1], frozenset()) and grade(problems[1], frozenset({"B"}))
    assert stats.to_dict()["total"] == 8 and stats.to_dict()["covered"] == 2


def test_map_question_reads_groups():
    assert map_question("Find one valid nodeset that can d-separate node C and node N .") == (
        "separation_set", {"x": ["C"], "y": ["N"], "variant": "any"})
    assert map_question("Find one cycle in this graph.") == ("cycle_witness", {"variant": "any"})
    assert map_question("What is the capital of France?") is None


def test_cli(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_clear_command(sub)
    args = parser.parse_args(["clear", str(SAMPLE), "--out", str(tmp_path / "o")])
    assert args.func(args) == 0
    rows = (tmp_path / "o" / "problems.jsonl").read_text().splitlines()
    assert len(rows) == 24
    from calver.verifier import Problem

    p = Problem.from_dict(json.loads(rows[0]))
    assert p.task == "backdoor_set" and p.graph is not None
    cov = json.loads((tmp_path / "o" / "coverage.json").read_text())
    assert cov["covered"] == 24


def test_cli_reports_a_missing_file(tmp_path, capsys):
    import argparse

    from calver.data_gen.clear import add_clear_command

    parser = argparse.ArgumentParser()
    add_clear_command(parser.add_subparsers())
    args = parser.parse_args(["clear", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o")])
    assert args.func(args) == 2
    assert "cannot read" in capsys.readouterr().err
