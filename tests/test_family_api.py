"""Adding a task family is one module + one registration: a toy family (``sink_node``: name a node
with no children) declared with the base-class API only, and its generator registered through
:func:`calver.data_gen.generators.register_generator` (no table patched), gets contract instructions
and prompts, canonical traces that score 6, grading, the mechanism audits and the judge-audit
corruptions, a firewall view and the selectors, slot feedback, its validity class and the gold-test
loop. Also the family API every caller uses instead of duck-typing (on every registered family)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import random
import re
from pathlib import Path

import numpy as np
import pytest

from calver.data_gen import generators
from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import FamilySpec, plain_graph, register_generator, unregister_generator
from calver.data_gen.prompts import problem_text, render_prompt, system_prompt
from calver.evaluation.audit_judges import make_variants
from calver.evaluation.audits import damage_witness, rename_nodes, swap_answer
from calver.infer.firewall import FirewallError, SelectorView, check_view, strip_problem
from calver.infer.refine import feedback
from calver.infer.selectors import SELECTORS
from calver.verifier import (
    CausalGraph,
    GraphClass,
    Problem,
    families,
    get_family,
    grade,
    prepare,
    registry,
    score,
    values,
)
from calver.verifier import family as family_mod
from calver.verifier.contract import assemble_trace, format_path, parse_call, split_slots
from calver.verifier.instructions import contract_instructions
from calver.verifier.registry import register, unregister
from calver.verifier.scoring import verification_object
from calver.verifier.tasks.base import NodeSetFamily

ROOT = Path(__file__).resolve().parents[1]
TOY = "sink_node"


class SinkNode(NodeSetFamily):
    """The whole toy family: declarations, the validity rule, a witness and the question."""

    name = TOY
    description = "name one node that has no children (no outgoing directed edge)"
    operation = "sink_check"
    graph_classes = (GraphClass.DAG, GraphClass.ADMG, GraphClass.DIRECTED)
    variants = ("any",)
    query_keys = ("variant",)
    query_types = {"variant": "word"}
    object_arg = "sink"
    witness_arg = "chain"
    data_payload_keys = frozenset({"aliases"})
    example_query = {"variant": "any"}
    slot_docs = {
        "STRATEGY": "the sink as a one-node set, e.g. {C}",
        "DERIVATION": "sink_check(sink={C}, chain=[A -> B -> C]), chain: a directed path from a root into the sink",
        "RESULT": "valid or invalid (whether the node has no children)",
        "ANSWER": "the one-node set only",
    }

    def base_violation(self, g, query, nodes):
        if len(nodes) != 1:
            return f"name exactly one node, not {len(nodes)}"
        (n,) = nodes
        kids = sorted(g.children(n))
        return f"{n} has children {', '.join(kids)}" if kids else None

    def witness_paths(self, g, query, nodes):
        out = []
        for n in sorted(nodes):
            chain = [n]
            while (ps := [v for v in sorted(g.parents(chain[0])) if v not in chain]):
                chain.insert(0, ps[0])
            out += [format_path(chain)] if len(chain) > 1 else []
        return out

    def question_text(self, query):
        return "Name one node of the graph that has no children."


def _propose(rng, g, planted, variant, cfg):
    yield {"variant": variant}


TOY_SPEC = FamilySpec(plain_graph, _propose)  # the generic graph loop: random graph, one query per draw


@pytest.fixture(scope="module")
def toy():
    """The two registrations a new family needs (family, generator); both undone afterwards."""
    register(SinkNode)
    register_generator(TOY, TOY_SPEC)
    system_prompt.cache_clear()
    try:
        yield get_family(TOY)
    finally:
        unregister_generator(TOY)
        unregister(TOY)
        system_prompt.cache_clear()
        feedback.slot_docs.cache_clear()
    assert TOY not in families() and TOY not in generators.available_tasks()


def toy_problem(**kw) -> Problem:
    g = CausalGraph.build(["A", "B", "C", "D"], [("A", "B"), ("B", "C"), ("A", "D")], kind="DAG")
    return Problem(task=TOY, query={"variant": "any"}, graph=g, graph_class="DAG", id="toy-1", **kw)


def swapped(trace: str, fam, obj) -> str:
    vals = dict(split_slots(trace).values)
    vals["ANSWER"] = fam.format_object(obj)
    return assemble_trace(vals, fam.graph_label)


# ---- the toy family through the pipeline ----------------------------------------------------------
def test_toy_gets_instructions_and_prompt(toy):
    text = contract_instructions(TOY)
    assert f"Task {TOY}: {SinkNode.description}." in text
    assert "  DERIVATION: sink_check(sink={C}, chain=[A -> B -> C])" in text
    assert "  QUERY: task=<task>; variant=...;" in text
    system, user = render_prompt(toy_problem())
    assert system["content"] == text
    assert "A -> B" in user["content"] and user["content"].endswith(toy.question_text({}))


def test_toy_canonical_trace_scores_six_and_grades(toy):
    p = toy_problem()
    for obj in ({"C"}, {"D"}, None):  # None: the family's default valid object
        sc = score(toy.canonical_trace(p, obj), p)
        assert sc.bits == [1] * 6, sc.reasons
        assert grade(p, sc.answer)
    assert "chain=[A -> B -> C]" in toy.canonical_trace(p, {"C"})
    assert toy.default_object(p) == frozenset({"C"})
    assert grade(p, {"D"}) and grade(p, "{C}") and not grade(p, {"A"}) and not grade(p, {"C", "D"})
    bad = score(toy.canonical_trace(p, {"B"}), p)  # an invalid object written honestly: RESULT says invalid
    assert bad.bits == [1, 1, 0, 1, 1, 0], bad.reasons
    assert "B has children C" in bad.reasons["STRATEGY"]


def test_toy_validity_class_is_the_brute_force_sinks(toy):
    rnd = random.Random(3)
    for _ in range(30):
        n = rnd.randint(2, 7)
        names = [f"N{i}" for i in range(n)]
        edges = [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if rnd.random() < 0.5]
        g = CausalGraph.build(names, edges, kind="DAG")
        sinks = [frozenset({v}) for v in sorted(names) if not any(a == v for a, _ in edges)]
        q = toy.normalize_query(Problem(task=TOY, query={}, graph=g))
        assert toy.validity_class(g, q) == sinks
        assert toy.validity_class(g, q, limit=1) == sinks[:1]
        assert all(toy.is_valid_on(g, q, s) for s in sinks)


def test_toy_invalid_objects_swap_scores_exactly_three(toy):
    p = toy_problem()
    sc = score(toy.canonical_trace(p, {"C"}), p)
    q = toy.normalize_query(p)
    objs = list(toy.invalid_objects(sc.g_ver, q, sc.answer, np.random.default_rng(0)))
    assert objs and all(not toy.is_valid_on(p.graph, q, o) for o in objs)
    assert frozenset({"C"}) not in objs and frozenset({"D"}) not in objs  # the answer and the other sink
    assert objs == list(toy.invalid_objects(sc.g_ver, q, sc.answer, 0))  # seeded
    for obj in objs[:5]:
        s2 = score(swapped(toy.canonical_trace(p, {"C"}), toy, obj), p)
        assert s2.total == 3 and sorted(s2.reasons) == ["ANSWER", "RESULT", "STRATEGY"], s2.reasons
        assert not grade(p, s2.answer)


def test_toy_is_valid_on_another_graph(toy):
    p = toy_problem()
    q = toy.normalize_query(p)
    rev = CausalGraph.build(["A", "B", "C", "D"], [("B", "A"), ("C", "B"), ("D", "A")], kind="DAG")
    assert toy.is_valid_on(p.graph, q, frozenset({"C"})) and not toy.is_valid_on(rev, q, frozenset({"C"}))
    assert toy.is_valid_on(rev, q, frozenset({"A"}))


def test_toy_mechanism_audits(toy):
    """calver.evaluation.audits on the toy: answer swap 3, renaming changes no bit, witness damage 5."""
    p = toy_problem()
    trace = toy.canonical_trace(p, {"C"})
    for seed in range(4):
        s = score(swap_answer(trace, p, seed), p)
        assert s.total == 3 and sorted(s.reasons) == ["ANSWER", "RESULT", "STRATEGY"] and not grade(p, s.answer)
    t2, p2 = rename_nodes(trace, p, rng=1)
    assert set(p2.graph.nodes).isdisjoint(p.graph.nodes) and t2 != trace
    s2 = score(t2, p2)
    assert s2.bits == [1] * 6 and grade(p2, s2.answer)
    damaged = damage_witness(trace, p)
    assert damaged is not None and "chain=[A -> B -> C]" not in damaged
    s3 = score(damaged, p)
    assert s3.total == 5 and list(s3.reasons) == ["DERIVATION"], s3.reasons


def test_toy_judge_audit_corruptions_are_rejected(toy):
    sp = strip_problem(toy_problem())
    variants = make_variants(toy.canonical_trace(toy_problem(), {"C"}), sp, seed=0)
    assert set(variants) == {"clean", "answer_swap", "consistent_swap", "strategy_only", "edge_deletion", "truncation"}
    for name, v in variants.items():
        assert score(v["text"], sp).max_score == (not v["expected_reject"]), name
    consistent = split_slots(variants["consistent_swap"]["text"])
    bad = consistent.get("ANSWER")
    assert consistent.get("STRATEGY") == bad and f"sink={bad}" in consistent.get("DERIVATION")


def test_toy_firewall_view_selectors_and_feedback(toy):
    """The firewall keeps the family's declared payload verbatim and strips labels; selectors run on
    the view; feedback explains the failed slots with the family's own contract text."""
    p = generators.generate(TOY, 1, GenConfig(seed=3, n_nodes=(5, 7), many_satisfier=True))[0]
    p = dataclasses.replace(p, data={"aliases": {"target": "V0"}, "difficulty": "easy", "gold_note": "x"})
    sp = strip_problem(p)
    assert not sp.meta and sp.data == {"aliases": {"target": "V0"}} and sp.query == {"variant": "any"}
    other = generators.generate("backdoor_set", 1, GenConfig(seed=3))[0]
    assert strip_problem(dataclasses.replace(other, data={"aliases": {"target": "V0"}})).data == {"aliases": {}}
    valid = generators.validity_objects(p)
    good = [toy.canonical_trace(p, o) for o in valid[:2]]
    bad = swap_answer(good[0], p, 0)
    texts = (bad, bad, good[0], good[1])
    view = SelectorView(p.id, 0, sp, texts, tuple(range(len(texts))))
    check_view(view)
    with pytest.raises(FirewallError):
        check_view(dataclasses.replace(view, problem=dataclasses.replace(sp, meta=p.meta)))
    assert SELECTORS["calver"](view).index == 2
    assert SELECTORS["plurality"](view).index == 0  # the repeated invalid answer wins the vote
    assert SELECTORS["structure"](view).scores == (6.0,) * 4  # format only: the swap is well formed
    medoid = SELECTORS["medoid"](view).scores
    assert medoid[0] == medoid[1] > medoid[2]
    solved = SELECTORS["extract_solve"](view).answer
    assert grade(p, solved)
    lines = feedback.feedback_for(bad, sp).splitlines()
    assert len(lines) == 4 and "Expected in STRATEGY: the sink as a one-node set, e.g. {C}." in lines[1]


