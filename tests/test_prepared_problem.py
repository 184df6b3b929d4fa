"""`PreparedProblem` and the readers that build on it: scores through a prepared problem equal cold scores,
mutation of a caller's Problem is seen (plain) or cannot reach what is judged (prepared), the firewall's
strip keeps the parsed graph yet equals the old to_dict/from_dict strip, and a Pool keeps what it read.

Oracles: a trace scored cold on a ``copy.deepcopy`` of the problem (nothing memoized for that object), the
old strip path (``strip_problem(problem.to_dict())``: the dict path is the old code path verbatim), and
``read_jsonl`` / a fresh ``Pool`` for the pool's files.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pickle
import random
from pathlib import Path

import pytest
from fixtures import synthetic_units, write_pool

from calver.data_gen import GenConfig
from calver.data_gen.generators import available_tasks, canonical_trace, generate
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import FirewallError, make_views, strip_problem
from calver.infer.pool import Pool, read_jsonl
from calver.train.rewards import VerifierReward
from calver.verifier import (
    PreparedProblem,
    Problem,
    ProblemError,
    get_family,
    grade,
    parsers,
    prepare,
    problem_fingerprint,
    score,
    select,
)
from calver.verifier import memo as memos
from calver.verifier.contract import split_slots
from calver.verifier.scoring import is_grounded

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
TASKS = available_tasks()
PER_TASK = 24


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    out = []
    for i, task in enumerate(TASKS):
        out += generate(task, PER_TASK, GenConfig(seed=20 + i, n_nodes=(4, 8)))
    assert len(out) >= 200
    return out


def _traces(p: Problem, others: list[Problem], rng: random.Random) -> list[str]:
    """The canonical trace, slots swapped in from other problems of the task, and damaged variants."""
    gold = canonical_trace(p)
    out = [gold, gold.replace("ANSWER:", "ANSWER: {", 1), "\n".join(gold.splitlines()[:-2])]
    for other in rng.sample(others, min(3, len(others))):
        donor = split_slots(canonical_trace(other))
        for slot in ("GRAPH", "STRATEGY", "ANSWER", "DERIVATION"):
            if donor.get(slot) is not None:
                out.append(replace_slot(gold, slot, donor.get(slot)))
    return out


def _cold(trace: str, problem: Problem):
    return score(trace, copy.deepcopy(problem))


def _constructed(p: Problem) -> Problem:
    return dataclasses.replace(p, mode="constructed")


def _outcome(fn, *args):
    """``fn(*args)``, or the type and message of the ProblemError / FirewallError it raised."""
    try:
        return fn(*args)
    except (FirewallError, ProblemError) as e:
        return type(e), str(e)


# ---- scores ------------------------------------------------------------------------------------------
def test_prepared_scores_equal_cold_scores(problems):
    rng = random.Random(0)
    by_task: dict[str, list[Problem]] = {}
    for p in problems:
        by_task.setdefault(p.task, []).append(p)
    checked = 0
    for p in problems:
        others = [o for o in by_task[p.task] if o is not p]
        for q in (p, _constructed(p), strip_problem(_constructed(p))):  # grounded, and judged on its own GRAPH
            prepared = prepare(q)
            for t in _traces(p, others, rng):
                want = _cold(t, q)
                assert score(t, prepared) == want, (q.task, q.mode, t[:200])
                assert score(t, q) == want
                checked += 1
            assert is_grounded(prepared) == is_grounded(q) == want.grounded
            if q.graph is not None:  # (a graphless problem is not gradeable)
                answer = score(canonical_trace(p), prepared).answer
                assert grade(prepared, answer) == grade(copy.deepcopy(q), answer)
    assert checked > 2000


def test_select_takes_a_prepared_problem(problems):
    p = problems[0]
    traces = _traces(p, problems[1:4], random.Random(1))
    assert select(traces, prepare(p)) == select(traces, copy.deepcopy(p)) == 0


# ---- mutation and identity -------------------------------------------------------------------------
def _swap_query(p: Problem) -> bool:
    """Mutate ``p.query`` in place so the canonical trace stops matching; False when no swap applies."""
    q = p.query
    for a, b in (("treatment", "outcome"), ("source", "target"), ("x", "y")):
        if a in q and b in q:
            q[a], q[b] = q[b], q[a]
            return True
    return False


def test_mutating_the_callers_problem_changes_nothing_prepared(problems):
    seen = 0
    for p in problems:
        p = copy.deepcopy(p)
        trace = canonical_trace(p)
        prepared = prepare(p)
        before = score(trace, prepared)
        assert before.total == 6
        if not _swap_query(p):
            continue
        p.meta["validity_class"] = []
        p.data["injected"] = 1
        assert score(trace, prepared) == before
        assert prepared.problem.query != p.query
        seen += 1
    assert seen > 100


def test_in_place_mutation_of_a_plain_problem_is_seen(problems):
    """The old scorer keyed its memo by id(problem): a problem mutated in place kept its stale query."""
    seen = 0
    for p in problems:
        p = copy.deepcopy(p)
        trace = canonical_trace(p)
        assert score(trace, p).total == 6
        if not _swap_query(p):
            continue
        try:
            want = _cold(trace, p)
        except ProblemError:
            with pytest.raises(ProblemError):
                score(trace, p)
            continue
        assert score(trace, p) == want and want.total < 6
        seen += 1
    assert seen > 50


def test_in_place_mutation_of_family_data_is_seen():
    """K&K and ATE memoize on the problem object too: they are handed the prepared copy."""
    edits = {"kk": lambda d: d["statements"].update(Bob="knave(Alice)"),
             "ate": lambda d: d["cpts"].__setitem__(-1, "P(Y=1 | Z=1, X=1) = 0.1")}
    for name, edit in edits.items():
        p = Problem.from_dict(json.loads((EXAMPLES / f"{name}_problem.json").read_text()))
        trace = (EXAMPLES / f"{name}_trace.txt").read_text()
        prepared = prepare(p)
        assert score(trace, p).total == 6
        edit(p.data)
        want = _cold(trace, p)
        assert want.total < 6 and score(trace, p) == want
        assert score(trace, prepared).total == 6


def test_reused_ids_get_their_own_answers(problems):
    """Problems created and dropped in a loop (ids recycled once the memos are dropped) score as cold."""
    rng = random.Random(2)
    seen_ids: set[int] = set()
    collided = False
    for i in range(300):
        p = copy.deepcopy(problems[rng.randrange(len(problems))])
        collided |= id(p) in seen_ids
        seen_ids.add(id(p))
        t = canonical_trace(problems[rng.randrange(len(problems))])
        assert score(t, p) == _cold(t, p)
        del p
        if i % 3 == 0:
            memos.clear_all()  # drops the identity cache, so the object can be freed and its id reused
    assert collided


# ---- the PreparedProblem object -------------------------------------------------------------------
def test_prepared_object_contract(problems):
    p = problems[0]
    prepared = prepare(p)
    assert prepare(prepared) is prepared and prepare(p) is prepared  # the unchanged object: found again
    assert prepared.problem is not p and prepared.problem == p and prepared.graph is p.graph
    assert (prepared.task, prepared.mode, prepared.id, prepared.variables) == (p.task, p.mode, p.id, p.variables)
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.query = {}
    with pytest.raises(TypeError):
        prepared.query["variant"] = "x"
    assert dict(prepared.query) == get_family(p.task).normalize_query(p)
    again = pickle.loads(pickle.dumps(prepared))
    assert isinstance(again, PreparedProblem) and again.fingerprint == prepared.fingerprint
    assert score(canonical_trace(p), again) == score(canonical_trace(p), prepared)


def test_fingerprint_is_a_content_hash(problems):
    d = json.loads((EXAMPLES / "backdoor_problem.json").read_text())
    p = Problem.from_dict(d)
    text = json.dumps(p.to_dict(), sort_keys=True, ensure_ascii=False)
    assert problem_fingerprint(p) == hashlib.sha256(text.encode()).hexdigest() == prepare(p).fingerprint
    assert problem_fingerprint(Problem.from_dict(json.loads(json.dumps(d)))) == problem_fingerprint(p)
    fps = {problem_fingerprint(q) for q in problems}
    assert len(fps) == len({json.dumps(q.to_dict(), sort_keys=True, default=sorted) for q in problems})
    for change in ({"id": "other"}, {"query": {**p.query, "variant": "minimal"}}, {"meta": {"x": 1}},
                   {"data": {"s": {1, 2}}}):
        assert problem_fingerprint(dataclasses.replace(p, **change)) != problem_fingerprint(p)
    assert problem_fingerprint(dataclasses.replace(p, data={"s": {2, 1}})) == \
        problem_fingerprint(dataclasses.replace(p, data={"s": [1, 2]}))


def test_prepare_refuses_as_score_does(monkeypatch):
    d = json.loads((EXAMPLES / "backdoor_problem.json").read_text())
    bad = Problem.from_dict({**d, "query": {**d["query"], "varient": "any"}})
    with pytest.raises(ProblemError) as a:
        prepare(bad)
    with pytest.raises(ProblemError) as b:
        score("GRAPH: X -> Y", bad)
    assert str(a.value) == str(b.value) and "varient" in str(a.value)
    unknown = Problem(task="no_such_task", query={})
    with pytest.raises(KeyError):
        prepare(unknown)
    assert score("x", unknown).bits == [0] * 6 and select(["x", "y"], unknown) == 0
    fam = type(get_family("backdoor_set"))

    def odd(self, problem):
        raise TypeError("a family bug")

    monkeypatch.setattr(fam, "normalize_query", odd)
    for call in (prepare, lambda q: score("GRAPH: X -> Y", q)):
        with pytest.raises(ProblemError, match="malformed backdoor_set problem: TypeError: a family bug"):
            call(Problem.from_dict(d))


def test_slot_memos_of_held_problems_follow_the_budget(memo_budget):
    p = Problem.from_dict(json.loads((EXAMPLES / "backdoor_problem.json").read_text()))
    prepared = prepare(p)
    gold = (EXAMPLES / "backdoor_trace.txt").read_text()
    want = score(gold, copy.deepcopy(p))
    memo_budget(200_000)
    for i in range(300):
        t = replace_slot(gold, "GRAPH", "Z -> X, Z -> Y, X -> Y, " + ", ".join(f"N{i}_{j} -> Y" for j in range(40)))
        score(t, prepared)
        assert memos.usage()[0] <= 200_000
    assert len(prepared.memo) < 150
    assert score(gold, prepared) == want
    memos.clear_all()
    assert not prepared.memo


# ---- the firewall ---------------------------------------------------------------------------------
def _shape(p: Problem):
    """Everything a stripped problem holds: its JSON form and its graph's content (node order aside)."""
    g = p.graph
    return p.to_dict(), (None if g is None else (set(g.nodes), g.directed, g.bidirected, g.kind)), p.variables


