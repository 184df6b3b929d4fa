"""Typed evaluation results, several pools in one evaluation, breakdowns, and reports unchanged.

Oracles: a hand computation of the CALVER pick (earliest max score of ``score`` on the stripped problem,
graded with ``grade`` on the source problem) for every unit of two pools; the clustering is checked by
the bootstrap on source ids against one on (policy, source) ids; the reports are compared with the ones
the code before the typed results wrote (``tests/data/golden/``, from commit c243b15; eval_report.md
since gained the verification-mode line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from fixtures import synthetic_units, write_pool
from testing_utils import markdown_table_problems, require_modules

from calver.evaluation.bootstrap import mean_ci
from calver.evaluation.breakdowns import ate_margin_band, check_fields
from calver.evaluation.evaluate import evaluate
from calver.evaluation.multi import evaluate_pools
from calver.evaluation.report import pct, share, write_json_out, write_report
from calver.evaluation.results import EvalResult, MultiEvalResult, load_results
from calver.infer.firewall import strip_problem
from calver.infer.pool import Pool
from calver.infer.select import run_selection
from calver.verifier import grade, score

GOLDEN = Path(__file__).parent / "data" / "golden"
SELECTORS = ["first", "plurality", "medoid", "structure", "calver", "extract_solve"]


def _pools(root: Path) -> dict[str, Path]:
    """Two policies over the same 16 (problem, seed) units: 'grpo' holds 'sft''s candidates reversed."""
    base = synthetic_units(n_units=16, k=8, seed=0, n_seeds=2)
    variants = {"sft": base, "grpo": [(p, s, texts[::-1]) for p, s, texts in base]}
    return {name: write_pool(root / "pools" / name, units, k=8).root for name, units in variants.items()}


def _hand_calver(pool_dir: Path) -> dict[tuple[str, int], tuple[str, bool]]:
    """(problem, seed) -> (source id, is CALVER's pick correct), computed without calver.evaluation."""
    pool = Pool(pool_dir)
    problems = pool.problems()
    out = {}
    for u in pool.units():
        view = strip_problem(problems[u.problem_id])
        scores = [score(t, view) for t in u.texts]
        best = max(s.total for s in scores)
        pick = next(s for s in scores if s.total == best)
        out[(u.problem_id, u.seed)] = (u.source_id, bool(grade(problems[u.problem_id], pick.answer)))
    return out