def test_toy_passes_the_gold_loop(toy):
    """tests/test_datagen_gold.py's loop, run on the toy family through calver.data_gen.generators."""
    assert not sorted(set(families()) - set(generators.available_tasks()))
    problems = generators.generate(TOY, 60, GenConfig(seed=11, n_nodes=(4, 9)))
    assert len(problems) == 60 and len({p.id for p in problems}) == 60
    for p in problems:
        sc = score(generators.canonical_trace(p), p)
        assert sc.bits == [1] * 6, (p.id, sc.reasons)
        assert grade(p, sc.answer)
        assert p.meta["n_valid"] == len(p.meta["validity_class"]) > 0
        assert generators.validity_objects(p) == toy.validity_class(p.graph, toy.normalize_query(p))
        assert p.id == f"{TOY}-11-{p.meta['generator']['idx']}" and toy.question_text({}) in p.text
    many = generators.generate(TOY, 20, GenConfig(seed=4, many_satisfier=True, min_valid=3))
    assert all(p.meta["n_valid"] >= 3 and p.meta["many_satisfier"] for p in many)


def test_an_item_function_registers_too(toy):
    """A family with its own item function: ids, provenance and the validity class are filled in."""
    def make(idx, cfg):
        p = toy_problem()
        return dataclasses.replace(p, id="", source_id="", text=problem_text(p.graph, toy.question_text({})))

    with pytest.raises(ValueError, match="already has a generator"):
        register_generator(TOY, make)
    try:
        register_generator(TOY, make, replace=True)
        p = generators.generate_item(TOY, 3, GenConfig(seed=7))
        assert p.id == p.source_id == f"{TOY}-7-3" and p.meta["generator"]["idx"] == 3
        assert generators.validity_objects(p) == [frozenset({"C"}), frozenset({"D"})] and p.meta["n_valid"] == 2
    finally:
        register_generator(TOY, TOY_SPEC, replace=True)
    with pytest.raises(TypeError):
        register_generator(TOY, 3, replace=True)


