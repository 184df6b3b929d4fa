"""calver.evaluation.grading: the one place labels are read, with one narrow-except ``safe_grade``."""

from __future__ import annotations

import dataclasses

import pytest
from fixtures import EXAMPLE_GRAPH, backdoor_problem, build_pool, trace_for

from calver.cli import main
from calver.evaluation.grading import accuracy, grade_rows, grading_problem, is_correct, safe_grade
from calver.infer.select import run_selection
from calver.verifier import get_family

TEXT = "P causes U. U causes X. U causes Y. X causes M. M causes Y."


def _hidden(p):
    """The constructed-mode version of ``p``: its graph is a label, not part of the problem."""
    return dataclasses.replace(p, graph=None, mode="constructed", text=TEXT)


def test_safe_grade_verdicts():
    p = backdoor_problem()
    assert safe_grade(p, "{U}").correct and safe_grade(p, {"U", "P"}).correct
    assert not safe_grade(p, "{M}") and not safe_grade(p, None) and not safe_grade(p, "{{ not a set")
    assert safe_grade(p, "{M}").reason is None  # a wrong answer is a verdict, not an error


def test_ungradeable_problem_is_wrong_with_a_reason():
    g = safe_grade(_hidden(backdoor_problem()), "{U}")
    assert not g.correct and "without the source graph" in g.reason
    # ... and the labels' source graph makes it gradeable again.
    assert safe_grade(grading_problem(_hidden(backdoor_problem()), {"source_graph": EXAMPLE_GRAPH}), "{U}").correct


@pytest.mark.parametrize("exc", [RuntimeError, KeyError, AttributeError, ZeroDivisionError])
def test_verifier_bug_raises_instead_of_grading_wrong(monkeypatch, exc):
    def broken(self, problem, obj):
        raise exc("verifier bug")

    monkeypatch.setattr(type(get_family("backdoor_set")), "grade", broken)
    with pytest.raises(exc):
        safe_grade(backdoor_problem(), "{U}")
    with pytest.raises(exc):
        is_correct(backdoor_problem(), {"U"})


def test_grade_rows_records_why_an_answer_was_not_graded(tmp_path):
    ok, hidden = backdoor_problem("ok"), _hidden(backdoor_problem("hidden"))
    text = trace_for(ok, {"U"})
    pool = build_pool(str(tmp_path / "pool"), [(ok, 0, [text]), (hidden, 0, [text])], raw_texts=True)
    rows = {r["problem_id"]: r for r in grade_rows(pool, run_selection(pool, ["first"], write=False)["first"])}
    assert rows["ok"]["correct"] and "grade_error" not in rows["ok"]
    assert not rows["hidden"]["correct"] and "source graph" in rows["hidden"]["grade_error"]


def test_eval_cli_has_the_label_reading_selection_tables(tmp_path, capsys):
    p = backdoor_problem()
    pool = build_pool(str(tmp_path / "pool"), [(p, 0, [{"M"}, {"U"}, set()]), (p, 1, [{"U"}, {"M"}, {"U"}])])
    assert main(["select", "--pool", str(pool.root), "--selectors", "calver,first", "--prefixes", "2"]) == 0
    capsys.readouterr()
    assert main(["eval", "--pool", str(pool.root)]) == 2  # neither a report directory nor a table asked for
    capsys.readouterr()
    assert main(["eval", "--pool", str(pool.root), "--tie-audit", "--selection-accuracy"]) == 0
    table = dict(line.split("\t") for line in capsys.readouterr().out.strip().splitlines())
    assert set(table) == {"calver@2", "first@2", "calver_best", "calver_worst", "calver_best@2", "calver_worst@2"}
    assert float(table["first@2"]) == accuracy(pool, "first@2", 2) == 0.5
    assert float(table["calver_best@2"]) == 1.0