def test_strip_equals_the_old_round_trip_without_a_parse(problems, monkeypatch):
    """The old strip rendered the graph and parsed it back (``strip_problem(p.to_dict())`` still does):
    the same problem, but its graph's node order was the text's. Now the graph is the problem's own."""
    calls = []
    real = parsers.parse_graph
    monkeypatch.setattr(parsers, "parse_graph", lambda *a, **k: calls.append(a) or real(*a, **k))
    rng = random.Random(4)
    n = 0
    for p in problems:
        for q in (p, _constructed(p)):
            old = strip_problem(q.to_dict())
            parsed = len(calls)
            new = strip_problem(q)
            assert len(calls) == parsed  # the Problem's graph object is kept, not re-parsed
            assert _shape(new) == _shape(old), (q.id, q.mode)
            assert new.graph is (q.graph if q.mode == "supplied" else None)
            for t in _traces(p, problems[:3], rng)[:4]:
                assert score(t, new) == score(t, old)
            n += 1
    assert n == 2 * len(problems) and calls
    # a problem read back from its JSON (as a pool's are): the old re-parse gave this very graph
    for p in problems[:50]:
        q = Problem.from_dict(json.loads(json.dumps(p.to_dict(), default=sorted)))
        assert strip_problem(q).graph is q.graph and strip_problem(q.to_dict()).graph.nodes == q.graph.nodes