# ---- the family API on every registered family ------------------------------------------------------
SWAP_SCORE = {"intervention_reachability": 4, "ate_threshold": 5, "knights_knaves": 5}  # docs/trace-contract.md
BUILTIN = sorted(families())


@pytest.fixture(scope="module", params=BUILTIN)
def batch(request):
    return request.param, generators.generate(request.param, 12, GenConfig(seed=5, n_nodes=(4, 8)))


def _old_class_json(o):
    """meta.validity_class as written before families owned it (sets sorted, tuples as lists)."""
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    return [list(v) if isinstance(v, tuple) else v for v in o] if isinstance(o, tuple) else o


def test_every_family_declares_the_api_on_the_base(batch):
    task, _ = batch
    fam = get_family(task)
    assert isinstance(fam, family_mod.TaskFamily)
    for name in ("verification_object", "verification_graph", "coerce_object", "object_for", "is_valid_on",
                 "invalid_objects", "derivation_binds", "default_object", "object_to_json", "object_from_json",
                 "answer_set", "key_set", "object_mentions", "query_slot"):
        assert hasattr(family_mod.TaskFamily, name), name
    assert "limit" in inspect.signature(fam.validity_class).parameters
    assert fam.object_arg is None or isinstance(fam.object_arg, str)
    assert fam.witness_arg is None or isinstance(fam.witness_arg, str)
    assert fam.is_decision == (fam.answer_type in ("bool", "number"))
    assert isinstance(fam.data_payload_keys, frozenset) and set(fam.single_answer_variants) <= set(fam.variants)