def test_two_pools_pooled_accuracy_and_clusters_match_a_hand_computation(tmp_path):
    from calver.cli import main

    pools = _pools(tmp_path)
    out = tmp_path / "report"
    rc = main(["eval", "--pool", str(pools["sft"]), "--pool", f"grpo={pools['grpo']}", "--by", "task",
               "--out", str(out), "--draws", "300", "--decomp_draws", "100", "--audits", "false",
               "--ladder", "false", "--figures", "false", "--selectors", "first", "plurality", "medoid", "calver"])
    assert rc == 0
    res = load_results(json.loads((out / "results.json").read_text()))
    assert isinstance(res, MultiEvalResult) and list(res.policies) == ["sft", "grpo"]
    hand = {name: _hand_calver(root) for name, root in pools.items()}
    values = [c for name in ("sft", "grpo") for _, c in hand[name].values()]
    sources = [s for name in ("sft", "grpo") for s, _ in hand[name].values()]
    assert res.pooled.n_units == 32 and res.pooled.accuracy["calver"].estimate == pytest.approx(np.mean(values))
    for name in ("sft", "grpo"):
        row = next(r for r in res.table if r.stratum == name)
        assert row.accuracy["calver"].estimate == pytest.approx(np.mean([c for _, c in hand[name].values()]))
    # an item sampled by both policies is one cluster
    assert res.pooled.n_clusters == len(set(sources)) == res.policies["sft"].n_clusters
    by_source = mean_ci(np.array(values, float), sources, draws=300, seed=0)
    by_policy_source = mean_ci(np.array(values, float), [f"{i // 16}/{s}" for i, s in enumerate(sources)],
                               draws=300, seed=0)
    got = res.pooled.accuracy["first"]
    first = [r.correct["first"] for r in res.pooled.units]
    assert got.n_clusters == len(set(sources))
    assert (got.ci_low, got.ci_high) == pytest.approx(
        (mean_ci(np.array(first, float), sources, draws=300, seed=0)["ci_low"],
         mean_ci(np.array(first, float), sources, draws=300, seed=0)["ci_high"]))
    assert by_source["n_clusters"] < by_policy_source["n_clusters"]
    # the Table 2 columns: CALVER - medoid and CALVER - plurality per policy and pooled
    assert [r.stratum for r in res.table] == ["sft", "grpo", "pooled"]
    assert all({"medoid", "plurality"} <= set(r.paired) for r in res.table)
    # the per-task breakdown: each stratum is the hand-computed mean over its units
    task_of = {p.id: p.task for p, _, _ in synthetic_units(n_units=16, k=8, seed=0, n_seeds=2)}
    rows = {r.stratum: r for r in res.breakdowns["task"].rows}
    assert set(rows) == set(task_of.values())
    for task, r in rows.items():
        mine = [c for name in ("sft", "grpo") for (pid, _), (_, c) in hand[name].items() if task_of[pid] == task]
        assert r.n_units == len(mine) and r.accuracy["calver"].estimate == pytest.approx(np.mean(mine))
    md = (out / "report.md").read_text()
    assert "## Policies" in md and "## Pooled over policies" in md and "## Breakdown by `task`" in md
    tables, problems = markdown_table_problems(md)
    assert tables >= 5 and not problems, problems
    assert (out / "policy_sft" / "report.md").exists() and (out / "policy_grpo" / "report.md").exists()


def test_different_problem_sets_need_union_and_the_report_says_so(tmp_path, capsys):
    from calver.cli import main

    a = synthetic_units(n_units=8, k=4, seed=0)
    b = synthetic_units(n_units=8, k=4, seed=3)
    pa, pb = write_pool(tmp_path / "a", a, k=4).root, write_pool(tmp_path / "b", b, k=4).root
    args = ["eval", "--pool", str(pa), "--pool", str(pb), "--out", str(tmp_path / "r"), "--draws", "50",
            "--decomp_draws", "50", "--audits", "false", "--ladder", "false", "--figures", "false"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "different problem sets" in err[0] and "--union" in err[0]
    assert main([*args, "--union"]) == 0
    assert "Union of different problem sets" in (tmp_path / "r" / "report.md").read_text()
    res = load_results(json.loads((tmp_path / "r" / "results.json").read_text()))
    assert res.union and res.problem_sets["shared"] < res.problem_sets["a"] + res.problem_sets["b"]


def test_pool_labels_and_refusals(tmp_path):
    pools = _pools(tmp_path)
    with pytest.raises(ValueError, match="given twice"):
        evaluate_pools([str(pools["sft"]), f"x={pools['sft']}"])
    other = Pool(pools["grpo"])
    manifest = other.manifest()
    manifest["model"] = {"id": "another-model"}
    other.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="different models"):
        evaluate_pools([f"p={pools['sft']}", f"p={pools['grpo']}"], draws=20, decomp_draws=20)
    with pytest.raises(ValueError, match="unknown breakdown field 'tsk'.*'task'"):
        evaluate_pools([str(pools["sft"]), str(pools["grpo"])], by=["tsk"])