def test_strip_refuses_as_before():
    p = Problem.from_dict(json.loads((EXAMPLES / "backdoor_problem.json").read_text()))
    cases = [dataclasses.replace(p, text={"a": 1}),  # text must be a string
             dataclasses.replace(p, query={**p.query, "gold": "{Z}", "label_x": 1}),
             dataclasses.replace(p, data={"solution": 1, "x": [{"valid_sets": 2, "y": 3}], "split": "t"}),
             dataclasses.replace(p, graph_class="ADMG"),  # another class than the graph's: parsed as before
             dataclasses.replace(p, id=7)]
    for q in cases:
        new, old = (_outcome(lambda a: _shape(strip_problem(a)), arg) for arg in (q, q.to_dict()))
        assert new == old, q
    assert strip_problem(cases[3]).graph.kind.value == "ADMG"


def test_views_of_one_problem_share_one_prepared_problem(tmp_path):
    units = synthetic_units(6, 4, seed=3, n_seeds=2)
    pool = write_pool(tmp_path / "pool", units, 4)
    views = make_views(pool)
    by_id: dict[str, list] = {}
    for v in views:
        by_id.setdefault(v.problem_id, []).append(v)
    assert any(len(vs) == 2 for vs in by_id.values())
    for vs in by_id.values():
        assert all(v.prepared is vs[0].prepared for v in vs)
        for v in vs:
            assert [score(t, v.prepared) for t in v.texts] == [_cold(t, v.problem) for t in v.texts]


