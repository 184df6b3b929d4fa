"""The 2026-12-01 audit's attack battery, small, in CI (``tests/attack_battery.py``; at scale:
``python benchmarks/attack_bench.py --seeds 0 1 2 --n 5``).

One run (seed 0, ``N_PER_TASK`` generated problems per family plus their L1-L3 constructed versions,
the audit's 34 templates over wrong objects and, as a control, the right one) must give no wrong
answer at 6/6 by the independent oracles (``tests/oracles.py``), no crash (an exception escaping
``score``, ``ProblemError`` included) and no hang. The control pass must score 6 on the contract's
well-formed templates (``plain`` on every problem). The last tests check that the oracle itself
rejects known-wrong answers, so a silent oracle cannot make the battery pass vacuously.
"""

from __future__ import annotations

import dataclasses
import random
import time

import attack_battery as ab
import pytest

from calver.verifier import Problem, ProblemError

N_PER_TASK = 5
ROWS = set(ab.TASKS) | {f"{t}/constructed" for t in ab.CONSTRUCTED_TASKS}


@pytest.fixture(scope="module")
def report() -> ab.Report:
    return ab.run(seed=0, n_per_task=N_PER_TASK)


def _shown(report: ab.Report, *kinds: str) -> str:
    return "\n".join(repr(f) for f in report.findings if f.kind in kinds)


def test_every_family_and_constructed_row_is_attacked(report):
    assert set(report.rows) == ROWS
    for key, row in report.rows.items():
        assert row.problems > 0 and row.traces > 0, key
    assert report.total.canonical_bad == 0, _shown(report, "canonical")


def test_no_wrong_answer_at_six(report):
    assert report.total.wrong_6 == 0, _shown(report, "wrong 6/6")


def test_no_crash_or_hang(report):
    total = report.total
    assert (total.crashes, total.hangs) == (0, 0), _shown(report, "crash", "hang")


def test_control_plain_scores_six_everywhere(report):
    plain = report.control["plain-wrong"]
    assert plain.traces == sum(r.problems for r in report.rows.values())
    assert plain.scored_6 == plain.traces


@pytest.mark.parametrize("template", ab.KEEPS_RIGHT)
def test_control_keeps_a_right_answer_right(report, template):
    c = report.control[template]
    assert c.traces > 0
    assert c.rate >= 0.9, f"{template}: {c.scored_6}/{c.traces} right-object traces score 6"


# ---- the oracle can say "wrong" ------------------------------------------------------------------
BACKDOOR = {"task": "backdoor_set", "graph": "W -> Z, Z -> X, Z -> Y, X -> M, M -> Y, X -> Y", "graph_class": "DAG",
            "query": {"treatment": "X", "outcome": "Y", "variant": "any"}}
# A: "B is a knave"; B: "A and I are knaves". B cannot be a knight, so B lies and A is a knight.
KK = {"task": "knights_knaves", "mode": "constructed", "query": {"people": ["A", "B"], "question": "roles"},
      "variables": ["A", "B"],
      "data": {"people": ["A", "B"], "statements": {"A": "knave(B)", "B": "knave(A) and knave(B)"},
               "roles": ["knight", "knave"]}}
# θ = 0.4 - 0.1 = 3/10 exactly, which is not > 3/10 (in floats 0.4 - 0.1 = 0.30000000000000004 > 0.3).
ATE_TIE = {"task": "ate_threshold", "graph": "X -> Y", "graph_class": "DAG",
           "query": {"treatment": "X", "outcome": "Y", "threshold": 0.3},
           "data": {"epsilon": 0.01, "cpts": ["P(X=1) = 0.5", "P(Y=1 | X=0) = 0.1", "P(Y=1 | X=1) = 0.4"]}}
PATH = {"task": "path", "graph": "A -> B, B -> C, A -> C", "graph_class": "DAG",
        "query": {"source": "A", "target": "C", "variant": "shortest"}}
