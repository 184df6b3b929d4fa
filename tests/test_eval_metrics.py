"""Known-answer tests for the selection metrics on hand-built units."""

import itertools

import numpy as np
import pytest

from calver.evaluation.metrics import (
    auroc,
    calibration,
    calver_index,
    coverage,
    fragmented,
    invalid_unique_plurality,
    pick_scores,
    plurality_index,
    rankdata,
    repair_decomposition,
    selected_correct,
    within_pool_auroc,
)
from calver.evaluation.scaling import k_curve
from calver.evaluation.units import from_arrays


def test_plurality_earliest_first_occurrence_tie_rule():
    assert plurality_index(["a", "b", "b", "a"]) == 0  # tie a/b: a occurs first
    assert plurality_index(["b", "a", "a", "b"]) == 0
    assert plurality_index(["c", "a", "b", "b", "a"]) == 1  # a first occurs at 1, before b at 2
    assert plurality_index([None, None, "x"]) == 2  # unparsed answers cast no vote
    assert plurality_index([None, None]) == 0
    assert plurality_index([frozenset("UP"), frozenset("M"), frozenset("PU")]) == 0  # canonical keys


def test_calver_tie_rules():
    totals = [4, 6, 5, 6, 6]
    correct = [True, False, True, True, False]
    assert calver_index(totals, "first") == 1
    assert calver_index(totals, "best", correct) == 3
    assert calver_index(totals, "worst", correct) == 1
    assert calver_index([6, 6], "best", [False, False]) == 0
    with pytest.raises(ValueError):
        calver_index(totals, "median")


def test_accuracy_and_coverage():
    units = from_arrays([[6, 4], [4, 4], [5, 6]], [[True, False], [False, False], [False, True]], [["a", "b"]] * 3)
    assert selected_correct(units, [0, 0, 0]).tolist() == [1.0, 0.0, 0.0]
    assert selected_correct(units, [1, 9, 1]).tolist() == [0.0, 0.0, 1.0]  # out of range is wrong
    assert coverage(units).tolist() == [1.0, 0.0, 1.0]


def test_out_of_pool_selection_is_graded_on_its_answer():
    from fixtures import backdoor_problem, trace_for

    from calver.evaluation.units import unit_facts
    from calver.infer.selectors import Selection

    p = backdoor_problem()
    u = unit_facts(p, [trace_for(p, {"M"}), trace_for(p, set())])  # every candidate is invalid
    assert u.correct.tolist() == [False, False]
    assert selected_correct([u], [Selection(-1, (0.0, 0.0), "{U}")]).tolist() == [1.0]  # valid, not in the pool
    assert selected_correct([u], [Selection(-1, (0.0, 0.0), "{M}")]).tolist() == [0.0]
    assert selected_correct([u], [Selection(-1, (0.0, 0.0), None)]).tolist() == [0.0]  # nothing returned
    assert selected_correct([u], [{"index": -1, "answer": "{U, P}"}]).tolist() == [1.0]  # a stored row
    assert selected_correct([u], [-1]).tolist() == [0.0]  # a bare -1 carries no answer


def test_repair_decomposition_counts():
    a = [1, 1, 1, 0, 0, 1, 0]
    b = [0, 0, 1, 1, 0, 0, 0]
    d = repair_decomposition(a, b)
    assert (d["repairs"], d["new_errors"], d["both_correct"], d["both_wrong"]) == (3, 1, 1, 2)
    assert d["ratio"] == 3.0
    assert d["net_gain"] == pytest.approx(np.mean(a) - np.mean(b))
    assert repair_decomposition([1], [0])["ratio"] == float("inf")
    m = repair_decomposition(a, b, mask=[1, 0, 0, 1, 0, 0, 0])
    assert (m["n"], m["repairs"], m["new_errors"]) == (2, 1, 1)


def test_fragmentation_condition():
    # 3 x invalid M, 2 x valid U, 2 x valid UP, 1 x invalid {} -> fragmented; plurality picks M
    keys = ["M", "U", "M", "UP", "M", "U", "UP", "E"]
    corr = [k in ("U", "UP") for k in keys]
    (u,) = from_arrays([[4, 6, 4, 6, 4, 6, 6, 4]], [corr], [keys])
    assert fragmented(u) and invalid_unique_plurality(u)
    # a valid answer ties the invalid mass: not fragmented (strictly more mass is required)
    keys2 = ["M", "U", "M", "U"]
    (v,) = from_arrays([[4, 6, 4, 6]], [[False, True, False, True]], [keys2])
    assert not fragmented(v) and not invalid_unique_plurality(v)
    # no valid candidate: the condition is about pools that hold one
    (w,) = from_arrays([[4, 4]], [[False, False]], [["M", "M"]])
    assert not fragmented(w)