def test_generator_attributes_reproduce_the_old_answer_type_rule():
    """The generator read the answer type to decide many_satisfier and the class cap; the family
    attributes that replace it give the same decisions for every built-in graph family."""
    for task in generators.SPECS:
        fam = get_family(task)
        for variant in fam.variants:
            old = fam.answer_type in ("set", "path") and (task, variant) != ("mediator", "all")
            assert (fam.many_answers and variant not in fam.single_answer_variants) == old, (task, variant)
        assert fam.large_class == (fam.answer_type == "path"), task
    assert get_family("knights_knaves").data_payload_keys >= {"statements", "people"}
    assert get_family("ate_threshold").data_payload_keys == {"cpts"}


def test_medoid_key_sets_are_the_old_conversion():
    """MedoidSelector's Jaccard atoms (TaskFamily.key_set) as before: a path key (nodes, types) is two atoms."""
    path, sets = get_family("path"), get_family("backdoor_set")
    key = path.canonical_answer_key((("A", "B"), None))
    assert path.key_set(key) == frozenset({("A", "B"), None}) != path.answer_set((("A", "B"), None))
    assert sets.key_set(frozenset({"A"})) == frozenset({"A"}) and sets.key_set(True) == frozenset({True})
    assert get_family("knights_knaves").key_set({"A": True}) == frozenset({("A", True)})


def test_canonical_trace_without_an_object_scores_six(batch):
    task, problems = batch
    fam = get_family(task)
    for p in problems:
        sc = score(fam.canonical_trace(p), p)
        assert sc.bits == [1] * 6, (p.id, sc.reasons)
        assert grade(p, sc.answer)


def test_invalid_object_swap_scores_the_documented_number(batch):
    task, problems = batch
    fam = get_family(task)
    for i, p in enumerate(problems):
        trace = fam.canonical_trace(p)
        sc = score(trace, p)
        q = fam.normalize_query(p)
        bad = next(fam.invalid_objects(sc.g_ver, q, sc.answer, i, p))
        assert not fam.is_valid_on(sc.g_ver, q, bad, p)
        s2 = score(swapped(trace, fam, bad), p)
        assert s2.total == SWAP_SCORE.get(task, 3), (p.id, bad, s2.reasons)
        assert not grade(p, s2.answer)


def test_validity_class_round_trips_through_json_and_is_valid(batch):
    task, problems = batch
    fam = get_family(task)
    for p in problems:
        objs = fam.validity_class(fam.verification_object(p), fam.normalize_query(p))
        data = generators.class_to_json(task, objs)
        assert data == [_old_class_json(o) for o in objs]  # the JSON the datasets already hold
        assert [fam.object_from_json(x) for x in data] == objs == generators.class_from_json(task, data)
        q = fam.normalize_query(p)
        assert all(fam.is_valid_on(fam.verification_object(p), q, o, p) for o in objs[:8]), p.id


def test_derivation_binds_the_query(batch):
    task, problems = batch
    fam = get_family(task)
    for p in problems:
        q = fam.normalize_query(p)
        _op, args = parse_call(split_slots(fam.canonical_trace(p)).get("DERIVATION"))
        assert fam.derivation_binds(args, q, required=False).ok
        for key in fam.query_keys:
            if key in args and fam.query_types[key] == "node":
                other = next(n for n in p.graph.nodes if n != q[key])
                check = fam.derivation_binds({**args, key: other}, q, required=False)
                assert not check.ok and "not bound" in check.reason
        missing = [k for k in fam.query_keys if k not in args]
        if missing:
            assert not fam.derivation_binds(args, q).ok


