"""Gold traces: for every registered family, 200 generated items whose canonical trace scores 6
and grades correct (reasoning-gym's "gold scores 1.0 for every task"), and validity classes equal to
a brute-force enumeration judged by the family's predicate alone."""

from __future__ import annotations

import random
from itertools import combinations, product

import networkx as nx
import pytest

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import (
    SPECS,
    available_tasks,
    canonical_answer,
    canonical_trace,
    generate,
    validity_objects,
)
from calver.verifier import families, get_family, grade, score

N_ITEMS = 200
TASKS = available_tasks()


def test_every_registered_family_has_a_generator():
    missing = sorted(set(families()) - set(TASKS))
    assert not missing, f"registered families without a generator: {missing}"


@pytest.fixture(scope="module", params=TASKS)
def batch(request):
    task = request.param
    return task, generate(task, N_ITEMS, GenConfig(seed=11, n_nodes=(4, 9)))


def test_canonical_trace_scores_six_and_grades_correct(batch):
    task, problems = batch
    assert len(problems) == N_ITEMS
    for p in problems:
        trace = canonical_trace(p)
        sc = score(trace, p)
        assert sc.bits == [1] * 6, (p.id, sc.reasons, trace)
        assert grade(p, sc.answer), (p.id, trace)


def test_problem_fields(batch):
    task, problems = batch
    ids = [p.id for p in problems]
    assert len(set(ids)) == len(ids)
    for p in problems:
        assert p.task == task and p.source_id and p.text
        assert p.meta["validity_class"], p.id
        assert p.meta["n_valid"] == len(p.meta["validity_class"])
        if task in SPECS:
            assert p.id == f"{task}-11-{p.meta['generator']['idx']}"
            assert p.meta["generator"]["config"]["seed"] == 11
            assert get_family(task).question_text(get_family(task).normalize_query(p)) in p.text


# ---- brute force: the generator's classes against every candidate object and the predicate ----
N_BRUTE = 25  # problems per family: every subset / simple path is enumerated


def _brute_sets(fam, g, q):
    nodes = sorted(g.nodes)
    subsets = (frozenset(c) for r in range(len(nodes) + 1) for c in combinations(nodes, r))
    return {s for s in subsets if fam.predicate(g, q, s).ok}


def _typed_steps(g, u, v):
    return ["->"] * ((u, v) in g.directed) + ["<-"] * ((v, u) in g.directed) + ["<->"] * (
        (u, v) in g.bidirected or (v, u) in g.bidirected)


def _brute_paths(fam, g, q):
    a, b = (q[k] for k in fam.ends)
    skeleton = nx.Graph()
    skeleton.add_nodes_from(g.nodes)
    skeleton.add_edges_from(g.directed)
    skeleton.add_edges_from(g.bidirected)
    cands = [((), None)]  # "none"
    for nodes in nx.all_simple_paths(skeleton, a, b):
        for types in product(*(_typed_steps(g, u, v) for u, v in zip(nodes, nodes[1:]))):
            cands.append((tuple(nodes), types))
    return {c for c in cands if fam.predicate(g, q, c).ok}


def _brute_cycles(fam, g, q):
    digraph = nx.DiGraph()
    digraph.add_nodes_from(g.nodes)
    digraph.add_edges_from(g.directed)
    cands = [()]  # "none"
    order = sorted(g.nodes)
    for i, start in enumerate(order):  # each cycle once: from its smallest node, through larger ones
        sub = digraph.subgraph(order[i:])
        for end in order[i + 1 :]:
            cands += [tuple(p) for p in nx.all_simple_paths(sub, start, end)]
    return {fam.canonical_answer_key(c) for c in cands if fam.predicate(g, q, c).ok}


def _reachable_after_do(g, q) -> bool:
    cut = nx.DiGraph()
    cut.add_nodes_from(g.nodes)
    cut.add_edges_from((u, v) for u, v in g.directed if v not in q["do"])
    return nx.has_path(cut, q["source"], q["target"])


def test_validity_class_matches_brute_force(batch):
    """The stored class is exactly the set of objects the family's predicate accepts, found by
    enumerating every node subset / typed simple path / directed cycle with networkx."""
    task, problems = batch
    if task not in SPECS:
        pytest.skip("external generator: its answer space is not a graph's subsets or paths")
    fam = get_family(task)
    checked = 0
    for p in problems[:N_BRUTE]:
        if p.meta.get("validity_class_truncated"):
            continue
        q, g, stored = fam.normalize_query(p), p.graph, validity_objects(p)
        if fam.answer_type == "set":
            assert set(stored) == _brute_sets(fam, g, q) and len(stored) == len(set(stored)), p.id
        elif task == "cycle_witness":
            keys = [fam.canonical_answer_key(o) for o in stored]
            assert set(keys) == _brute_cycles(fam, g, q) and len(keys) == len(set(keys)), p.id
        elif fam.answer_type == "path":
            assert set(stored) == _brute_paths(fam, g, q) and len(stored) == len(set(stored)), p.id
        else:  # a yes/no family: the decision is reachability in the mutilated graph
            assert task == "intervention_reachability", task
            assert stored == [_reachable_after_do(g, q)], p.id
            assert [v for v in (True, False) if fam.predicate(g, q, v).ok] == stored, p.id
        checked += 1
    assert checked >= N_BRUTE // 2


