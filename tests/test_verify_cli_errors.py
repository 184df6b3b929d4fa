"""`calver verify` on malformed problems: one line on stderr naming the field, exit code 2, never a
traceback; and the library's ``score`` raises only ``ProblemError`` for them (audit C1)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from calver.verifier import Problem, ProblemError, grade, score

ROOT = Path(__file__).resolve().parents[1]
KK = json.loads((ROOT / "docs" / "examples" / "kk_problem.json").read_text())
KK_TRACE = (ROOT / "docs" / "examples" / "kk_trace.txt").read_text()
BD = {"task": "backdoor_set", "graph": "Z -> X, Z -> Y, X -> Y", "graph_class": "DAG",
      "query": {"treatment": "X", "outcome": "Y"}}
IV = {"task": "intervention_reachability", "graph": "X -> M, M -> Y", "graph_class": "DAG",
      "query": {"do": ["M"], "source": "X", "target": "Y"}}
BL = {"task": "blocking_set", "graph": "Z -> X, Z -> Y, X -> Y", "graph_class": "DAG",
      "query": {"path": "X <- Z -> Y"}}
ATE = {"task": "ate_threshold", "graph": "X -> Y", "graph_class": "DAG",
       "query": {"treatment": "X", "outcome": "Y", "threshold": 0.1},
       "data": {"cpts": {"X": {"parents": [], "p1": [0.5]}, "Y": {"parents": ["X"], "p1": [0.2, 0.7]}}}}
PEOPLE25 = [f"P{i}" for i in range(25)]


def edit(base: dict, **fields) -> dict:
    d = copy.deepcopy(base)
    for path, value in fields.items():
        *outer, last = path.split("__")
        target = d
        for key in outer:
            target = target[key]
        if value is ...:
            target.pop(last, None)
        else:
            target[last] = value
    return d


DEEP = ("[" * 100_000 + "]" * 100_000).encode()
# id -> (problem file bytes, extra CLI args, text that must be in the message)
CASES = {
    "data-list": (edit(BD, data=[1, 2]), [], "field 'data'"),
    "data-string": (edit(BD, data="x"), [], "field 'data'"),
    "meta-string": (edit(BD, meta="x"), [], "field 'meta'"),
    "meta-list": (edit(BD, meta=[1]), [], "field 'meta'"),
    "variables-int": (edit(BD, variables=5), [], "field 'variables'"),
    "variables-members": (edit(BD, variables=[1, ["X"]]), [], "field 'variables'"),
    "task-list": (edit(BD, task=["backdoor_set"]), [], "field 'task'"),
    "unknown-task": (edit(BD, task="no_such_task"), [], "field 'task'"),
    "not-utf8": (b'{"task": "backdoor_set", "text": "\xff\xfe", "query": {}}', [], "UTF-8"),
    "deep-json": (b'{"task": "backdoor_set", "query": {}, "meta": {"x": ' + DEEP + b"}}", [], "nested too deeply"),
    "deep-json-top": (DEEP, [], "nested too deeply"),
    "do-null": (edit(IV, query__do=None), [], "query field 'do'"),
    "do-int": (edit(IV, query__do=3), [], "query field 'do'"),
    "path-int": (edit(BL, query__path=5), [], "query field 'path'"),
    "treatment-is-outcome": (edit(BD, query__outcome="X"), [], "'treatment' and 'outcome'"),
    "kk-statement-int": (edit(KK, data__statements__Alice=5), [], "data field 'statements'"),
    "kk-25-people": (edit(KK, data__people=PEOPLE25, query__people=PEOPLE25, data__statements={}), [],
                     "data field 'people'"),
    "kk-duplicate-people": (edit(KK, data__people=["Alice", "Bob", "Carol", "Bob"]), [], "data field 'people'"),
    "kk-bad-name": (edit(KK, data__people=["Alice", "Bob", "not"], query__people=["Alice", "Bob", "not"]), [],
                    "data field 'people'"),
    "kk-role-clash": (edit(KK, data__roles=["knave", "knight"]), [], "data field 'roles'"),
    "kk-role-is-name": (edit(KK, data__roles=["Alice", "laggard"]), [], "data field 'roles'"),
    "ate-p1-null": (edit(ATE, data__cpts__Y__p1=None), [], "data field 'cpts'"),
    "ate-parents-int": (edit(ATE, data__cpts__Y__parents=3), [], "data field 'cpts'"),
    "grade-supplied-no-graph": (edit(BD, graph=...), ["--grade"], "field 'graph'"),
    "grade-constructed-no-graph": (edit(BD, graph=..., mode="constructed", variables=["X", "Y", "Z"]), ["--grade"],
                                   "field 'graph'"),
    # A=B=C: the all-knight and the all-knave assignments both satisfy the three statements
    "grade-kk-two-solutions": (edit(KK, data__statements={"Alice": "knight(Bob)", "Bob": "knight(Carol)",
                                                          "Carol": "knight(Alice)"}), ["--grade"], "2 solutions"),
}


def _run(tmp_path: Path, problem, args: list[str]) -> subprocess.CompletedProcess:
    pf = tmp_path / "problem.json"
    pf.write_bytes(problem if isinstance(problem, bytes) else json.dumps(problem).encode())
    tf = tmp_path / "trace.txt"
    tf.write_text(KK_TRACE)
    return subprocess.run(
        [sys.executable, "-m", "calver.cli", "verify", str(pf), str(tf), *args],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120,
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_problem_is_one_line_exit_2(case, tmp_path):
    problem, args, field = CASES[case]
    out = _run(tmp_path, problem, args)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert lines[0].startswith("calver verify: bad problem"), lines[0]
    assert field in lines[0], lines[0]
    assert out.stdout == ""


def test_well_formed_bases_are_accepted(tmp_path):
    """The cases above differ from these problems only in the broken field."""
    for base in (BD, IV, BL, ATE, KK):
        out = _run(tmp_path, base, [])
        assert out.returncode == 0, (base["task"], out.stderr)
        assert set(json.loads(out.stdout)) >= {"bits", "total"}
    out = _run(tmp_path, KK, ["--grade"])
    assert out.returncode == 0 and json.loads(out.stdout)["correct"] is True


@pytest.mark.parametrize("case", [c for c, (p, a, _f) in sorted(CASES.items())
                                  if isinstance(p, dict) and not a and c not in ("unknown-task",)])
def test_library_raises_only_problem_error(case):
    """Where the JSON loads, either ``Problem.from_dict`` or ``score`` refuses with ProblemError: no
    TypeError/ValueError/KeyError escapes for a malformed problem."""
    problem, _args, field = CASES[case]
    with pytest.raises(ProblemError) as err:
        score(KK_TRACE, Problem.from_dict(problem))
    assert type(err.value) is ProblemError and field in str(err.value)


def test_grade_refuses_ungradeable_problems_with_problem_error():
    with pytest.raises(ProblemError, match="2 solutions"):
        grade(Problem.from_dict(CASES["grade-kk-two-solutions"][0]), "Alice=knight, Bob=knight, Carol=knight")
    with pytest.raises(ProblemError, match="graph"):
        grade(Problem.from_dict(CASES["grade-supplied-no-graph"][0]), "{}")


def test_unknown_task_fails_closed_in_the_library():
    sc = score(KK_TRACE, Problem.from_dict(CASES["unknown-task"][0]))
    assert sc.total == 0 and "unregistered task" in sc.reasons["GRAPH"]
