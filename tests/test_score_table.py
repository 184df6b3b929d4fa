"""The pool's score table (``calver.infer.score_table``): rows equal fresh scores for every task, a
stored table is read instead of rescored, staleness (scorer version, problem, text) and corruption are
detected loudly, an interrupted write keeps the old table, and selections do not change with it."""

from __future__ import annotations

import dataclasses
import gc
import json
import random

import pytest
from fixtures import count_score_calls, level_problems, sample_problem, write_pool

import calver.infer.score_table as st
from calver.data_gen import GenConfig
from calver.data_gen.generators import generate, validity_objects
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import make_views, strip_problem
from calver.infer.pool import Pool
from calver.infer.score_table import (
    ScoreTableError,
    ScoreTableWarning,
    StaleScoreTableError,
    read_score_table,
    score_table,
    source_verdicts,
)
from calver.infer.selectors import NEURAL, SELECTORS, answer_key
from calver.verifier import families, get_family, problem_fingerprint, score

K = 7
# ---- a pool over every registered task ---------------------------------------------------------
def _texts(problem, valid) -> list[str]:
    fam = get_family(problem.task)
    a = fam.canonical_trace(problem, valid[0])
    b = fam.canonical_trace(problem, valid[-1])
    lines = a.splitlines()
    return [a, b, "\n".join(lines[: len(lines) // 2]), replace_slot(a, "ANSWER", "none"), "no trace at all", "", a]


def _problems():
    rng = random.Random("score-table")
    out = [sample_problem(t, rng) for t in families() if t != "knights_knaves"]
    out += [(p, validity_objects(p)) for p in generate("knights_knaves", 2, GenConfig(seed=3))]
    out += [(p, validity_objects(p)) for p in level_problems("backdoor_set", 1)]  # constructed mode
    return out


@pytest.fixture(scope="module")
def spec():
    units = []
    for p, valid in _problems():
        texts = _texts(p, valid)
        units += [(p, 0, texts), (p, 1, texts[::-1])]
    return units


@pytest.fixture
def pool(spec, tmp_path) -> Pool:
    st._LIVE.clear()  # no table from another test
    return write_pool(tmp_path / "pool", spec, K)


def _forget() -> None:
    """Drop the in-process table, as a new process would."""
    gc.collect()
    st._LIVE.clear()


def test_rows_equal_fresh_scores_for_every_task(pool, spec):
    assert {p.task for p, _, _ in spec} == set(families())
    table = score_table(pool)
    assert table.written and table.n_read == 0 and table.n_scored == len({(p.id, t) for p, _, ts in spec for t in ts})
    _forget()
    stored = read_score_table(pool)
    assert stored.n_scored == 0 and stored.n_read == len(spec) * K
    parsed_tasks = set()
    for p, seed, texts in spec:
        sp = strip_problem(p)
        fresh = [score(t, sp) for t in texts]
        assert stored.verdicts((p.id, seed)) == fresh == table.verdicts((p.id, seed))
        for c, ts in zip(stored[(p.id, seed)], fresh):
            assert (list(c.bits), c.total, dict(c.reasons), c.answer, c.grounded) == \
                   (ts.bits, ts.total, ts.reasons, ts.answer, ts.grounded)
            assert c.answer_key == answer_key(p.task, ts.answer)
            if ts.answer is not None:
                parsed_tasks.add(p.task)
                fam = get_family(p.task)
                back = fam.object_from_json(json.loads(json.dumps(fam.object_to_json(ts.answer))))
                assert back == ts.answer and fam.canonical_answer_key(back) == fam.canonical_answer_key(ts.answer)
    assert parsed_tasks == set(families())  # the answer round trip ran for every family
    grounded = {c.grounded for u in stored for c in stored[u]}
    assert grounded == {True, False}  # the constructed-mode problems are judged on the trace's own graph


def test_a_stored_table_is_read_not_rescored(pool, monkeypatch):
    from calver.evaluation.scaling import registry_prefix_selections
    from calver.evaluation.units import load_units
    from calver.infer.select import run_selection
    from calver.infer.selectors import NON_NEURAL

    calls = count_score_calls(monkeypatch)
    units = load_units(pool)
    first = sum(calls.values())
    assert first and max(calls.values()) == 1  # each distinct (text, problem) once
    run_selection(pool, list(NON_NEURAL))
    registry_prefix_selections(pool, units, list(NON_NEURAL), [1, 2, 4, None])
    assert sum(calls.values()) == first  # the live table and the units' scores serve selection and prefixes
    _forget()
    units2 = load_units(pool)
    rows = run_selection(pool, list(NON_NEURAL), 4)
    registry_prefix_selections(pool, units2, list(NON_NEURAL), [2, None])
    assert sum(calls.values()) == first and rows  # read from disk: nothing scored
    assert [u.totals.tolist() for u in units2] == [u.totals.tolist() for u in units]
    assert [u.answer_keys for u in units2] == [u.answer_keys for u in units]


def test_memo_shares_repeated_texts_across_pools(pool, spec, tmp_path, monkeypatch):
    other = write_pool(tmp_path / "other", spec, K)
    memo: dict = {}
    score_table(pool, memo=memo)
    calls = count_score_calls(monkeypatch)
    t = score_table(other, memo=memo)
    assert sum(calls.values()) == 0 and t.n_scored == 0 and t.written


def test_changed_scorer_version_is_detected(pool, monkeypatch):
    score_table(pool)
    old = read_score_table(pool).scorer_version
    new = {**old, "source_hash": "sha256:" + "0" * 64}
    monkeypatch.setattr(st, "scorer_version", lambda: new)
    with pytest.raises(StaleScoreTableError, match="scorer version changed") as e:
        read_score_table(pool)
    assert old["source_hash"] in str(e.value) and new["source_hash"] in str(e.value)
    logged: list[str] = []
    with pytest.warns(ScoreTableWarning, match="scorer version changed") as w:
        t = score_table(pool, log=logged.append)
    assert len(w) == 1 and str(pool.root / "scores" / "verifier.jsonl") in str(w[0].message)
    assert old["source_hash"] in str(w[0].message) and any("scorer version changed" in m for m in logged)
    assert t.rescored_reason and t.n_read == 0 and t.n_scored > 0 and t.written
    meta = json.loads((pool.root / "scores" / "verifier.meta.json").read_text())
    assert meta["scorer_version"] == new
    assert read_score_table(pool).n_read == t.n_candidates  # current again under the new version


def test_changed_problem_or_text_is_detected(pool, spec):
    score_table(pool)
    p0 = spec[0][0]
    problems = [p for p, s, _ in spec if s == 0]
    # meta is stripped before scoring: changing it changes nothing the table depends on
    pool.write_problems([p if p.id != p0.id else _with_meta(p) for p in problems])
    _forget()
    assert read_score_table(pool).n_read == len(spec) * K
    changed = _with_query(p0)
    pool.write_problems([changed if p.id == p0.id else p for p in problems])
    _forget()
    with pytest.raises(StaleScoreTableError, match=f"1 problem.*changed.*{p0.id}"):
        read_score_table(pool)
    with pytest.warns(ScoreTableWarning, match=f"problem.*changed.*{p0.id}"):
        t = score_table(pool)
    assert t.n_scored == len(set(spec[0][2])) and t.n_read == (len(spec) - 2) * K
    assert t.verdicts((p0.id, 0)) == [score(x, strip_problem(changed)) for x in spec[0][2]]
    rows = list(pool.candidate_rows())
    rows[3]["text"] += "\nedited"
    pool.rewrite_candidates(rows)
    _forget()
    with pytest.raises(StaleScoreTableError, match="1 candidate text"):
        read_score_table(pool)
    with pytest.warns(ScoreTableWarning, match=f"1 candidate text.*{rows[3]['problem_id']}"):
        t = score_table(pool)
    assert t.n_scored == 1 and t.n_read == len(spec) * K - 1
    read_score_table(pool)


def _with_meta(p):
    return dataclasses.replace(p, meta={**p.meta, "note": "edited"})


def _with_query(p):
    return dataclasses.replace(p, text=(p.text or "") + " (reworded)")


def test_interrupted_write_keeps_the_old_table(pool, monkeypatch):
    score_table(pool)
    d = pool.root / "scores"
    before = {f.name: f.read_bytes() for f in d.iterdir()}
    monkeypatch.setattr(st, "scorer_version", lambda: {"contract_version": "x", "source_hash": "changed"})
    real = st.os.replace

    def killed(*a, **k):
        raise KeyboardInterrupt

    with monkeypatch.context() as m, pytest.warns(ScoreTableWarning):
        m.setattr(st.os, "replace", killed)
        with pytest.raises(KeyboardInterrupt):
            score_table(pool)
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before  # old table intact, no tmp file left
    # killed between the two files: new rows, old meta -> read as corrupt, never reused
    rows = list(pool.candidate_rows())
    rows[0]["text"] += "\nedited"  # so that the new rows differ from the old
    pool.rewrite_candidates(rows)
    seen = []

    def second_killed(src, dst):
        seen.append(dst)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(src, dst)

    _forget()
    with monkeypatch.context() as m, pytest.warns(ScoreTableWarning):
        m.setattr(st.os, "replace", second_killed)
        with pytest.raises(KeyboardInterrupt):
            score_table(pool)
    assert sorted(f.name for f in d.iterdir()) == sorted(before)
    _forget()
    with pytest.raises(ScoreTableError, match="does not match the hash"):
        read_score_table(pool)
    with pytest.warns(ScoreTableWarning, match="corrupt"):
        assert score_table(pool).n_scored > 0
    read_score_table(pool)


@pytest.mark.parametrize("damage", ["garbage", "meta", "row"])
def test_a_corrupt_table_is_rescored_loudly(pool, damage):
    score_table(pool)
    _forget()
    rows_p, meta_p = pool.root / "scores" / "verifier.jsonl", pool.root / "scores" / "verifier.meta.json"
    if damage == "garbage":
        rows_p.write_text("{not json\n")
    elif damage == "meta":
        meta_p.write_text("[]")
    else:  # a well-formed file whose row is not a score (its meta hash updated to match)
        lines = rows_p.read_text().splitlines()
        r = json.loads(lines[0])
        r["bits"] = [2, 0, 0, 0, 0, 0]
        lines[0] = json.dumps(r)
        rows_p.write_text("\n".join(lines) + "\n")
        meta = json.loads(meta_p.read_text())
        import hashlib

        meta["rows_sha256"] = "sha256:" + hashlib.sha256(rows_p.read_bytes()).hexdigest()
        meta_p.write_text(json.dumps(meta))
    with pytest.raises(ScoreTableError, match="corrupt"):
        read_score_table(pool)
    with pytest.warns(ScoreTableWarning, match="corrupt"):
        t = score_table(pool)
    assert t.rescored_reason and t.n_read == 0 and t.written
    read_score_table(pool)


def test_missing_table_and_unwritable_pool(pool, monkeypatch):
    with pytest.raises(ScoreTableError, match="no score table"):
        read_score_table(pool)

    def denied(*a, **k):
        raise PermissionError("read-only")

    with monkeypatch.context() as m, pytest.warns(ScoreTableWarning, match="could not write"):
        m.setattr(st, "_atomic_write", denied)
        t = score_table(pool)
    assert not t.written and t.n_scored > 0
    assert score_table(pool).written  # the in-memory table is stored once the pool is writable


def test_a_frozen_pool_gets_its_table(pool):
    pool.freeze()
    assert score_table(pool).written and read_score_table(pool).n_read == pool_size(pool)


def pool_size(pool) -> int:
    return sum(len(u.texts) for u in pool.units())


def _same(a, b) -> bool:
    return (a.index, a.answer) == (b.index, b.answer) and len(a.scores) == len(b.scores) and all(
        x == y or (x != x and y != y) for x, y in zip(a.scores, b.scores))


@pytest.mark.parametrize("k", [None, 3])
def test_every_selector_selects_the_same_with_and_without_the_table(pool, k):
    from calver.infer.select import run_selector

    rng = random.Random(0)
    for name in NEURAL:  # neural selectors re-select from stored scores
        pool.write_selection(name, [{"problem_id": u.problem_id, "seed": u.seed, "index": 0,
                                     "scores": [rng.random() for _ in u.texts]} for u in pool.units()])
    score_table(pool)
    _forget()
    table = read_score_table(pool)  # the stored rows: no slots, no parsed graphs
    for name, sel in SELECTORS.items():
        plain = make_views(pool, k, comparators=NEURAL)
        primed = table.with_verdicts(make_views(pool, k, comparators=NEURAL))
        assert all(v.verdicts is not None and len(v.verdicts) == v.k for v in primed)
        a, b = run_selector(sel, plain), run_selector(sel, primed)
        assert all(_same(x, y) for x, y in zip(a, b)), name


def test_prime_refuses_a_view_of_other_texts(pool):
    table = score_table(pool)
    views = make_views(pool)
    object.__setattr__(views[0], "texts", ("other",) + views[0].texts[1:])
    with pytest.raises(ScoreTableError, match="not the score table's"):
        table.with_verdicts(views)


def test_prm_labels_come_from_the_table(pool, monkeypatch):
    from calver.train.prm import prm_examples

    score_table(pool)
    _forget()
    calls = count_score_calls(monkeypatch)
    ex = prm_examples([pool.root])
    full = pool.problems()
    by_fp = {problem_fingerprint(p): p for p in full.values()}
    # grounded scores are read from the table; only the constructed-mode candidates the stripped view
    # cannot ground are scored, on the full problem (its source graph)
    assert calls and {by_fp[fp].mode for _, fp in calls} == {"constructed"}
    assert len(ex) == pool_size(pool)
    for e in ex:
        assert e["label"] == score(e["trace"], full[e["problem_id"].split("::")[1]]).total


class Echo:
    """A sampler stub that answers every prompt with a text the unit already holds."""

    def __init__(self, text: str):
        self.text = text

    def generate(self, prompts, cfg=None, seeds=None, **kw):
        from calver.infer.sampler import Completion

        return [[Completion(self.text, "stop", 3, None) for _ in range(cfg.n)] for _ in prompts]

    def encode(self, prompt):
        return [0]


def test_refinement_round_zero_reads_the_table(spec, tmp_path, monkeypatch):
    from calver.infer.refine.refine import RefineConfig, refine_pool

    spec = [(p, seed, texts[2:6] if seed == 0 else texts[1:5]) for p, seed, texts in spec]  # no canonical trace
    pool = write_pool(tmp_path / "refine", spec, 4)
    score_table(pool)
    _forget()
    calls = count_score_calls(monkeypatch)
    states = refine_pool(pool, Echo("no trace at all"), RefineConfig(rounds=1, baseline=True))
    assert states and any(s["rounds"] for s in states)
    # only feedback on a stored (parse-less) candidate scores it again, once; repeated texts never are
    assert calls and all(n == 1 for n in calls.values())
    assert all(t == "no trace at all" or t in {x for _, _, ts in spec for x in ts} for t, _ in calls)


def test_eval_results_do_not_depend_on_the_table(pool, monkeypatch):
    """``calver eval`` with the table built in the run (full scores in memory) and read from disk
    (stored rows, no parse) reports the same numbers, audits and ladder included; from the stored
    table only the swap audit's ungrounded candidates (judged on their own graph, which a row does not
    hold) and damage_witness (audits.py: it takes no score) score a pool candidate again."""
    from calver.evaluation.evaluate import evaluate
    from calver.evaluation.results import to_json

    def run() -> str:
        _forget()
        d = to_json(evaluate(str(pool.root), draws=100, decomp_draws=100, ks=(1, 2, 4)))
        d["meta"].pop("seconds", None)
        return json.dumps(d, sort_keys=True, default=str)

    fresh = run()
    table = read_score_table(pool)  # written by the eval
    calls = count_score_calls(monkeypatch)
    assert run() == fresh
    problems = pool.problems()
    fps = {problem_fingerprint(strip_problem(p)): pid for pid, p in problems.items()}
    grounded = {(t, pid): c.grounded for u in pool.units() for t, c in zip(u.texts, table[(u.problem_id, u.seed)])
                for pid in [u.problem_id]}
    again = [(t, fps[fp]) for t, fp in calls if fp in fps and (t, fps[fp]) in grounded]
    assert not any(grounded[k] for k in again)


def test_shuffled_control_reuses_scores(pool, monkeypatch):
    from calver.evaluation.policy import shuffled_control
    from calver.evaluation.units import load_units

    units = load_units(pool)
    calls = count_score_calls(monkeypatch)
    res = shuffled_control(units, shuffles=3, draws=50)
    assert max(calls.values()) == 1  # a derangement repeats pairs across shuffles: each scored once
    _forget()
    assert to_plain(shuffled_control(load_units(pool), shuffles=3, draws=50)) == to_plain(res)


def to_plain(x) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def test_source_verdicts_take_the_table_where_grounded_and_the_source_elsewhere(tmp_path):
    """A trainer's verdicts (GRPO prompt filter, PRM labels): the score table's for a supplied problem; for a
    constructed one, whose view hides the graph (the table scores the trace's own GRAPH), ``score`` on the
    source -- so a trace that invents its graph earns nothing there."""
    from fixtures import build_pool

    supplied, supplied_objs = sample_problem("backdoor_set", random.Random(5))
    constructed = level_problems("backdoor_set", 1, levels=(1,))[0]
    fam = get_family("backdoor_set")
    obj = fam.validity_class(constructed.graph, fam.normalize_query(constructed))[0]
    honest = fam.canonical_trace(constructed, obj)
    invented = replace_slot(honest, "GRAPH", ", ".join(constructed.graph.nodes))  # no edges: every set is valid
    given = [fam.canonical_trace(supplied, o) for o in supplied_objs[:1]] + ["GRAPH: nonsense"]
    pool = build_pool(str(tmp_path / "pool"), [(supplied, 0, given), (constructed, 0, [honest, invented])],
                      raw_texts=True)
    got = source_verdicts(pool.root)
    table = score_table(pool.root)
    assert [row["problem_id"] for row, _, _ in got] == [supplied.id] * 2 + [constructed.id] * 2
    for row, prob, verdict in got:
        stored = table.candidate(row["problem_id"], int(row["seed"]), int(row["candidate_index"]))
        assert verdict == (stored if stored.grounded else score(row["text"], prob)) and verdict.grounded
        assert prob.id == row["problem_id"]
    assert not table.candidate(constructed.id, 0, 1).grounded
    assert [v.total for _, _, v in got[:3]] == [6, 0, 6]
    assert got[3][2].bits[0] == 0  # the invented graph fails on the source