def test_results_round_trip_through_the_typed_classes(tmp_path):
    pools = _pools(tmp_path)
    run_selection(Pool(pools["sft"]), ["medoid", "structure"])
    res = evaluate(str(pools["sft"]), SELECTORS, draws=100, decomp_draws=50, ks=(1, 2, 4, 8), audit_limit=20,
                   by=["task", "mode", "validity_class"])
    assert isinstance(res, EvalResult) and res.audits is not None and res.ladder is not None
    text = json.dumps(res.to_dict(), sort_keys=True)
    back = EvalResult.from_dict(json.loads(text))
    assert json.dumps(back.to_dict(), sort_keys=True) == text
    assert back.accuracy["calver"] == res.accuracy["calver"] and back.units == res.units
    assert back.audits.swap.distribution == res.audits.swap.distribution
    assert math.isinf(back.decomposition["all"].ratio) == math.isinf(res.decomposition["all"].ratio)
    multi = evaluate_pools([str(pools["sft"]), str(pools["grpo"])], ["first", "calver", "plurality"], by=["policy"],
                           draws=50, decomp_draws=50, audits=False, ladder=False)
    text = json.dumps(multi.to_dict(), sort_keys=True)
    assert json.dumps(MultiEvalResult.from_dict(json.loads(text)).to_dict(), sort_keys=True) == text
    with pytest.raises(ValueError, match="unknown field"):
        EvalResult.from_dict({**res.to_dict(), "bogus": 1})


def _reports(root: Path) -> dict[str, str]:
    """The eval report of the 'sft' pool and the demo report over both pools, as the golden files hold them."""
    from calver.demo.config import load_demo_config
    from calver.demo.report import build_report
    from calver.evaluation.units import load_units

    pools = _pools(root)
    evals = {}
    for name, pool_root in pools.items():
        run_selection(Pool(pool_root), ["medoid", "structure"])
        evals[name] = evaluate(str(pool_root), SELECTORS, draws=200, decomp_draws=100, seed=0, ks=(1, 2, 4, 8),
                               audit_limit=40)
    write_report(evals["sft"], root / "eval", figures=False)
    cfg = load_demo_config(None, quick=True, out=str(root / "run"), draws=200, decomp_draws=100, k=8)
    units = {n: load_units(str(r)) for n, r in pools.items()}
    build_report(cfg, root / "run", {"evaluations": evals}, pools, {"SFT policy": 1.0, "total": 2.0}, units)
    return {"eval_report.md": (root / "eval" / "report.md").read_text(),
            "demo_report.md": (root / "run" / "report" / "report.md").read_text(),
            "eval_results.json": (root / "eval" / "results.json").read_text()}


@require_modules("matplotlib")  # the demo report draws its K-curve panels
def test_reports_are_unchanged_for_one_pool(tmp_path):
    got = {k: v.replace(str(tmp_path), "<ROOT>") for k, v in _reports(tmp_path).items()}
    for name in ("eval_report.md", "demo_report.md"):
        assert got[name] == (GOLDEN / name).read_text(), name
        tables, problems = markdown_table_problems(got[name])
        assert tables >= 5 and not problems, (name, problems)
    old = json.loads((GOLDEN / "eval_results.json").read_text())
    new = json.loads(got["eval_results.json"])
    new["meta"].pop("seconds")

    def same(a, b, where="results"):  # every old value is still there; null and absent are the same
        if isinstance(a, dict):
            for k, v in a.items():
                assert v is None or k in b, f"{where}/{k} is gone"
                if k in b:
                    same(v, b[k], f"{where}/{k}")
        elif isinstance(a, list):
            assert len(a) == len(b), where
            for i, (x, y) in enumerate(zip(a, b)):
                same(x, y, f"{where}[{i}]")
        else:
            assert a == b, where

    same(old, new)


def test_breakdown_fields_and_bands():
    assert check_fields(["task", "task", "mode"]) == ["task", "mode"]
    with pytest.raises(ValueError, match="'policy'"):
        check_fields(["policy"])  # one pool has no policy field
    assert check_fields(["policy"], policy=True) == ["policy"]
    assert [ate_margin_band(x) for x in (0.0, 0.0099, 0.01, 0.05, 0.0999, 0.1, 3.0)] == [
        "[0, 0.01)", "[0, 0.01)", "[0.01, 0.05)", "[0.05, 0.1)", "[0.05, 0.1)", ">= 0.1", ">= 0.1"]


