"""``calver data bnlearn | cg2llm | kk``: the benchmark adapters as commands (issue 21, item 1).

Each command's problems are what ``calver sample --problems`` reads, carry one cluster id per question
and the breakdown fields, and are gradeable: each family's canonical trace of a problem scores 6/6 and
its answer grades correct.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from calver.cli import main
from calver.infer.sample import load_problem_rows
from calver.verifier import Problem, get_family, grade, score


def _run(tmp_path, *args) -> list[Problem]:
    out = tmp_path / args[0]
    assert main(["data", *args, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = load_problem_rows(out)  # what `calver sample --problems OUT` reads
    problems = [Problem.from_dict(r["problem"]) for r in rows]
    assert summary["n_problems"] == len(problems) > 0
    assert len({p.id for p in problems}) == len(problems)
    return problems


def _gradeable(problems: list[Problem]) -> None:
    for p in problems:
        ts = score(get_family(p.task).canonical_trace(p), p)
        assert ts.total == 6 and grade(p, ts.answer), (p.id, ts.reasons)


def test_bnlearn_supplied_and_ate(tmp_path):
    problems = _run(tmp_path, "bnlearn", "--nets", "asia", "sachs", "--tasks", "backdoor_set", "ate", "--n", "3")
    per = Counter((p.meta["network"], p.task) for p in problems)
    assert set(per) == {(n, t) for n in ("asia", "sachs") for t in ("backdoor_set", "ate_threshold")}
    assert max(per.values()) <= 3
    assert all(p.mode == "supplied" and p.meta["source"] == "bnlearn" for p in problems)
    assert len({p.source_id for p in problems}) == len(problems)  # one cluster per question, not per network
    assert all(isinstance(p.meta["ate"], float) for p in problems if p.task == "ate_threshold")
    _gradeable(problems)


def test_bnlearn_text_levels_are_constructed(tmp_path):
    problems = _run(tmp_path, "bnlearn", "--nets", "asia", "--tasks", "backdoor_set", "--n", "3", "--level", "L1")
    assert all(p.mode == "constructed" and p.meta["text_level"] == "L1" and p.text for p in problems)


def test_cg2llm_one_cluster_per_question_across_encodings(tmp_path):
    problems = _run(tmp_path, "cg2llm", "--nets", "asia", "--n", "2", "--encodings", "prose", "dot")
    by_source = Counter(p.source_id for p in problems)
    assert set(by_source.values()) == {2}  # each question in both encodings, one cluster
    assert {p.meta["encoding"] for p in problems} == {"prose", "dot"}
    _gradeable(problems)


def test_kk_sizes(tmp_path):
    problems = _run(tmp_path, "kk", "--people", "3", "5", "--n", "4")
    assert Counter(p.meta["people"] for p in problems) == {3: 4, 5: 4}
    assert all(p.task == "knights_knaves" for p in problems)
    _gradeable(problems)


@pytest.mark.parametrize("args, needle", [
    (["bnlearn", "--nets", "nope"], "nets"), (["bnlearn", "--level", "L4"], "level"),
    (["cg2llm", "--encodings", "svg"], "encodings"), (["kk", "--people", "1"], "people"), (["kk", "--n", "0"], "'n'"),
])
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, args, needle):
    assert main(["data", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize("name", ["clear", "bnlearn", "cg2llm", "kk"])
def test_help_documents_each_adapter(capsys, name):
    with pytest.raises(SystemExit) as e:
        main(["data", name, "--help"])
    assert e.value.code == 0
    assert "--out" in capsys.readouterr().out
