"""CLEAR adapter: coverage of the vendored sample (tests/data), listed answers grade valid, synthetic phrasings;
``calver data clear`` on files / folders / the bundled release, the clean core, id uniqueness, error exits."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import networkx as nx
import oracles as O
import pytest

from calver.cli import main
from calver.data_gen.clear import load_clear, load_clear_with_stats, map_question
from calver.data_gen.clear_core import (
    CORE_FAMILIES,
    PAPER_CORE_FAMILIES,
    RELEASE_FILES,
    add_clear_command,
    clean_core_rule,
    clear_input_files,
    load_clear_files,
    release_dir,
)
from calver.infer.sample import load_problem_rows
from calver.verifier import Problem, grade

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

    from calver.data_gen.clear_core import add_clear_command

    parser = argparse.ArgumentParser()
    add_clear_command(parser.add_subparsers())
    args = parser.parse_args(["clear", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o")])
    assert args.func(args) == 2
    assert "cannot read" in capsys.readouterr().err


# ---- issue 21: `calver data clear PATH... [--clean_core]`, the bundled release, the clean core ------------
RELEASE = Path(__file__).parent / "data" / "clear-release"  # 3 whole CLEAR files + LICENSE (SOURCE.md there)
RELEASE_NAMES = ("backdoor_adjustment_set.json", "cycle.json", "d-separation.json")


def _clear(tmp_path, *args, name="o"):
    out = tmp_path / name
    assert main(["data", "clear", *map(str, args), "--out", str(out)]) == 0
    cov = json.loads((out / "coverage.json").read_text())
    problems = [Problem.from_dict(r["problem"]) for r in load_problem_rows(out)]  # what `calver sample` reads
    assert cov["n_problems"] == len(problems) > 0
    assert len({p.id for p in problems}) == len(problems)
    return problems, cov


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_vendored_files_are_the_bundled_release_files():
    root = release_dir()
    assert set(RELEASE_FILES) <= {p.name for p in root.iterdir()} and (root / "LICENSE").is_file()
    assert "Apache License" in (root / "LICENSE").read_text() and "686f16d" in (root / "SOURCE.md").read_text()
    for name in RELEASE_NAMES:
        assert _sha(RELEASE / name) == _sha(root / name), name
    assert _sha(RELEASE / "LICENSE") == _sha(root / "LICENSE") == _sha(Path(__file__).parent / "data"
                                                                          / "CLEAR-LICENSE.txt")


def test_folder_input_is_its_files_sorted_and_each_file_is_read_once(tmp_path):
    by_folder, cov = _clear(tmp_path, RELEASE, name="folder")
    files = [RELEASE / n for n in RELEASE_NAMES]
    by_paths, cov2 = _clear(tmp_path, *reversed(files), name="paths")
    assert sorted(p.id for p in by_folder) == sorted(p.id for p in by_paths)
    assert list(cov["per_file"]) == [str(f) for f in files]  # sorted, recursively; LICENSE / SOURCE.md ignored
    assert list(cov2["per_file"]) == [str(f) for f in reversed(files)]  # files: the order given
    assert cov["covered"] == 72 + 36 + 60 and cov["total"] == 132 + 144 + 120
    assert {t: c["covered"] for t, c in cov["per_task_type"].items()} == {
        "backdoor_adjustment_set": 72, "cycle": 36, "d-separation": 60}
    assert cov["per_file"][str(files[1])]["skip_reasons"] == {"question not mapped": 108}
    # a file named twice, or also inside a named folder, is read once
    again, cov3 = _clear(tmp_path, files[0], RELEASE, files[0], name="again")
    assert len(again) == len(by_folder) and len(cov3["per_file"]) == 3
    nested = tmp_path / "nested" / "deeper"
    nested.mkdir(parents=True)
    (nested / "c.jsonl").write_bytes(files[1].read_bytes())
    assert [label for label, _ in clear_input_files([tmp_path / "nested"])] == [str(nested / "c.jsonl")]


def test_clean_core_on_vendored_files_counts_per_cell(tmp_path):
    problems, cov = _clear(tmp_path, RELEASE, "--clean_core")
    core = cov["clean_core"]
    assert core["n"] == len(problems) == 12 + 12 + 30 + 36 and core["of_covered"] == 168
    assert core["per_task_type"] == {"backdoor_adjustment_set": 24, "cycle": 36, "d-separation": 30}
    assert core["per_graph_type"] == {"ADMG": 12, "DAG": 42, "DG": 36}
    kept = {k for k, c in core["cells"].items() if c["in_core"]}
    assert kept == {"backdoor_adjustment_set/any/ADMG", "backdoor_adjustment_set/any/DAG", "cycle/any/DG",
                    "d-separation/any/DAG"}
    assert all(p.query["variant"] == "any" for p in problems)
    # the n_valid diagnostic: counted, never a filter (items with one valid object stay in)
    assert core["n_valid_ge2"]["n"] == sum(p.meta["n_valid"] >= 2 for p in problems) == 8 + 8 + 25 + 23
    assert any(p.meta["n_valid"] == 1 for p in problems)
    assert core["paper"]["n_here_in_paper_families"] == core["n"]  # all three files are paper tasks


def test_clean_core_on_the_bundled_release(tmp_path):
    """No PATH: the seven bundled files. 174 clean-core items; the paper's four task families give its 126."""
    problems, cov = _clear(tmp_path, "--clean_core", name="all")
    assert cov["inputs"] == [f"bundled/{n}" for n in RELEASE_FILES]
    assert (cov["total"], cov["covered"], cov["find_one_items"]["total"]) == (996, 432, 432)
    core = cov["clean_core"]
    assert core["n"] == 174 and core["per_task_type"] == {
        "backdoor_adjustment_set": 24, "blocked_path": 36, "cycle": 36, "d-separation": 30,
        "frontdoor_adjustment_set": 24, "path": 24}
    assert core["per_graph_type"] == {"ADMG": 54, "DAG": 84, "DG": 36}
    assert core["n_valid_ge2"]["n"] == 130 and core["paper"]["n_here_in_paper_families"] == 126
    assert cov["id_collisions"]["n_renamed"] == 0  # clear-{uid}-{sid} is unique across the release
    paper, cov2 = _clear(tmp_path, "--clean_core", "--core_families", *PAPER_CORE_FAMILIES, name="paper")
    assert len(paper) == cov2["clean_core"]["n"] == 126
    assert {p.id for p in paper} < {p.id for p in problems}
    plain, cov3 = _clear(tmp_path, name="plain")
    assert len(plain) == 432 and "clean_core" not in cov3