# ---- the pool reader ------------------------------------------------------------------------------
def test_pool_keeps_what_it_read_and_rereads_changes(tmp_path, monkeypatch):
    units = synthetic_units(8, 4, seed=1)
    root = tmp_path / "pool"
    write_pool(root, units, 4)
    pool = Pool(root)

    def fresh():
        rows = list(read_jsonl(root / "problems.jsonl"))
        cands = list(read_jsonl(root / "candidates.jsonl"))
        return rows, cands, json.loads((root / "manifest.json").read_text())

    rows, cands, manifest = fresh()
    want = {r["problem"]["id"]: Problem.from_dict(r["problem"]).to_dict() for r in rows}
    parses = []
    real = parsers.parse_graph
    monkeypatch.setattr(parsers, "parse_graph", lambda *a, **k: parses.append(a) or real(*a, **k))
    for _ in range(3):
        assert pool.problem_rows() == rows and pool.manifest() == manifest
        assert list(pool.candidate_rows()) == cands
        assert {pid: p.to_dict() for pid, p in pool.problems().items()} == want
        assert pool.labels() == {r["problem"]["id"]: r.get("labels", {}) for r in rows}
        got = pool.units()
        assert [(u.problem_id, u.seed, u.texts) for u in got] == [(p.id, s, t) for p, s, t in units]
        assert [u.texts for u in pool.units(2)] == [t[:2] for _, _, t in units]
    assert len(parses) == len(rows)  # each problem's graph parsed once
    # what a caller gets is its own
    pool.problem_rows()[0]["problem"]["query"]["treatment"] = "changed"
    pool.problems()[rows[0]["problem"]["id"]].query["treatment"] = "changed"
    pool.manifest()["sampling"]["k"] = 99
    pool.units()[0].rows[0]["text"] = "changed"
    next(pool.candidate_rows())["text"] = "changed"
    pool.labels()[rows[0]["problem"]["id"]]["x"] = 1
    assert pool.problem_rows() == rows and pool.manifest() == manifest and list(pool.candidate_rows()) == cands
    assert {pid: p.to_dict() for pid, p in pool.problems().items()} == want
    assert pool.units()[0].rows[0]["text"] == cands[0]["text"] and pool.labels() == {r["problem"]["id"]: {}
                                                                                      for r in rows}
    # another writer: the files change, and the pool reads them again
    other = Pool(root)
    other.append_candidates([{**cands[0], "seed": 9, "text": "appended"}])
    other.write_manifest({**manifest, "note": "rewritten"})
    keep = units[:3]
    other.write_problems([p for p, _, _ in keep])
    assert [u.texts for u in pool.units() if u.seed == 9] == [["appended"]]
    assert pool.manifest()["note"] == "rewritten"
    assert set(pool.problems()) == {p.id for p, _, _ in keep} and pool.problem_rows() == fresh()[0]
    # this instance's own writes
    pool.rewrite_candidates(cands)
    assert list(pool.candidate_rows()) == cands and not [u for u in pool.units() if u.seed == 9]


# ---- the reward ------------------------------------------------------------------------------------
def test_reward_caches_prepared_problems():
    pj = (EXAMPLES / "backdoor_problem.json").read_text()
    trace = (EXAMPLES / "backdoor_trace.txt").read_text()
    reward = VerifierReward()
    got = reward.problem(pj)
    assert isinstance(got, PreparedProblem) and reward.problem(pj) is got
    assert reward(completions=[trace, "junk"], problem_json=[pj, pj]) == [1.0, 0.0]
    assert reward.problem(json.dumps({"task": "backdoor_set", "query": {"treatment": "X"}})).startswith("malformed")