def test_every_class_member_is_valid(batch):
    task, problems = batch
    if task not in SPECS:
        pytest.skip("external generator")
    fam = get_family(task)
    for p in problems[:40]:
        q = fam.normalize_query(p)
        for obj in validity_objects(p):
            assert fam.predicate(p.graph, q, obj).ok, (p.id, obj)


def test_canonical_answers_vary_across_items():
    """SFT data must not teach one canonical answer: the chosen member is not always the first."""
    problems = [p for p in generate("separation_set", 100, GenConfig(seed=5, many_satisfier=True))]
    firsts = sum(canonical_answer(p) == validity_objects(p)[0] for p in problems)
    assert firsts < 60


SWEEP = [
    GenConfig(seed=31, graph_class="ADMG", latent=0.2, naming="mixed", n_nodes=(3, 9)),
    GenConfig(seed=32, graph_class="directed", naming="economics", many_satisfier=True),
    GenConfig(seed=33, many_satisfier=True, min_valid=3, density=0.45, n_nodes=(6, 10), encoding=["json", "matrix"]),
]


@pytest.mark.parametrize("cfg", SWEEP, ids=["admg", "directed", "dense-many"])
@pytest.mark.parametrize("task", sorted(SPECS))
def test_every_valid_answer_gets_a_six(task, cfg):
    """Not just the drawn answer: a canonical trace for each class member scores 6 and grades."""
    fam = get_family(task)
    if cfg.graph_class and cfg.graph_class[0] not in [c.value for c in fam.graph_classes]:
        pytest.skip(f"{task} does not take {cfg.graph_class[0]} graphs")
    for p in generate(task, 20, cfg):
        for obj in validity_objects(p)[:6]:
            sc = score(fam.canonical_trace(p, obj), p)
            assert sc.total == 6 and grade(p, sc.answer), (p.id, obj, sc.reasons)


def test_cycle_class_cap_is_recorded():
    problems = generate("cycle_witness", 30, GenConfig(seed=2, max_class=2, density=0.5))
    assert all(p.meta["n_valid"] <= 2 for p in problems)
    assert any(p.meta["validity_class_truncated"] for p in problems)


@pytest.mark.parametrize("naming", ["random_letters", "identifiers", "phrases", "snake_phrases"])
def test_every_naming_scores_gold_six_in_every_encoding(naming):
    """Issue 31: training names beyond the first n letters. Each naming, for every generated family and every
    encoding the verifier reads, gives problems whose canonical traces score 6/6 and grade correct."""
    from calver.data_gen.gen_config import ENCODINGS
    from calver.data_gen.generators import available_tasks
    from calver.data_gen.names import node_names

    cfg = GenConfig(seed=5, naming=naming, n_nodes=(5, 8), encoding=ENCODINGS)
    seen_encodings = set()
    for task in available_tasks():
        if task == "knights_knaves":  # people's names come from the puzzle generator, not the naming
            continue
        for p in generate(task, 4, cfg):
            seen_encodings.add(p.meta.get("encoding"))
            sc = score(canonical_trace(p), p)
            assert sc.bits == [1] * 6, (task, naming, p.meta.get("encoding"))
            assert grade(p, sc.answer), (task, naming)  # the trace's answer (a decision family's yes/no too)
    assert len(seen_encodings) >= 4
    rng = random.Random(0)
    for n in (3, 26, 60):
        names = node_names(n, naming, rng)
        assert len(names) == len(set(names)) == n
    if naming == "random_letters":
        assert any(node_names(5, naming, random.Random(s)) != ["A", "B", "C", "D", "E"] for s in range(3))


def test_snake_phrases_are_snake_case_and_never_a_held_out_domain_name():
    """The snake_case naming: one \\w+ token a name, multi-word where the vocabulary is, distinct past the
    vocabulary's size, and disjoint from every DOMAINS vocabulary (the held-out names)."""
    import re

    from calver.data_gen.names import DOMAINS, SNAKE_HEADS, SNAKE_TAILS, node_names

    held_out = {n for v in DOMAINS.values() for n in v}
    vocab = len(SNAKE_TAILS) * (1 + len(SNAKE_HEADS))
    for seed in range(20):
        names = node_names(16, "snake_phrases", random.Random(seed))
        assert len(set(names)) == 16
        assert all(re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", n) for n in names), names
        assert not set(names) & held_out
    many = node_names(vocab + 7, "snake_phrases", random.Random(0))
    assert len(set(many)) == vocab + 7 and not set(many) & held_out


@pytest.mark.parametrize("naming", ["phrases", "snake_phrases"])
def test_phrase_namings_stay_distinct_past_their_vocabulary(naming):
    from calver.data_gen.names import node_names

    for seed in range(3):
        assert len(set(node_names(1200, naming, random.Random(seed)))) == 1200