@pytest.mark.parametrize("task_type,variant,graph_type,family,ok", [
    ("backdoor_adjustment_set", "any", "DAG", "backdoor_set", True),
    ("backdoor_adjustment_set", "any", "ADMG", "backdoor_set", True),
    ("backdoor_adjustment_set", "minimal", "DAG", "backdoor_set", False),
    ("backdoor_adjustment_set", "maximal", "ADMG", "backdoor_set", False),
    ("d-separation", "any", "DAG", "separation_set", True),
    ("d-separation", "minimal", "DAG", "separation_set", False),
    ("blocked_path", "any", "ADMG", "blocking_set", True),
    ("cycle", "any", "DG", "cycle_witness", True),
    ("cycle", "any", "DAG", "cycle_witness", False),  # the cycle predicate is typed for directed graphs
    ("frontdoor_adjustment_set", "any", "DAG", "frontdoor_set", True),
    ("path", "shortest", "DAG", "path", False),
    ("backdoor_path", "longest", "ADMG", "backdoor_path", False),
    ("d-separation", "any", "DAG", "backdoor_set", False),  # the question must map to the task's family
    ("markov_blanket", "any", "DAG", "separation_set", False),
    ("d-separation", "any", "UG", "separation_set", False),
])
def test_clean_core_rule_reads_task_variant_and_graph_type_only(task_type, variant, graph_type, family, ok):
    assert clean_core_rule(task_type, variant, graph_type, family)[0] is ok
    if ok:
        assert clean_core_rule(task_type, variant, graph_type, family, PAPER_CORE_FAMILIES)[0] is (
            family in PAPER_CORE_FAMILIES)
    assert set(PAPER_CORE_FAMILIES) < set(CORE_FAMILIES)


def _oracle_graph(p):
    return O.G(p.graph.nodes, p.graph.directed, p.graph.bidirected)


def _canon_cycle(seq):
    i = seq.index(min(seq))
    return tuple(seq[i:] + seq[:i])


def test_clean_core_problems_against_independent_oracles(tmp_path):
    """Brute force (tests/oracles.py, networkx): each clean-core item's validity class is the family's,
    CLEAR's listed answers (the whole class for 'any' items) lie in it, and n_valid is its size."""
    problems, _ = _clear(tmp_path, RELEASE, "--clean_core")
    for p in problems:
        g = _oracle_graph(p)
        if p.task == "cycle_witness":
            h = nx.DiGraph(list(g.D))
            truth = {_canon_cycle(list(c)) for c in nx.simple_cycles(h)}
            assert all(O.is_cycle(g, c) for c in truth)
            assert {_canon_cycle(list(a)) for a in p.meta["listed_answers"]} <= truth, p.id
        else:
            q = p.query
            if p.task == "backdoor_set":
                x, y = q["treatment"], q["outcome"]
                ok = lambda z: O.backdoor(g, x, y, z)  # noqa: E731
                pool = set(g.nodes) - {x, y}
            else:
                xs, ys = set(q["x"]), set(q["y"])
                ok = lambda z: O.msep_nx(g, xs, ys, z) and O.msep_paths(g, xs, ys, z)  # noqa: E731
                pool = set(g.nodes) - xs - ys
            truth = {z for z in O.subsets(pool) if ok(z)}
            assert {frozenset(a) for a in p.meta["listed_answers"]} == truth, p.id
        fam = p.family
        got = {fam.canonical_answer_key(v) for v in fam.validity_class(p.graph, fam.normalize_query(p))}
        assert got == {fam.canonical_answer_key(v) for v in truth} and p.meta["n_valid"] == len(truth), p.id


