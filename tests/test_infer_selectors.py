"""Selector semantics (model-free): tie rules, structure-only control, extract-then-solve, stored
comparator scores, K-prefix selections, audits and the `calver select` CLI."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from fixtures import synthetic_units, write_pool

from calver.evaluation.grading import accuracy, calver_audit, grade_rows
from calver.infer.firewall import SelectorView, make_views, strip_problem
from calver.infer.select import run_selection
from calver.infer.selectors import NEURAL, NON_NEURAL, SELECTORS, SelectorError, earliest_max, structure_bits
from calver.verifier import Problem, get_family, grade, parse_graph, score

G = parse_graph("Z -> X, Z -> Y, X -> M, M -> Y, W -> Z")
P = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y", "variant": "any"}, graph=G, id="p1")
FAM = get_family("backdoor_set")


def tr(obj) -> str:
    return FAM.canonical_trace(P, frozenset(obj))


def view(texts, problem=P, stored=None) -> SelectorView:
    return SelectorView(problem.id, 0, strip_problem(problem), tuple(texts), tuple(range(len(texts))), stored or {})


VALID_A, VALID_B = tr({"Z"}), tr({"W", "Z"})
INVALID, INVALID2 = tr(set()), tr({"W"})
BROKEN = "I think the answer is {Z}."


def test_valid_and_invalid_fixtures():
    assert score(VALID_A, P).total == 6 and score(VALID_B, P).total == 6
    assert score(INVALID, P).total < 6 and not grade(P, set())


def test_first():
    assert SELECTORS["first"](view([INVALID, VALID_A])).index == 0


def test_plurality_fragmentation_and_tie_rule():
    # valid mass 0.6 split over two answers, invalid spoiler 0.4 -> plurality picks the spoiler
    s = SELECTORS["plurality"](view([VALID_A, INVALID, VALID_B, INVALID, VALID_A, INVALID, VALID_B]))
    assert s.index == 1 and s.scores[1] == 3.0
    # tie 2-2: the answer whose first occurrence is earliest wins
    assert SELECTORS["plurality"](view([BROKEN, INVALID, VALID_A, VALID_A, INVALID])).index == 1
    assert SELECTORS["plurality"](view([BROKEN, BROKEN])).index == 0  # nothing parses


def test_medoid_mean_jaccard():
    # {W,Z} overlaps {Z} and {W}: the set medoid
    s = SELECTORS["medoid"](view([tr({"Z"}), tr({"W"}), tr({"W", "Z"}), BROKEN]))
    assert s.index == 2 and s.scores[3] == -1.0
    assert SELECTORS["medoid"](view([VALID_A, VALID_A])).index == 0  # ties -> first


def test_calver_earliest_max():
    s = SELECTORS["calver"](view([INVALID, BROKEN, VALID_B, VALID_A]))
    assert s.index == 2 and s.scores[2] == 6.0
    assert SELECTORS["calver"](view([BROKEN, BROKEN])).index == 0


def test_structure_ignores_semantics():
    assert structure_bits(INVALID, P) == [1] * 6  # well-formed, semantically invalid: full marks
    assert structure_bits(VALID_A, P) == [1] * 6
    assert sum(structure_bits(BROKEN, P)) == 0
    no_graph = "\n".join(line for line in VALID_A.splitlines() if not line.startswith("GRAPH"))
    assert structure_bits(no_graph, P)[0] == 0
    wrong_q = VALID_A.replace("treatment=X; outcome=Y", "treatment=Y; outcome=X")
    assert structure_bits(wrong_q, P)[1] == 0
    # structure picks the first well-formed trace, whatever its validity
    assert SELECTORS["structure"](view([BROKEN, INVALID, VALID_A])).index == 1


def test_extract_solve_consensus_outside_the_pool():
    wrong_graph = INVALID.replace("W -> Z", "W -> X")  # one candidate misreads an edge
    s = SELECTORS["extract_solve"](view([wrong_graph, INVALID, INVALID2, BROKEN]))
    assert s.index == -1 and s.answer is not None
    assert grade(P, s.answer)  # the exact solver on the consensus graph answers validly
    assert s.scores[1] == 1.0 and s.scores[3] == 0.0 and s.scores[0] < 1.0
    empty = SELECTORS["extract_solve"](view([BROKEN]))
    assert empty.index == -1 and empty.answer is None


def test_extract_solve_constructed_mode():
    p = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y", "variant": "any"}, graph=G,
                mode="constructed", text="prose", variables=G.nodes, id="c")
    t = FAM.canonical_trace(P, frozenset())  # graph slot holds G; answer invalid
    s = SELECTORS["extract_solve"](view([t, t], problem=p))
    assert grade(p, s.answer)


def test_neural_from_stored_scores():
    v = view([INVALID, VALID_A, VALID_B], stored={"judge": (0.1, 0.9, 0.9), "reward_model": (math.nan, -1.0, -2.0)})
    assert SELECTORS["judge"](v).index == 1
    assert SELECTORS["reward_model"](v).index == 1  # NaN never wins
    with pytest.raises(SelectorError):
        SELECTORS["prm"](v)
    assert earliest_max([math.nan, math.nan]) == 0
    assert set(NEURAL) == {"confidence", "judge", "reward_model", "reward_model_trace", "prm"}


def test_judge_and_confidence_parsers():
    from calver.infer.selectors.neural import parse_judge_score, parse_yes_no

    assert parse_judge_score("SCORE: 7") == 0.7 and parse_judge_score("I'd say 12") == 1.0
    assert math.isnan(parse_judge_score("no idea"))
    assert parse_yes_no("Yes.") == 1.0 and parse_yes_no("no") == 0.0 and parse_yes_no("") == 0.0


@pytest.fixture()
def pool(tmp_path):
    return write_pool(tmp_path / "pool", synthetic_units(24, 8, seed=1, n_seeds=2), 8)


def test_prefix_selection_and_stored_reuse(pool):
    rows = run_selection(pool, NON_NEURAL, k=4)
    assert set(rows) == {f"{n}@4" for n in NON_NEURAL}
    assert all(len(r["scores"]) == 4 for r in rows["calver@4"])
    assert set(pool.selection_names()) >= {"calver@4", "extract_solve@4"}
    # a neural comparator's full-K scores stored once serve every prefix without a model
    full = {(v.problem_id, v.seed): [float(i) for i in range(8)][::-1] for v in make_views(pool)}
    pool.write_selection("judge", [{"problem_id": p, "seed": s, "index": 0, "scores": sc}
                                   for (p, s), sc in full.items()])
    rows = run_selection(pool, ["judge"], k=2)
    assert all(r["index"] == 0 and r["scores"] == [7.0, 6.0] for r in rows["judge@2"])
    meta = json.loads((pool.root / "selections" / "judge@2.meta.json").read_text())
    assert meta["from_stored_scores"] and meta["k"] == 2
    with pytest.raises(SelectorError):
        run_selection(pool, ["prm"])


def test_audit_and_grading(pool):
    run_selection(pool, ["calver", "plurality", "extract_solve"])
    best, worst = calver_audit(pool, "best"), calver_audit(pool, "worst")
    acc = {n: accuracy(pool, n) for n in ("calver", "plurality", "extract_solve", "calver_best", "calver_worst")}
    assert acc["calver_worst"] <= acc["calver"] <= acc["calver_best"]
    assert acc["calver"] > acc["plurality"]  # the fragmentation the synthetic pools are built with
    assert [r["index"] for r in best] != [] and len(best) == len(worst)
    graded = grade_rows(pool, list(pool.selection("extract_solve").values()))
    assert all(r["index"] == -1 for r in graded)


def test_cli_select(pool, capsys):
    from calver.cli import main

    assert main(["select", "--pool", str(pool.root), "--selectors", "non-neural", "--prefixes", "2", "8"]) == 0
    assert main(["eval", "--pool", str(pool.root), "--tie-audit", "--selection-accuracy"]) == 0
    out = capsys.readouterr().out
    assert "calver@8\t" in out and "calver_best@2\t" in out
    assert main(["select", "--pool", str(pool.root), "--selectors", "judge"]) == 2  # no model, nothing stored


def test_cli_select_all_means_every_selector_whose_model_is_available(pool, capsys):
    """`--selectors all`: every non-neural selector plus each neural one with a model (a flag, the manifest's
    policy for confidence, or stored scores); the rest are named on stderr with the flag that adds them."""
    from calver.cli import main

    assert main(["select", "--pool", str(pool.root), "--selectors", "all"]) == 0
    err = capsys.readouterr().err
    for name, flag in (("confidence", "--policy"), ("judge", "--judge_model"), ("reward_model", "--reward_model"),
                       ("reward_model_trace", "--reward_model"), ("prm", "--prm")):
        assert f"{name} (no model: pass {flag})" in err
    assert set(pool.selection_names()) == set(NON_NEURAL)
    # stored judge scores make the judge available to `all` (re-selected from them, no model needed)
    full = {(v.problem_id, v.seed): [float(i) for i in range(8)] for v in make_views(pool)}
    pool.write_selection("judge", [{"problem_id": p, "seed": s, "index": 7, "scores": sc}
                                   for (p, s), sc in full.items()])
    assert main(["select", "--pool", str(pool.root), "--selectors", "all", "--prefixes", "4"]) == 0
    err = capsys.readouterr().err
    assert "judge (no model" not in err and "prm (no model: pass --prm)" in err
    assert set(pool.selection_names()) == set(NON_NEURAL) | {"judge"} | {f"{n}@4" for n in (*NON_NEURAL, "judge")}
    assert all(r["index"] == 3 for r in pool.selection("judge@4").values())
    # a neural selector named explicitly is not optional: no model and no stored scores is still an error
    assert main(["select", "--pool", str(pool.root), "--selectors", "all", "prm"]) == 2
    assert "no model given and no stored scores for prm" in capsys.readouterr().err


def test_benchmark_runs_small():
    """benchmarks/selectors_bench.py still runs as a script (it loads tests/fixtures.py by path)."""
    import subprocess

    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "selectors_bench.py"
    r = subprocess.run([sys.executable, str(bench), "--units", "20", "--repeat", "1", "--budget", "1e9"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split("|")[1].strip() for line in r.stdout.splitlines() if line.startswith("| ")}
    assert rows >= set(NON_NEURAL) | {"TOTAL"}, r.stdout


def test_select_names_a_missing_prm_directory(tmp_path, capsys):
    from calver.cli import main

    assert main(["select", "--pool", str(tmp_path), "--selectors", "prm", "--prm", str(tmp_path / "nope")]) == 2
    assert "'prm'" in capsys.readouterr().err
