"""Scoring pipeline: slot tolerance, fail-closed behaviour, textbook grading cases, fuzzing, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.verifier import Problem, get_family, grade, parse_graph, score, select
from calver.verifier.scoring import select_from_scores

ROOT = Path(__file__).resolve().parents[1]


def bd_problem(edges: str, x="X", y="Y", variant="any", kind=None) -> Problem:
    return Problem(task="backdoor_set", graph=parse_graph(edges, kind=kind),
                   query={"treatment": x, "outcome": y, "variant": variant})


CONFOUNDED = "W -> Z, Z -> X, Z -> Y, X -> M, M -> Y, X -> Y"
GOLD = (ROOT / "docs/examples/backdoor_trace.txt").read_text()


def test_example_trace_scores_6():
    p = Problem.from_dict(json.loads((ROOT / "docs/examples/backdoor_problem.json").read_text()))
    assert score(GOLD, p).bits == [1] * 6


@pytest.mark.parametrize(
    "variant",
    [
        lambda t: t.replace("GRAPH:", "Graph:").replace("QUERY:", "query:").replace("RESULT: valid", "Result: VALID"),
        lambda t: t.replace("GRAPH:", "**GRAPH:**").replace("ANSWER:", "### ANSWER:"),
        lambda t: "```\n" + t + "\n```",
        lambda t: t.replace("\n", "\n\n   "),
        lambda t: "Let me think step by step.\n" + t + "\nThat is my final answer.",
        lambda t: t.replace("STRATEGY:", "STEP 3: STRATEGY:").replace("RESULT:", "- RESULT:"),
    ],
)
def test_harmless_variation_is_tolerated(variant):
    p = Problem(task="backdoor_set", graph=parse_graph(CONFOUNDED), query={"treatment": "X", "outcome": "Y"})
    text = variant(GOLD)
    assert score(text, p).total == 6, score(text, p).reasons


def test_missing_duplicated_and_conflicting_slots_fail_their_bits():
    p = bd_problem(CONFOUNDED)
    no_result = "\n".join(ln for ln in GOLD.splitlines() if not ln.startswith("RESULT"))
    r = score(no_result, p)
    assert r.bits[4] == 0 and "missing" in r.reasons["RESULT"]
    dup = GOLD + "\nSTRATEGY: {Z}"
    r = score(dup, p)
    assert r.bits[2] == 0 and "duplicated" in r.reasons["STRATEGY"]
    conflict = GOLD + "\nSTRATEGY: {W}"
    r = score(conflict, p)
    assert r.bits[2] == 0 and "conflicting" in r.reasons["STRATEGY"]


def test_unregistered_task_fails_closed():
    p = Problem(task="no_such_task", graph=parse_graph("A -> B"), query={})
    r = score(GOLD, p)
    assert r.total == 0 and all("unregistered" in v for v in r.reasons.values())


def test_graph_slot_must_equal_supplied_graph_with_edge_types():
    p = bd_problem("Z -> X, Z -> Y, X -> Y, A <-> Z", kind="ADMG")
    fam = get_family("backdoor_set")
    t = fam.canonical_trace(p, {"Z"})
    assert score(t, p).total == 6
    bad = t.replace("A <-> Z", "A -> Z")
    r = score(bad, p)
    assert r.bits[0] == 0 and "A<->Z" in r.reasons["GRAPH"]


def test_cycle_in_declared_dag_is_reported():
    p = bd_problem(CONFOUNDED)
    t = GOLD.replace("GRAPH: M -> Y", "GRAPH: Y -> X, M -> Y")
    r = score(t, p)
    assert r.bits[0] == 0 and "cycle" in r.reasons["GRAPH"].lower()


# ---- textbook cases (grading by the predicate) ---------------------------------------------------

def test_m_bias_empty_set_valid_m_invalid():
    p = bd_problem("A -> X, A -> M, B -> M, B -> Y, X -> Y")
    assert grade(p, set()) and not grade(p, {"M"}) and grade(p, {"M", "A"}) and grade(p, {"M", "B"})


def test_descendant_trap():
    p = bd_problem("C -> X, C -> Y, X -> M, M -> Y")
    assert grade(p, {"C"}) and not grade(p, {"M"}) and not grade(p, {"C", "M"})


def test_front_door_graph():
    p = Problem(task="frontdoor_set", graph=parse_graph("X -> M, M -> Y, X <-> Y"),
                query={"treatment": "X", "outcome": "Y"})
    assert grade(p, {"M"}) and not grade(p, set())
    bd = bd_problem("X -> M, M -> Y, X <-> Y")
    assert not grade(bd, set()) and not grade(bd, {"M"})


def test_simpson_style_graph_has_two_valid_singletons():
    p = bd_problem("A -> B, A -> X, B -> Y, X -> Y")
    fam = get_family("backdoor_set")
    singles = [z for z in fam.validity_class(p.graph, fam.normalize_query(p)) if len(z) == 1]
    assert sorted(singles) == [frozenset({"A"}), frozenset({"B"})]
    minimal = bd_problem("A -> B, A -> X, B -> Y, X -> Y", variant="minimal")
    assert grade(minimal, "{A}") and grade(minimal, "{B}") and not grade(minimal, "{A, B}")
    maximal = bd_problem("A -> B, A -> X, B -> Y, X -> Y", variant="maximal")
    assert grade(maximal, "{A, B}") and not grade(maximal, "{A}")


def test_grade_accepts_text_and_objects_and_rejects_junk():
    p = bd_problem(CONFOUNDED)
    assert grade(p, "{Z}") and grade(p, {"Z"}) and grade(p, ["Z", "W"])
    assert not grade(p, "{Q}") and not grade(p, "%%%")


# ---- selection ---------------------------------------------------------------------------------

def test_select_earliest_max_and_tie_rules():
    p = bd_problem("A -> B, A -> X, B -> Y, X -> Y")
    fam = get_family("backdoor_set")
    good_a = fam.canonical_trace(p, {"A"})
    good_b = fam.canonical_trace(p, {"B"})
    broken = good_a.replace("RESULT: valid", "RESULT: ???")
    assert select([broken, good_b, good_a], p) == 1
    assert select_from_scores([5, 6, 6, 2]) == 1
    assert select_from_scores([5, 6, 6], "best", correct={1: False, 2: True}) == 2
    assert select_from_scores([5, 6, 6], "worst", correct={1: True, 2: False}) == 2
    with pytest.raises(ValueError):
        select([], p)


# ---- robustness ---------------------------------------------------------------------------------

PROBLEM = bd_problem(CONFOUNDED)
for _warm in (GOLD, "{}", "<graphml/>", "digraph { A -> B }", "A causes B.", "x\n0 1"):  # lazy imports, regex compiles
    score(_warm, PROBLEM)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000) | st.binary(max_size=2000).map(lambda b: b.decode("latin-1")))
def test_score_never_raises_on_arbitrary_text(text):
    r = score(text, PROBLEM)  # its CPU time per call: benchmarks/latency_bench.py
    assert 0 <= r.total <= 6


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["GRAPH:", "QUERY:", "STRATEGY:", "{", "}", "[", "(", ")", "->", "<->", "X", "Z",
                                 "valid", "\n", "=", ";", "backdoor_check(", "АВС", "Ｘ", "\u200b"]), max_size=300))
def test_score_never_raises_on_slot_shaped_noise(tokens):
    r = score(" ".join(tokens), PROBLEM)
    assert len(r.bits) == 6


def test_hostile_inputs_fail_closed():
    hostile = [
        GOLD * 2000,  # ~1 MB
        "GRAPH: " + "(" * 50_000 + "\nANSWER: {" + "{" * 50_000,
        GOLD.replace("X", "Х"),  # Cyrillic look-alike
        GOLD.replace("{Z}", "{Ｚ}"),
        "\x00\xff" * 10_000,
    ]
    for text in hostile:  # their CPU time (<= 200 ms, 1 MB traces included): benchmarks/latency_bench.py
        r = score(text, PROBLEM)
        assert r.total < 6 or text.startswith(GOLD)


def test_verifier_does_not_import_torch():
    code = "import sys, calver.verifier; from calver.verifier import score; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_cli_verify_on_documented_example():
    out = subprocess.run(
        [sys.executable, "-m", "calver.cli", "verify",
         "docs/examples/backdoor_problem.json", "docs/examples/backdoor_trace.txt"],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )
    res = json.loads(out.stdout)
    assert res["bits"] == [1] * 6 and res["total"] == 6 and res["answer"] == ["Z"]


def test_cli_verify_reports_bad_problem_field(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"task": "backdoor_set", "graph": "A -> B", "query": {"treatment": "A"}}))
    out = subprocess.run(
        [sys.executable, "-m", "calver.cli", "verify", str(bad), "docs/examples/backdoor_trace.txt"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert out.returncode == 2 and "outcome" in out.stderr
