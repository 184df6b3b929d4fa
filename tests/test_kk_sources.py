"""``calver data kk`` sources and verification modes: the reasoning-gym conversion (checked against
reasoning-gym's own answers), meta["verification"], and the error exits."""

from __future__ import annotations

import json

import oracles as O
import pytest

from calver.cli import main
from calver.data_gen import reasoning_gym_kk as rgkk
from calver.data_gen.benchmark_cli import KkDataConfig, kk_rows
from calver.infer.firewall import strip_problem, verification_mode
from calver.verifier import grade, score
from calver.verifier.logic import Atom, Bin, Not, parse_formula, to_text
from calver.verifier.registry import get_family

KK = get_family("knights_knaves")


# ---- translation (no reasoning-gym needed) ------------------------------------------------------------
def test_to_formula_translates_every_reasoning_gym_connective():
    names = ["Ann", "Bo", "Cy"]
    stmt = ("and", ("telling-truth", 0), ("not", ("lying", 1)), ("or", ("lying", 2), ("telling-truth", 1)))
    f = rgkk.to_formula(stmt, names)
    assert f == Bin("and", Bin("and", Atom("Ann", True), Not(Atom("Bo", False))),
                    Bin("or", Atom("Cy", False), Atom("Bo", True)))
    assert rgkk.to_formula(("<=>", ("lying", 0), ("->", ("telling-truth", 1), ("lying", 2))), names) == \
        Bin("<->", Atom("Ann", False), Bin("->", Atom("Bo", True), Atom("Cy", False)))
    assert parse_formula(to_text(f)) == f


@pytest.mark.parametrize("bad", [("xor", ("lying", 0), ("lying", 1)), ("lying", 5), ("not",), (), "lying",
                                 ("and", ("lying", 0)), ("->", ("lying", 0))])
def test_to_formula_refuses_what_it_does_not_know(bad):
    with pytest.raises(ValueError):
        rgkk.to_formula(bad, ["Ann", "Bo"])


def test_rg_seeds_give_disjoint_item_windows():
    seeds = {rgkk.rg_seed(s, n) for s in range(4) for n in range(2, 11)}
    assert len(seeds) == 36 and all(abs(a - b) >= 2 ** 20 for a in seeds for b in seeds if a != b)


# ---- the real package ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n_people", [3, 4, 5])
def test_reasoning_gym_conversion_matches_its_own_answers(n_people):
    pytest.importorskip("reasoning_gym")
    from reasoning_gym.logic.knights_knaves import KnightsKnavesConfig, KnightsKnavesDataset

    problems, skipped = rgkk.reasoning_gym_kk(n_people, 30, seed=0)
    assert len(problems) + sum(skipped.values()) == 30 and len(problems) >= 27, skipped
    ds = KnightsKnavesDataset(KnightsKnavesConfig(n_people=n_people, size=30, seed=rgkk.rg_seed(0, n_people)))
    for p in problems:
        item = ds[p.meta["rg_index"]]
        assert p.text == item["question"]  # the puzzle text exactly as reasoning-gym renders it
        assert p.data["people"] == item["metadata"]["names"] and p.meta["source"] == "reasoning_gym"
        assert p.meta["people"] == n_people and p.mode == "constructed"
        # an independent parser and enumeration (tests/oracles.py), not the engine the converter used
        sols = O.kk_solutions(p.data["people"], p.data["statements"])
        assert sols == [dict(zip(p.data["people"], item["metadata"]["solution"]))]
        assert KK.solution(p) == sols[0]
        good, bad = p.data["roles"]
        said = ", ".join(f"{q} is a {good if sols[0][q] else bad}" for q in p.data["people"])
        assert ds.score_answer(said, item) == 1.0
        tr = KK.canonical_trace(p)
        assert score(tr, strip_problem(p)).total == 6 and grade(p, score(tr, p).answer)


def test_reasoning_gym_items_that_fail_a_check_are_skipped_and_counted(monkeypatch):
    pytest.importorskip("reasoning_gym")
    real = rgkk.to_formula
    calls = {"n": 0}

    def flaky(stmt, names):
        calls["n"] += 1
        if calls["n"] == 1:
            raise ValueError("unknown statement")
        return real(stmt, names)

    monkeypatch.setattr(rgkk, "to_formula", flaky)
    problems, skipped = rgkk.reasoning_gym_kk(3, 4, seed=1)
    assert len(problems) == 3 and skipped == {"translation": 1}


def test_kk_rows_reasoning_gym_candidate_local_summary():
    pytest.importorskip("reasoning_gym")
    problems, summary = kk_rows(KkDataConfig(out="x", people=[3, 4], n=3, source="reasoning_gym",
                                             verification="candidate_local"))
    assert summary["items"] == {"3 people": 3, "4 people": 3} and summary["verification"] == "candidate_local"
    assert summary["skipped"] == {"3 people": {}, "4 people": {}}
    assert all(p.meta["verification"] == "candidate_local" and verification_mode(p) == "candidate_local"
               for p in problems)
    assert all("statements" not in strip_problem(p).data and "statements" in p.data for p in problems)


# ---- the calver source and the CLI ---------------------------------------------------------------------
def test_kk_rows_calver_default_is_grounded_and_candidate_local_only_adds_meta():
    g, sg = kk_rows(KkDataConfig(out="x", people=[3], n=4))
    c, sc = kk_rows(KkDataConfig(out="x", people=[3], n=4, verification="candidate_local"))
    assert sg["verification"] == "grounded" and all("verification" not in p.meta for p in g)
    assert [p.data for p in g] == [p.data for p in c]
    assert all(verification_mode(p) == "grounded" for p in g)
    assert all(verification_mode(p) == "candidate_local" for p in c)


def test_cli_writes_candidate_local_problems(tmp_path):
    out = tmp_path / "kk"
    assert main(["data", "kk", "--out", str(out), "--people", "3", "--n", "2",
                 "--verification", "candidate_local"]) == 0
    rows = [json.loads(line) for line in (out / "problems.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["meta"]["verification"] == "candidate_local" for r in rows)
    assert json.loads((out / "summary.json").read_text())["verification"] == "candidate_local"


@pytest.mark.parametrize("args,msg", [(["--verification", "oracle"], "grounded, candidate_local"),
                                      (["--source", "xie"], "calver, reasoning_gym")])
def test_cli_refuses_unknown_choices(tmp_path, capsys, args, msg):
    assert main(["data", "kk", "--out", str(tmp_path / "o"), *args]) == 2
    assert msg in capsys.readouterr().err


def test_cli_reasoning_gym_missing_exits_2_with_an_install_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(rgkk, "available", lambda: False)
    assert main(["data", "kk", "--out", str(tmp_path / "o"), "--source", "reasoning_gym"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install reasoning-gym" in err[0]
    assert not (tmp_path / "o").exists()