def _lines(items):
    return "".join(json.dumps(x) + "\n" for x in items)


def test_colliding_ids_are_made_unique_deterministically(tmp_path):
    bd = _item(DAG, "Find one valid backdoor adjustment set for treatment X1 and outcome Y1.", "[{'Z'}]",
               "backdoor_adjustment_set", uid="7")
    sep = _item(CHAIN, "Find one valid nodeset that can d-separate node A and node C .", "[{'B'}]",
                "d-separation", uid="7")
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.json").write_text(_lines([bd]))
    (d / "b.json").write_text(_lines([sep]))
    (d / "copy-of-a.jsonl").write_text(_lines([bd]))  # the same item under another file name
    problems, cov = _clear(tmp_path, d)
    assert [p.id for p in problems] == ["clear-backdoor_adjustment_set-7-0", "clear-d-separation-7-0",
                                        "clear-backdoor_adjustment_set-7-0-2"]
    assert [p.source_id for p in problems] == ["backdoor_adjustment_set-7", "d-separation-7",
                                               "backdoor_adjustment_set-7"]
    assert cov["id_collisions"]["n_renamed"] == 4
    again, _ = load_clear_files(clear_input_files([d]))
    assert [p.id for p in again] == [p.id for p in problems]  # deterministic
    alone, _ = _clear(tmp_path, d / "b.json", name="alone")
    assert alone[0].id == "clear-7-0"  # ids that do not collide keep the published form


def _err(tmp_path, capsys, *args):
    code = main(["data", "clear", *map(str, args), "--out", str(tmp_path / "err")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0], err
    assert not (tmp_path / "err" / "problems.jsonl").exists()
    return err[0]


def test_input_errors_exit_2_with_one_line(tmp_path, capsys):
    assert "no such file or folder" in _err(tmp_path, capsys, tmp_path / "absent.jsonl")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    assert "no *.json or *.jsonl file under the folder" in _err(tmp_path, capsys, tmp_path / "empty")
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"question": "caf\xe9"}\n')
    assert "not UTF-8" in _err(tmp_path, capsys, bad)
    other = tmp_path / "other.json"
    other.write_text('{"name": "not CLEAR", "version": 1}\n[1, 2]\n')
    assert "is not CLEAR JSONL" in _err(tmp_path, capsys, other)
    assert "is not CLEAR JSONL" in _err(tmp_path, capsys, SAMPLE, other)  # any bad file stops the run
    yes_no = tmp_path / "yn.jsonl"
    yes_no.write_text(_lines([_item(CHAIN, "Is there a cycle in this graph?", "No", "cycle")]))
    assert "no CLEAR item" in _err(tmp_path, capsys, yes_no)
    minimal = tmp_path / "min.jsonl"
    minimal.write_text(_lines([_item(DAG, "Find one minimal valid backdoor adjustment set for treatment X1 and "
                                     "outcome Y1.", "{'Z'}", "backdoor_adjustment_set")]))
    assert "no clean-core item" in _err(tmp_path, capsys, minimal, "--clean_core")
    assert "not both" in _err(tmp_path, capsys, SAMPLE, "--paths", SAMPLE)
    assert "core_families" in _err(tmp_path, capsys, SAMPLE, "--core_families", "mediator")


def test_help_says_no_path_reads_the_bundled_release(capsys):
    with pytest.raises(SystemExit) as e:
        main(["data", "clear", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for needle in ("bundled", "--clean_core", "--core_families", "--paths", "PATH", "Extremal variants", "126"):
        assert needle in out, needle


def test_bench_adapter_entry_builds_the_clean_core(tmp_path):
    from calver.data_gen.benchmark_cli import ADAPTERS

    cls, build, _ = ADAPTERS["clear"]
    problems, summary = build(cls(out=str(tmp_path), clean_core=True))
    assert len(problems) == summary["clean_core"]["n"] == 174
    assert list(itertools.islice((p.meta["source"] for p in problems), 1)) == ["CLEAR"]
