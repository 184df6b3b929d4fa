"""The label firewall: every forbidden field, injected anywhere a selector's input comes from, is
removed before any selector (or the model behind a neural one) sees it, or the run refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures import synthetic_units, write_pool

from calver.infer.firewall import (
    FORBIDDEN_KEYS,
    FirewallError,
    SelectorView,
    check_view,
    find_forbidden,
    make_views,
    scrub,
    strip_problem,
    view_hash,
)
from calver.infer.pool import Pool, read_jsonl
from calver.infer.sampler import Completion
from calver.infer.select import run_selection, run_selector
from calver.infer.selectors import SELECTORS, Selection, Selector, build_selector
from calver.verifier import CausalGraph, Problem, get_family

K = 4
SENTINEL = "LEAK-7f3a"


# ---- fakes for the neural selectors: they record what reaches "the model" ------------------------
class FakeSampler:
    backend = "fake"

    def __init__(self, reply: str):
        self.reply, self.seen = reply, []

    def generate(self, prompts, cfg=None, seeds=None, *, progress=None):
        self.seen += prompts
        return [[Completion(self.reply, "stop", 1, -0.1)] for _ in prompts]

    def close(self):
        pass


class FakeRM:
    def __init__(self):
        self.seen = []

    def text(self, prompt, trace):
        return trace if prompt is None else f"{prompt}\n\n{trace}"

    def score_texts(self, texts):
        self.seen += texts
        return [float(len(t) % 7) for t in texts]


class FakePRM:
    def __init__(self):
        self.seen = []

    def score(self, problem_text, trace):
        self.seen.append((problem_text, trace))
        return float(len(trace) % 5)


class Spy(Selector):
    """Records every view the wrapped selector receives."""

    def __init__(self, inner: Selector):
        self.inner, self.name, self.neural, self.views = inner, inner.name, inner.neural, []

    def has_model(self):
        return self.inner.has_model()

    def select_many(self, views):
        self.views += list(views)
        return self.inner.select_many(views)


def model_backed():
    handles = {
        "confidence": {"sampler": FakeSampler("yes")},
        "judge": {"sampler": FakeSampler("SCORE: 7")},
        "reward_model": {"scorer": FakeRM()},
        "reward_model_trace": {"scorer": FakeRM()},
        "prm": {"scorer": FakePRM()},
    }
    return {n: (build_selector(n, **handles[n]) if n in handles else SELECTORS[n]) for n in SELECTORS}, handles


# ---- pools ------------------------------------------------------------------------------------------
def constructed_problem() -> Problem:
    g = CausalGraph.build(["U", "V", "W"], [("U", "V"), ("V", "W")], (), "DAG")
    return Problem(task="backdoor_set", query={"treatment": "U", "outcome": "W", "variant": "any"}, graph=g,
                   mode="constructed", text="Three variables U, V and W; U drives V, which drives W.",
                   variables=("U", "V", "W"), id="c1", source_id="c1")


def intervention_problem() -> Problem:
    g = CausalGraph.build(["A", "B", "C"], [("A", "B"), ("B", "C")], (), "DAG")
    return Problem(task="intervention_reachability", query={"do": ["B"], "source": "A", "target": "C"},
                   graph=g, id="i1")


def build_pool(root: Path) -> Pool:
    units = synthetic_units(3, K, seed=3)
    for p in (constructed_problem(), intervention_problem()):
        fam = get_family(p.task)
        obj = fam.validity_class(p.graph, fam.normalize_query(p))[0]
        units.append((p, 0, [fam.canonical_trace(p, obj)] * K))
    pool = write_pool(root, units, K)
    # stored comparator scores, as a model-backed run would have written them
    for name in ("confidence", "judge", "reward_model", "reward_model_trace", "prm"):
        pool.write_selection(name, [{"problem_id": p.id, "seed": s, "index": 0,
                                     "scores": [float(i % 3) for i in range(K)]}
                                    for p, s, _ in units])
    return pool


def inject(src: Pool, dst_root: Path, key: str, nested: bool = True) -> Pool:
    """Copy ``src`` with ``key`` injected into every place a selector's input is read from
    (``nested``: also inside otherwise harmless containers, which survive, emptied)."""
    dst = Pool(dst_root)
    man = src.manifest()
    man[key] = SENTINEL
    man["selector_context"] = {**man.get("selector_context", {}), key: SENTINEL}
    if nested:
        man["selector_context"]["nested"] = [{key: SENTINEL}]
    dst.write_manifest(man)
    rows = []
    for r in src.problem_rows():
        p = dict(r["problem"])
        if key not in get_family(p["task"]).query_keys:  # a declared query input is not a label
            p["query"] = {**p["query"], key: SENTINEL}
        p["data"] = {**p.get("data", {}), key: SENTINEL}
        if nested:
            p["data"]["extra"] = {key: SENTINEL}
        p["meta"] = {**p.get("meta", {}), key: SENTINEL}
        p[key] = SENTINEL  # an unknown top-level problem field
        rows.append({"problem": p, "labels": {key: SENTINEL}})
    dst.problems_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dst.append_candidates({**r, key: SENTINEL} for r in src.candidate_rows())
    for name in src.selection_names():
        dst.write_selection(name, [{**r, key: SENTINEL} for r in src.selection(name).values()])
    return dst


@pytest.fixture(scope="module")
def clean_pool(tmp_path_factory):
    return build_pool(tmp_path_factory.mktemp("clean"))


STORED = ("confidence", "judge", "reward_model", "reward_model_trace", "prm")


def test_stripped_views_hash_equal_to_clean(clean_pool, tmp_path):
    """Injecting every forbidden key at once changes nothing a selector can see."""
    dirty = Pool(tmp_path / "dirty")
    src = clean_pool
    for i, key in enumerate(sorted(FORBIDDEN_KEYS)):
        dirty = inject(src, tmp_path / f"d{i}", key, nested=False)
        src = dirty
    clean_views = make_views(clean_pool, comparators=STORED)
    dirty_views = make_views(dirty, comparators=STORED)
    assert view_hash(clean_views) == view_hash(dirty_views)
    blob = json.dumps([v.to_dict() for v in dirty_views])
    assert SENTINEL not in blob


@pytest.mark.parametrize("key", sorted(FORBIDDEN_KEYS))
def test_every_selector_sees_no_forbidden_field(clean_pool, tmp_path, key):
    dirty = inject(clean_pool, tmp_path / "pool", key)
    selectors, handles = model_backed()
    spies = [Spy(s) for s in selectors.values()]
    stored_spies = [Spy(SELECTORS[n]) for n in STORED]  # neural ones re-selecting from stored scores
    run_selection(dirty, spies + stored_spies, write=False)
    run_selection(dirty, spies[:3], k=2, write=False)
    for spy in spies + stored_spies:
        assert spy.views, spy.name
        for v in spy.views:
            d = v.to_dict()
            assert SENTINEL not in json.dumps(d), (spy.name, key)
            assert not find_forbidden(d["problem"]["query"], allow=get_family(v.problem.task).query_keys)
            assert not find_forbidden(d["problem"]["data"]) and not v.problem.meta
            if v.problem.mode == "constructed":
                assert v.problem.graph is None  # the source graph is a label there
    for h in handles.values():
        for obj in h.values():
            assert obj.seen and SENTINEL not in json.dumps(obj.seen, default=str), key


def test_constructed_mode_hides_source_graph(clean_pool):
    view = next(v for v in make_views(clean_pool) if v.problem_id == "c1")
    assert view.problem.graph is None and view.problem.variables == ("U", "V", "W")
    assert "U -> V" not in json.dumps(view.to_dict()["problem"])


def test_declared_query_inputs_survive(clean_pool):
    view = next(v for v in make_views(clean_pool) if v.problem_id == "i1")
    assert view.problem.query["target"] == "C" and view.problem.query["source"] == "A"
    check_view(view)


def _view(problem: Problem, clean: Problem | None = None, **kw) -> SelectorView:
    """A view of ``problem`` whose traces are canonical for ``clean`` (default: ``problem``): a query with a
    labelled key does not load, so its traces come from the unlabelled problem."""
    src = clean or problem
    fam = get_family(src.task)
    t = fam.canonical_trace(src, fam.validity_class(src.graph, fam.normalize_query(src))[0])
    return SelectorView(problem.id, 0, problem, (t, t), (0, 1), **kw)


def _refusals():
    base = synthetic_units(1, 2, seed=5)[0][0]
    stripped = strip_problem(base)
    yield "meta", _view(Problem(**{**stripped.__dict__, "meta": {"gold": 1}}))
    yield "query", _view(Problem(**{**stripped.__dict__, "query": {**stripped.query, "answer_key": "{A}"}}), stripped)
    yield "nested-data", _view(Problem(**{**stripped.__dict__, "data": {"x": [{"reference_answer": 1}]}}))
    yield "context", _view(stripped, context={"labels": {"p": 1}})
    yield "stored-name", _view(stripped, stored={"correct": (1.0, 0.0)})
    c = constructed_problem()  # built by hand, graph still attached
    yield "constructed-graph", SelectorView(c.id, 0, c, ("x", "y"), (0, 1))


@pytest.mark.parametrize("name", list(SELECTORS))
def test_every_selector_refuses_a_hand_built_labelled_view(name):
    selectors, _ = model_backed()
    for where, view in _refusals():
        with pytest.raises(FirewallError):
            run_selector(selectors[name], [view])


def test_refusals_at_load_time(clean_pool, tmp_path):
    bad = inject(clean_pool, tmp_path / "p", "gold")
    bad.write_selection("judge", [{**r, "scores": {"correct": [1, 0, 0, 0]}} for r in bad.selection("judge").values()])
    with pytest.raises(FirewallError):
        make_views(bad, comparators=["judge"])
    c = constructed_problem().to_dict()
    c["variables"] = None
    with pytest.raises(FirewallError):
        strip_problem(c)


def test_scrub_and_selector_output_contract(clean_pool):
    assert scrub({"a": 1, "Gold-Answer": 2, "x": [{"is_correct": True, "b": 2}]}) == {"a": 1, "x": [{"b": 2}]}
    assert scrub({"target": "Y", "n": {"target": 1}}, allow=["target"]) == {"target": "Y", "n": {}}

    class Cheater(Selector):
        name = "first"

        def select(self, view):
            return Selection(0, (1.0,) * view.k, "{A}")  # an answer alongside an in-pool index

    from calver.infer.selectors import SelectorError

    with pytest.raises(SelectorError):
        run_selector(Cheater(), make_views(clean_pool)[:1])


def test_labels_reattached_only_after_selection(clean_pool, tmp_path):
    from calver.evaluation.grading import grade_rows

    rows = run_selection(clean_pool, ["calver", "extract_solve"], write=True)
    for name, sel in rows.items():
        assert all(set(r) <= {"problem_id", "seed", "index", "scores", "answer"} for r in sel)
        graded = grade_rows(clean_pool, sel)
        assert all("correct" in r and "labels" in r for r in graded)
    meta = json.loads((clean_pool.root / "selections" / "calver.meta.json").read_text())
    assert meta["view_hash"] == view_hash(make_views(clean_pool))
    assert list(read_jsonl(clean_pool.root / "selections" / "calver.jsonl"))


@pytest.mark.parametrize("name", ["kk", "ate"])
def test_stripping_keeps_what_scoring_needs(name):
    """The six-bit score of a trace is the same on the stripped problem as on the full one."""
    from calver.verifier import score

    ex = Path(__file__).resolve().parents[1] / "docs" / "examples"
    d = json.loads((ex / f"{name}_problem.json").read_text())
    d["meta"] = {"gold": "x", "true_ate": 0.3}
    full = Problem.from_dict(d)
    stripped = strip_problem(full)
    trace = (ex / f"{name}_trace.txt").read_text()
    assert score(trace, stripped).bits == score(trace, full).bits
    assert stripped.data == full.data and not stripped.meta
    check_view(SelectorView(full.id, 0, stripped, (trace,), (0,)))


# ---- verification modes (knights_knaves grounded / candidate_local) -----------------------------------
def _kk(verification=None):
    import dataclasses

    from calver.data_gen.knights import generate_kk

    p = generate_kk(4, 3, 0)
    return p if verification is None else dataclasses.replace(p, meta={**p.meta, "verification": verification})


def test_strip_problem_drops_statements_only_for_candidate_local():
    grounded, default, local = _kk("grounded"), _kk(), _kk("candidate_local")
    assert strip_problem(grounded).data == strip_problem(default).data == dict(default.data)
    s = strip_problem(local)
    assert "statements" not in s.data and s.data["speakers"] == list(local.data["people"])
    assert {k: v for k, v in s.data.items() if k != "speakers"} == {k: v for k, v in local.data.items()
                                                                  if k != "statements"}
    assert not s.meta and "statements" in local.data  # the caller's problem is untouched
    check_view(SelectorView("p", 0, s, ("t",), (0,)))
    assert strip_problem(s).data == s.data  # idempotent


def test_verification_mode_names_what_the_verifier_sees():
    from calver.infer.firewall import VERIFICATION_MODES, verification_mode

    assert VERIFICATION_MODES == ("grounded", "candidate_local")
    assert verification_mode(_kk()) == verification_mode(_kk("grounded")) == "grounded"
    assert verification_mode(_kk("candidate_local")) == "candidate_local"
    assert verification_mode(strip_problem(_kk("candidate_local"))) == "candidate_local"
    assert verification_mode(_kk("candidate_local").to_dict()) == "candidate_local"
    g = CausalGraph.build(["X", "Y", "Z"], [("X", "Y"), ("Z", "X"), ("Z", "Y")])
    q = {"treatment": "X", "outcome": "Y"}
    sup = Problem(task="backdoor_set", query=q, graph=g, mode="supplied", id="s")
    con = Problem(task="backdoor_set", query=q, graph=g, mode="constructed", variables=("X", "Y", "Z"),
                  text="Z causes X and Y; X causes Y.", id="c")
    assert verification_mode(sup) == "source_graph" and verification_mode(con) == "candidate_graph"


@pytest.mark.parametrize("value", ["oracle", "Candidate_Local", 3])
def test_unknown_verification_values_are_refused_naming_the_allowed_ones(value):
    from calver.infer.firewall import VerificationModeError, verification_mode
    from calver.verifier import ProblemError

    p = _kk(value)
    for fn in (strip_problem, verification_mode):
        with pytest.raises(VerificationModeError, match="grounded, candidate_local") as e:
            fn(p)
        assert isinstance(e.value, FirewallError) and isinstance(e.value, ProblemError)


def test_candidate_local_is_refused_on_graph_tasks():
    from calver.infer.firewall import VerificationModeError

    g = CausalGraph.build(["X", "Y"], [("X", "Y")])
    p = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y"}, graph=g,
                meta={"verification": "candidate_local"}, id="s")
    with pytest.raises(VerificationModeError, match="knights_knaves only"):
        strip_problem(p)


def test_score_table_fingerprints_and_scores_differ_between_modes_while_grading_does_not():
    from calver.infer.score_table import _problem_hash
    from calver.verifier import grade, score

    g, l_ = _kk(), _kk("candidate_local")
    assert _problem_hash(strip_problem(g)) != _problem_hash(strip_problem(l_))
    tr = get_family("knights_knaves").canonical_trace(g)
    # both grounded: on the formal statements, or on the statements read from the puzzle text
    assert score(tr, strip_problem(g)).grounded and score(tr, strip_problem(l_)).grounded
    wrong = tr.replace("CONSTRAINTS: ", "CONSTRAINTS: knight(Zed) <-> true; ", 1)
    assert score(wrong, strip_problem(l_)).bits[0] == 0
    ans = score(tr, strip_problem(l_)).answer
    assert grade(g, ans) and grade(l_, ans)


def test_the_grpo_reward_scores_candidate_local_problems_grounded():
    """The reward reads the full problem (no strip_problem): statements kept, so scores stay grounded."""
    import json as _json

    from calver.train.rewards import VerifierReward

    p = _kk("candidate_local")
    r = VerifierReward()
    prob = r.problem(_json.dumps(p.to_dict()))
    assert not isinstance(prob, str), prob
    assert prob.grounded and "statements" in prob.problem.data