CYCLE = {"task": "cycle_witness", "graph": "A -> B, B -> C, C -> A", "graph_class": "DIRECTED",
         "query": {"variant": "any"}}

CASES = [  # (problem, right objects, wrong objects)
    (BACKDOOR, [{"Z"}, {"W", "Z"}], [set(), {"W"}, {"M"}, {"X"}, {"Z", "M"}, {"Q"}]),
    (dict(BACKDOOR, query={"treatment": "X", "outcome": "Y", "variant": "minimal"}), [{"Z"}], [{"W", "Z"}, set()]),
    (KK, [{"A": True, "B": False}], [{"A": False, "B": False}, {"A": True, "B": True}, {"A": False, "B": True}]),
    (ATE_TIE, [False], [True]),
    (dict(ATE_TIE, query={"treatment": "X", "outcome": "Y", "threshold": 0.29}), [True], [False]),
    (PATH, [(("A", "C"), ("->",)), (("A", "C"), None)], [(("A", "B", "C"), ("->", "->")), ((), None)]),
    (dict(PATH, query={"source": "A", "target": "C", "variant": "any"}), [(("A", "B", "C"), ("->", "->"))],
     [(("A", "C"), ("<-",)), ((), None)]),
    (CYCLE, [("A", "B", "C"), ("B", "C", "A")], [("A", "C", "B"), (), ("A", "B")]),
]


@pytest.mark.parametrize("spec,right,wrong", CASES, ids=[f"{c[0]['task']}-{i}" for i, c in enumerate(CASES)])
def test_oracle_accepts_right_and_rejects_wrong(spec, right, wrong):
    p = Problem.from_dict(spec)
    for obj in right:
        assert ab.correct(p, obj) is True, obj
    for obj in wrong:
        assert ab.correct(p, obj) is False, obj


def test_wrong_objects_are_wrong_by_the_oracle():
    p = Problem.from_dict(BACKDOOR)
    ws = ab.wrong_objects(p, random.Random(0))
    assert len(ws) == 3 and not any(ab.correct(p, w) for w in ws)
    assert ab.wrong_objects(Problem.from_dict(ATE_TIE), random.Random(0)) == [True]


def test_the_battery_counts_what_a_broken_verifier_does(monkeypatch):
    """With ``score`` replaced by one that gives every trace 6/6 (and raises or stalls on some
    templates), the battery reports wrong answers at 6/6, crashes (``ProblemError`` included) and hangs."""
    real = ab.score
    stalls = []

    def broken(text, problem):
        if "Wait, let me redo it." in text:
            raise ProblemError("planted")
        if "\nFINAL ANSWER: " in text:
            raise RuntimeError("planted")
        if "\n\nAnswer: " in text and len(stalls) < 2:
            stalls.append(text)
            time.sleep(2)
        return dataclasses.replace(real(text, problem), bits=[1] * 6)

    monkeypatch.setattr(ab, "score", broken)
    rep = ab.run(seed=0, n_per_task=1, hang_s=0.2)
    total = rep.total
    per_problem = rep.control["plain-wrong"].traces  # problems that reached the control pass
    assert per_problem == rep.problems
    assert total.hangs == 2  # the first problem's control answer-after-blank, then its first attack's
    crash_templates = {t for (kind, _, t), n in rep.counts.items() if kind == "crash" and n}
    assert crash_templates == {"two-blocks-correct-then-wrong", "final-answer-line-after"}
    attack_failures = (total.crashes - 2 * per_problem) + 1  # the control has one trace of each template
    assert total.wrong_6 == total.traces - attack_failures > 0  # every other attack trace "scores" 6/6
    kinds = {(f.kind, f.template) for f in rep.findings}
    assert {("crash", "two-blocks-correct-then-wrong"), ("crash", "final-answer-line-after"),
            ("hang", "answer-after-blank"), ("wrong 6/6", "plain-wrong")} <= kinds
    assert any(f.detail.startswith("ProblemError") for f in rep.findings)
    assert not rep.clean