def test_rankdata_midranks_and_auroc_vs_bruteforce():
    assert rankdata(np.array([3, 1, 3, 2])).tolist() == [3.5, 1.0, 3.5, 2.0]
    rng = np.random.default_rng(0)
    s = rng.integers(0, 7, size=80)
    y = rng.random(80) < 0.4
    pos, neg = s[y], s[~y]
    brute = np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg)])
    assert auroc(s, y) == pytest.approx(brute, abs=1e-12)
    assert np.isnan(auroc([1, 2], [True, True]))


def test_within_pool_auroc_skips_pools_of_one_validity_and_missing_scores():
    from calver.evaluation.evaluate import evaluate_units
    from calver.infer.selectors import Selection

    units = from_arrays([[6, 4, 5], [4, 4, 4], [5, 6, 2], [6, 6, 6]],
                        [[True, False, False], [False, False, False], [False, True, True], [True, True, True]],
                        [["a", "b", "c"]] * 4)
    scores = [[0.9, 0.1, 0.5], [1.0, 2.0, 3.0], [0.2, 0.1, 0.3], None]
    vals, clusters = within_pool_auroc(units, scores)
    # unit 0: the valid candidate outranks both invalid ones; unit 2: 0.1 and 0.3 against 0.2 (1 of 2 pairs)
    assert vals == [1.0, 0.5] and len(clusters) == 2
    assert within_pool_auroc(units[:1], [[0.9, float("nan"), 0.5]]) == ([], [])
    assert pick_scores(3) is None and pick_scores({"index": 0, "scores": [1, None]})[0] == 1.0
    assert np.isnan(pick_scores({"index": 0, "scores": [1, None]})[1])
    # in calver eval: CALVER's own scores are the verifier totals, a scoring selector's its scores
    res = evaluate_units(units, {"calver": {u.key: int(np.argmax(u.totals)) for u in units},
                                 "plurality": {u.key: 0 for u in units},
                                 "prm": {u.key: Selection(0, tuple(s or (0.0, 0.0, 0.0))) for u, s in
                                         zip(units, scores)}}, draws=50, decomp_draws=50)
    assert set(res.within_pool_auroc) == {"calver", "prm"}
    want = np.mean([auroc(u.totals, u.correct) for u in (units[0], units[2])])
    assert res.within_pool_auroc["calver"].estimate == pytest.approx(want)
    assert res.within_pool_auroc["prm"].estimate == pytest.approx(0.75)
    assert res.within_pool_auroc["prm"].n_units == 2


def test_calibration_known_answer():
    scores = [6, 6, 6, 5, 4, 6, 3, 2]
    labels = [1, 1, 0, 1, 0, 1, 0, 0]
    c = calibration(scores, labels, threshold=6)
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (3, 1, 1, 3)
    assert c["precision"] == 0.75 and c["recall"] == 0.75 and c["fpr"] == 0.25 and c["coverage"] == 0.5
    assert 0.5 < c["auroc"] <= 1.0


def test_k_curve_on_hand_built_prefixes():
    # unit 0: the only valid candidate sits at index 2; unit 1: valid at index 0 and 3
    units = from_arrays(
        [[4, 4, 6, 4], [6, 4, 4, 6]],
        [[False, False, True, False], [True, False, False, True]],
        [["a", "a", "b", "a"], ["x", "y", "y", "z"]],
    )
    k = k_curve(units, ks=(1, 2, 4, 8), draws=200)
    assert k["ks"] == [1, 2, 4]
    assert k["accuracy"]["calver"] == [0.5, 0.5, 1.0]
    assert k["accuracy"]["first"] == [0.5, 0.5, 0.5]
    assert k["accuracy"]["plurality"] == [0.5, 0.5, 0.0]  # unit 1: y wins 2-1 at K=4
    assert k["coverage"] == [0.5, 0.5, 1.0]
    assert k["gap"][2]["mean_diff"] == pytest.approx(1.0)
    assert k["gap"][2]["draws"] == 200


def test_k_curve_with_injected_text_selector():
    units = from_arrays([[4, 6], [6, 4]], [[False, True], [True, False]], [["a", "b"], ["c", "d"]])
    k = k_curve(units, ks=(1, 2), selectors={}, text_selectors={"last": lambda texts, problem: len(texts) - 1})
    assert k["accuracy"]["last"] == [0.5, 0.5]
    assert k["gap"] == [None, None]