def test_score_returns_its_slots_and_graphs_outside_equality(batch):
    task, problems = batch
    fam = get_family(task)
    p = problems[0]
    trace = fam.canonical_trace(p)
    sc = score(trace, p)
    assert sc.slots.values == split_slots(trace).values
    assert sc.g_ver is prepare(p).source and verification_object(trace, p) is sc.g_ver
    assert sc.trace_graph == fam.parse_graph_slot(sc.slots.get("GRAPH"), p)
    assert set(sc.to_dict()) == {"bits", "total", "reasons", "answer", "grounded"}
    other = score(trace, p)
    other.slots = other.trace_graph = other.g_ver = None
    assert other == sc and "slots" not in repr(sc)


def test_sourceless_constructed_mode_judges_on_the_trace_graph_only_if_b1_passed():
    fam = get_family("backdoor_set")
    g = CausalGraph.build(["X", "Y", "Z"], [("Z", "X"), ("Z", "Y"), ("X", "Y")], kind="DAG")
    p = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y"}, graph=None, mode="constructed",
                graph_class="DAG", variables=("X", "Y", "Z"))
    full = Problem(task="backdoor_set", query={"treatment": "X", "outcome": "Y"}, graph=g, graph_class="DAG")
    trace = fam.canonical_trace(full, {"Z"})
    sc = score(trace, p)
    assert sc.bits == [1] * 6 and not sc.grounded and sc.g_ver == g and sc.g_ver is sc.trace_graph
    foreign = trace.replace("Z -> X", "Z -> X, W -> X")  # W is no variable of the prompt: b1 fails
    sc2 = score(foreign, p)
    assert sc2.bits[0] == 0 and sc2.trace_graph is not None and sc2.g_ver is None
    assert verification_object(foreign, p) is None
    assert fam.verification_graph(p, sc2.trace_graph, False) is None
    assert fam.verification_graph(p, sc2.trace_graph, True) is sc2.trace_graph


def test_ate_validity_without_a_graph_predicate():
    p = generators.generate("ate_threshold", 1, GenConfig(seed=2))[0]
    fam = get_family("ate_threshold")
    q = fam.normalize_query(p)
    truth = fam.truth(p)
    assert fam.is_valid_on(p.graph, q, truth, p) and not fam.is_valid_on(p.graph, q, not truth, p)
    with pytest.raises(ValueError):
        fam.is_valid_on(p.graph, q, truth)
    assert list(fam.invalid_objects(p.graph, q, truth, 0, p)) == [not truth]


# ---- the split modules ------------------------------------------------------------------------------
_MOVED = ("PASS", "Check", "TraceContext", "graph_diff", "_graph_diff", "normalize_value", "parse_bool",
          "values_equal")


def test_registry_is_only_the_registry():
    """Family and value names are imported from their own modules, not through the registry."""
    assert not [n for n in _MOVED if n in vars(registry)]
    assert not hasattr(values, "_graph_diff")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_scm_is_math_only_and_the_certificate_lives_with_ate():
    from calver.verifier import ate_certificate, scm

    mods = _imports(ROOT / "calver/verifier/scm.py")
    assert not {m for m in mods if m.startswith(("calver.verifier.scoring", "calver.verifier.registry",
                                                  "calver.verifier.tasks"))}, mods
    assert not hasattr(scm, "strict_certificate") and callable(ate_certificate.strict_certificate)
    assert not {m for m in _imports(ROOT / "calver/verifier/values.py") if "registry" in m or "tasks" in m}
    assert "calver.verifier.registry" not in _imports(ROOT / "calver/verifier/family.py")


_SWITCH = re.compile(r"\b(hasattr|getattr)\((fam|family)\b|\banswer_type\b")


def test_no_family_duck_typing_or_answer_type_switch_outside_the_verifier():
    """Per-task decisions live on the family: no module outside calver/verifier duck-types a family
    (hasattr/getattr on it) or reads its answer_type."""
    hits = [f"{path.relative_to(ROOT)}:{i}" for path in sorted((ROOT / "calver").rglob("*.py"))
            if "verifier" not in path.relative_to(ROOT / "calver").parts[:1]
            for i, line in enumerate(path.read_text().splitlines(), 1) if _SWITCH.search(line)]
    assert not hits, hits