def test_missing_field_is_its_own_stratum(tmp_path):
    pools = _pools(tmp_path)
    res = evaluate(str(pools["sft"]), ["first", "calver", "plurality"], draws=50, decomp_draws=50, audits=False,
                   ladder=False, by=["people", "task"])
    people = res.breakdowns["people"]
    assert [r.stratum for r in people.rows] == ["n/a"] and people.n_missing == res.n_units
    assert sum(r.n_units for r in res.breakdowns["task"].rows) == res.n_units


def test_pools_from_a_yaml_list(tmp_path):
    from calver.cli import main

    pools = _pools(tmp_path)
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(f"pool: [{pools['sft']}, grpo={pools['grpo']}]\nby: [policy]\ndraws: 50\ndecomp_draws: 50\n"
                   "audits: false\nladder: false\nfigures: false\n")
    assert main(["eval", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 0
    res = load_results(json.loads((tmp_path / "r" / "results.json").read_text()))
    assert list(res.policies) == ["sft", "grpo"] and [r.stratum for r in res.breakdowns["policy"].rows] == [
        "grpo", "sft"]
    one = tmp_path / "one.yaml"
    one.write_text(f"pool: {pools['sft']}\naudits: false\nladder: false\nfigures: false\ndraws: 50\n")
    assert main(["eval", "--config", str(one), "--out", str(tmp_path / "r1")]) == 0
    assert isinstance(load_results(json.loads((tmp_path / "r1" / "results.json").read_text())), EvalResult)


def test_multi_pool_report_names_verification_modes_and_graph_recovery_per_policy(tmp_path):
    from fixtures import build_pool, level_problems

    from calver.data_gen.generators import validity_objects
    from calver.evaluation.report import write_multi_report

    constructed = level_problems("backdoor_set", 3, levels=(1,), all_levels=False)
    pools = {"sft": _pools(tmp_path)["sft"],  # supplied-graph units
             "l1": build_pool(str(tmp_path / "l1"), [(p, 0, validity_objects(p)[:3]) for p in constructed]).root}
    res = evaluate_pools([f"{k}={v}" for k, v in pools.items()], ["first", "calver", "plurality"], union=True,
                         by=["verification"], draws=50, decomp_draws=50, audits=False, ladder=False)
    assert res.policies["sft"].graph_recovery is None
    g = res.policies["l1"].graph_recovery
    assert g.n_units == len(constructed) and g.exact.estimate == 1.0 and g.f1.estimate == 1.0
    assert res.pooled.verification == {"source_graph": res.policies["sft"].n_units,
                                       "candidate_graph": len(constructed)}
    rows = {r.stratum: r for r in res.breakdowns["verification"].rows}
    assert rows["source_graph"].graph_recovery is None and rows["candidate_graph"].graph_recovery.n_units == 3
    text = json.dumps(res.to_dict(), sort_keys=True)
    assert json.dumps(MultiEvalResult.from_dict(json.loads(text)).to_dict(), sort_keys=True) == text
    write_multi_report(res, tmp_path / "report", figures=False)
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"Verification: source_graph {res.policies['sft'].n_units} units; candidate_graph 3 units." in md
    assert "## Graph recovery per policy (constructed-mode units)" in md and "| l1 | `calver` pick | 3 |" in md
    tables, problems = markdown_table_problems(md)
    assert not problems, problems
    sub = (tmp_path / "report" / "policy_l1" / "report.md").read_text()
    assert "## Graph recovery (constructed mode)" in sub and "Verification: candidate_graph 3 units." in sub


def test_shares_of_nothing_are_null_and_json_outs_write_or_exit_2(tmp_path, capsys):
    assert share(1, 4) == 0.25 and share(0, 0) is None and pct(share(0, 0)) == "n/a"
    out = tmp_path / "deep" / "er" / "r.json"
    assert write_json_out("x-report", {"solved": share(0, 0)}, str(out)) == 0
    assert json.loads(out.read_text()) == {"solved": None}
    assert write_json_out("x-report", {}, None) == 0
    assert write_json_out("x-report", {}, str(tmp_path)) == 2  # a folder: cannot be written as a file
    assert "calver x-report: error: cannot write" in capsys.readouterr().err
