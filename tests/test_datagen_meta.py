"""The breakdown fields of ``Problem.meta`` (calver/data_gen/meta.py) on every adapter and generated task,
each checked against an independent computation: the encoding against the graph text the prompt
actually shows, ``people`` against the speakers of the prompt, ``ate`` against exact rational
arithmetic on the CPTs, ``n_valid`` against brute force with tests/oracles.py; and the per-problem
source ids of the bnlearn-based adapters."""

from __future__ import annotations

import itertools
import json
import random
import re
from pathlib import Path

import networkx as nx
import oracles as O
import pytest

from calver.data_gen.clear import load_clear
from calver.data_gen.gen_config import ENCODINGS
from calver.data_gen.generators import SPECS, GenConfig, available_tasks, generate, generate_item, register_generator
from calver.data_gen.meta import META_KEYS, SOURCES, query_source_id
from calver.data_gen.prompts import problem_text, prompt_encoding, user_text
from calver.data_gen.text_levels import constructed_problems
from calver.verifier import CausalGraph, Problem, parse_graph, render_graph

CLEAR_SAMPLE = Path(__file__).parent / "data" / "clear-sample.jsonl"  # vendored (tests/data/README.md)
BRUTE_MAX_NODES = 10  # brute force enumerates every subset / typed path of the graph
TYPES = {"source": str, "network": str, "encoding": str, "text_level": str, "people": int, "ate": float,
         "n_valid": int}


# ---- independent computations ------------------------------------------------------------------------
def _og(g: CausalGraph) -> O.G:
    return O.G(g.nodes, g.directed, g.bidirected)


def _count_sets(valid, pool, variant) -> int:
    if variant == "minimal":
        return sum(O.minimal_ok(valid, z) for z in O.subsets(pool))
    if variant == "maximal":
        return sum(O.maximal_ok(valid, z, pool) for z in O.subsets(pool))
    return sum(bool(valid(z)) for z in O.subsets(pool))


def _count_paths(og: O.G, a, b, backdoor: bool, variant: str) -> int:
    lengths = [len(t) for _, t in og.paths(a, b, first=("<-", "<->") if backdoor else None)]
    if not lengths:
        return 1  # the class is "none"
    if variant == "any":
        return len(lengths)
    return lengths.count(min(lengths) if variant == "shortest" else max(lengths))


def _count_cycles(g: CausalGraph) -> int:
    dg = nx.DiGraph(list(g.directed))
    order = sorted(g.nodes)
    n = 0
    for i, start in enumerate(order):  # each cycle once: from its smallest node, through larger ones
        sub = dg.subgraph(order[i:])
        for end in order[i + 1:]:
            if start in sub and end in sub and (end, start) in g.directed:
                n += sum(1 for _ in nx.all_simple_paths(sub, start, end))
    return n or 1  # acyclic: the class is "none"


def brute_n_valid(p: Problem) -> int | None:
    """|validity class| by brute force with the audit oracles (None past BRUTE_MAX_NODES nodes)."""
    if p.task == "knights_knaves":
        return len(O.kk_solutions(p.data["people"], p.data["statements"]))
    g = p.graph
    if len(g) > BRUTE_MAX_NODES:
        return None
    og, q, task = _og(g), p.family.normalize_query(p), p.task  # normalize: only to read the query's strings
    v = q.get("variant", "any")
    if task in ("backdoor_set", "ate_threshold"):
        x, y = q["treatment"], q["outcome"]
        return _count_sets(lambda z: O.backdoor(og, x, y, z), set(g.nodes) - {x, y}, v)
    if task == "frontdoor_set":
        x, y, c = q["treatment"], q["outcome"], q.get("criterion", "set")
        return _count_sets(lambda z: O.frontdoor(og, x, y, z, c), set(g.nodes) - {x, y}, v)
    if task == "separation_set":
        xs, ys = set(q["x"]), set(q["y"])
        return _count_sets(lambda z: O.msep_paths(og, xs, ys, z), set(g.nodes) - xs - ys, v)
    if task == "blocking_set":
        nodes, types = q["path"]
        return _count_sets(lambda z: O.blocks(og, list(nodes), list(types), z), set(g.nodes) - {nodes[0], nodes[-1]}, v)
    if task == "mediator":
        meds = O.mediators(og, q["treatment"], q["outcome"], direct=v == "direct")
        return 1 if v == "all" else len(meds)
    if task == "intervention_reachability":
        return 1  # one yes/no decision
    if task == "cycle_witness":
        return _count_cycles(g)
    if task in ("path", "backdoor_path"):
        a, b = (q["source"], q["target"]) if task == "path" else (q["treatment"], q["outcome"])
        return _count_paths(og, a, b, task == "backdoor_path", v)
    raise AssertionError(f"no brute force for {task}")


def shown_graph(p: Problem) -> str:
    """The graph text of the prompt's user message."""
    user = user_text(p)
    if p.task == "ate_threshold":  # "... The causal graph is a DAG with edges: <arrows>.\nThe conditional ..."
        return user.split("\n", 1)[0].split(" with edges: ", 1)[1][:-1]
    if user.startswith("The causal graph is "):  # header line, graph, blank line, question
        return user.split("\n", 1)[1].rsplit("\n\n", 1)[0]
    return user.rsplit("\n\n", 1)[0]  # graph text, blank line, question (cg2llm, CLEAR)


def check_encoding(p: Problem, rendered: bool = True) -> None:
    enc = p.meta["encoding"]
    if p.graph is None:
        assert enc == "none" and p.task == "knights_knaves"
        return
    if p.mode == "constructed":
        assert enc == "text"
        assert not any(render_graph(p.graph, f) in p.text for f in ENCODINGS if p.graph.directed), p.id
        return
    body = shown_graph(p)
    assert parse_graph(body, fmt="json" if enc == "json_parents" else enc, kind=p.graph.kind) == p.graph, p.id
    if rendered:  # the adapter rendered it: exactly that format's rendering, no other format's
        assert {f for f in ENCODINGS if render_graph(p.graph, f) == body} == {enc}, p.id


def check_contract(p: Problem, source: str, *, n_valid: bool = True) -> None:
    m = p.meta
    assert m["source"] == source and source in SOURCES
    for key in META_KEYS:
        if key in m:
            assert type(m[key]) is TYPES[key], (p.id, key, m[key])
    assert ("network" in m) == (source in ("bnlearn", "cg2llm"))
    assert ("people" in m) == (p.task == "knights_knaves")
    assert ("ate" in m) == (p.task == "ate_threshold")
    assert ("text_level" in m) == (p.mode == "constructed" and p.task != "knights_knaves")
    assert "level" not in m and "true_ate" not in m
    if n_valid:
        assert m["n_valid"] >= 1, p.id
    if "n_valid" in m:
        want = brute_n_valid(p)
        assert want is None or m["n_valid"] == want, (p.id, m["n_valid"], want)


def check_ate(p: Problem) -> None:
    exact = O.exact_ate(p, p.query["treatment"], p.query["outcome"])
    assert abs(p.meta["ate"] - float(exact)) < 1e-9, p.id


# ---- generated tasks, both modes ---------------------------------------------------------------------
def _generated(task: str) -> list[Problem]:
    cfg = GenConfig(seed=5, n_nodes=(4, 6), latent=0.2, encoding=ENCODINGS)
    return generate(task, 6, cfg)


@pytest.mark.parametrize("task", available_tasks())
def test_generated_tasks_fill_the_contract(task):
    ps = _generated(task)
    assert ps
    brute = 0
    for p in ps:
        source = {"ate_threshold": "ate", "knights_knaves": "knights"}.get(task, "generated")
        check_contract(p, source)
        check_encoding(p)
        brute += brute_n_valid(p) is not None
        if task == "ate_threshold":
            check_ate(p)
        if task == "knights_knaves":
            speakers = set(re.findall(r'^(\w+) \w+(?: you)?: "', p.text, re.M))
            assert p.meta["people"] == len(speakers) == len(p.data["people"]), p.id
    assert brute == len(ps)
    if task in SPECS:  # the drawn encodings are the configured ones
        assert {p.meta["encoding"] for p in ps} <= set(ENCODINGS)


@pytest.mark.parametrize("task", sorted(SPECS))
def test_text_levels_keep_the_source_and_name_the_level(task):
    base = {p.id: p for p in _generated(task)}
    made = 0
    for level in (1, 2, 3):
        kept, _ = constructed_problems(list(base.values()), level, random.Random(f"meta:{level}"))
        for cp in kept:
            made += 1
            src = base[cp.meta["supplied_id"]]
            assert cp.meta["text_level"] == f"L{level}" and cp.id == f"{src.id}-L{level}"
            check_contract(cp, "generated")
            check_encoding(cp)
            assert cp.meta["n_valid"] == src.meta["n_valid"]
    assert made


def test_an_item_function_gets_source_and_the_prompts_encoding():
    spec = SPECS["mediator"]

    def make(idx, cfg):
        g = CausalGraph.build(["A", "B", "C", "D"], [("A", "B"), ("B", "D"), ("A", "C"), ("C", "D")], ())
        q = {"treatment": "A", "outcome": "D", "variant": "any"}
        p = Problem(task="mediator", query=q, graph=g)
        return Problem(task="mediator", query=q, graph=g, text=problem_text(g, p.family.question_text(q), "dot"))

    try:
        register_generator("mediator", make, replace=True)
        p = generate_item("mediator", 0, GenConfig(seed=1))
        assert p.meta["source"] == "generated" and p.meta["encoding"] == "dot" and p.meta["n_valid"] == 2
        check_encoding(p)
    finally:
        register_generator("mediator", spec, replace=True)


def test_prompt_encoding_reads_every_header():
    g = CausalGraph.build(["A", "B", "C"], [("A", "B")], [("B", "C")])
    for enc in ENCODINGS:
        p = Problem(task="mediator", query={"treatment": "A", "outcome": "B"}, graph=g,
                    text=problem_text(g, "Question?", enc))
        assert prompt_encoding(p) == enc
    assert prompt_encoding(Problem(task="mediator", query={"treatment": "A", "outcome": "B"}, graph=g)) == "arrows"
    assert prompt_encoding(Problem(task="mediator", query={"treatment": "A", "outcome": "B"}, graph=g,
                                   text="A causes B.")) is None


# ---- knights and knaves, constructed SCMs (direct calls) ----------------------------------------------
def test_knights_direct_calls_count_people():
    from calver.data_gen.knights import generate_kk

    for n in (2, 3, 5, 7):
        for i in range(3):
            p = generate_kk(n, i, 2)
            check_contract(p, "knights")
            check_encoding(p)
            assert p.meta["people"] == n == len(set(re.findall(r'^(\w+) \w+(?: you)?: "', p.text, re.M)))


def test_constructed_scm_ate_is_exact():
    from calver.data_gen.ate import generate_ate

    for i in range(6):
        p = generate_ate(i, 4, n_nodes=5 + i % 3)
        check_contract(p, "ate")
        check_encoding(p)
        check_ate(p)


# ---- CLEAR ----------------------------------------------------------------------------------------------
def test_clear_fills_the_contract():
    items = [json.loads(line) for line in CLEAR_SAMPLE.read_text().splitlines() if line.strip()]
    ps = load_clear(CLEAR_SAMPLE)
    assert ps
    uids = {i["uid"] for i in items}
    for p in ps:
        check_contract(p, "CLEAR")
        check_encoding(p, rendered=False)  # CLEAR's own sentence, read by the clear parser
        assert brute_n_valid(p) is not None
        assert p.source_id in uids and p.id.startswith(f"clear-{p.source_id}")


# ---- bnlearn and CausalGraph2LLM ------------------------------------------------------------------------
BN_TASKS = [("backdoor_set", "any"), ("backdoor_set", "minimal"), ("frontdoor_set", "any"),
            ("separation_set", "maximal"), ("mediator", "any"), ("intervention_reachability", "any")]


@pytest.fixture
def bnlearn(tmp_path_factory, monkeypatch):
    pytest.importorskip("pgmpy", reason="pgmpy (which ships the bnlearn .bif.gz files) is not installed")
    from calver.data_gen import bnlearn as bn

    monkeypatch.setenv("CALVER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    bn._cached.cache_clear()
    yield bn
    bn._cached.cache_clear()


def _key(net: str, p: Problem) -> str:
    return json.dumps([net, p.task, p.query], sort_keys=True)


def test_bnlearn_contract_ids_and_source_ids(bnlearn):
    by_sid: dict[str, set] = {}
    brute = 0
    for net in ("asia", "sachs", "child"):
        for seed in (0, 1):
            for task, variant in BN_TASKS:
                ps = bnlearn.bnlearn_problems(net, task, 4, seed, variant=variant, nontrivial=False)
                for i, p in enumerate(ps):
                    assert p.id == f"bnlearn-{net}-{task}-{seed}-{i}"
                    check_contract(p, "bnlearn")
                    check_encoding(p)
                    assert p.meta["network"] == net
                    brute += brute_n_valid(p) is not None
                    by_sid.setdefault(p.source_id, set()).add(_key(net, p))
            for i, p in enumerate(bnlearn.ate_problems(net, 2, seed)):
                assert p.id == f"bnlearn-{net}-ate-{seed}-{i}"
                check_contract(p, "bnlearn")
                check_encoding(p)
                check_ate(p)
                by_sid.setdefault(p.source_id, set()).add(_key(net, p))
    assert brute >= 20
    # one source id per (network, task, query), and one (network, task, query) per source id
    assert all(len(keys) == 1 for keys in by_sid.values())
    keys = [k for ks in by_sid.values() for k in ks]
    assert len(keys) == len(set(keys))
    assert all(s.startswith(f"bnlearn-{json.loads(next(iter(k)))[0]}-") for s, k in by_sid.items())


def test_cg2llm_units_share_one_source_id_across_encodings(bnlearn):
    from calver.data_gen.cg2llm import ENCODINGS as CG_ENCODINGS
    from calver.data_gen.cg2llm import cg2llm_problems

    by_sid: dict[str, set] = {}
    units: dict[tuple, set] = {}
    for net in ("sachs", "asia"):
        for task, variant in (("mediator", "any"), ("mediator", "all"), ("intervention_reachability", "any")):
            for seed in (0, 1):
                ps = cg2llm_problems(net, task, 4, seed, variant=variant)
                for p in ps:
                    tag = variant if task == "mediator" else "do"
                    assert p.id == f"cg2llm-{net}-{task}-{tag}-{seed}-{p.meta['unit']}-{p.meta['encoding']}"
                    check_contract(p, "cg2llm")
                    check_encoding(p)
                    units.setdefault((net, task, variant, seed, p.meta["unit"]), set()).add(p.source_id)
                    by_sid.setdefault(p.source_id, set()).add(_key(net, p))
                assert {p.meta["encoding"] for p in ps} == set(CG_ENCODINGS)
    assert all(len(s) == 1 for s in units.values())  # every encoding of a unit: one cluster
    assert all(len(k) == 1 for k in by_sid.values())  # a cluster is one (network, query)
    assert all(s.startswith("cg2llm-") for s in by_sid)


def test_cg2llm_on_a_supplied_graph_counts_mediators():
    from calver.data_gen.cg2llm import cg2llm_problems

    g = CausalGraph.build(["A", "B", "C", "D", "E"], [("A", "B"), ("A", "C"), ("B", "D"), ("C", "D"), ("D", "E")], ())
    ps = cg2llm_problems(g, "mediator", 3, 0, variant="any", name="toy")
    assert ps
    for p in ps:
        check_contract(p, "cg2llm")
        check_encoding(p)
        assert p.meta["network"] == "toy" and p.meta["n_valid"] == len(p.meta["mediators"])


# ---- the source-id scheme ---------------------------------------------------------------------------------
def test_query_source_id_is_readable_and_injective():
    q = {"variant": "any", "outcome": "dysp", "treatment": "smoke"}
    assert query_source_id("bnlearn", "asia", "backdoor_set", q) == "bnlearn-asia-backdoor_set-smoke-dysp-any"
    ate_q = {"treatment": "a", "outcome": "b", "threshold": -0.05}
    assert query_source_id("bnlearn", "asia", "ate_threshold", ate_q) == "bnlearn-asia-ate_threshold-a-b-m0.05"
    do_q = {"do": ["m", "k"], "source": "a", "target": "b"}
    assert query_source_id("cg2llm", "n", "mediator", do_q) == "cg2llm-n-mediator-a-b-m+k"
    # names a '-'-joined id could not tell apart, odd characters and long ids are hashed, never confused
    tricky = [("net", {"treatment": "a-b", "outcome": "c"}), ("net", {"treatment": "a", "outcome": "b-c"}),
              ("net-a", {"treatment": "b", "outcome": "c"}), ("net", {"treatment": "a", "outcome": "b~c"}),
              ("net", {"treatment": "x" * 90, "outcome": "c"}), ("net", {"treatment": "a", "outcome": "b"}),
              ("net", {"treatment": "a", "outcome": "b", "threshold": 0.1}),
              ("net", {"treatment": "a", "outcome": "b", "threshold": -0.1})]
    sids = [query_source_id("bnlearn", n, "backdoor_set", q) for n, q in tricky]
    assert len(set(sids)) == len(sids)
    assert all(len(s) <= 96 and "~" in s for s in sids[:5]) and "~" not in sids[5]
    assert query_source_id("bnlearn", "net", "backdoor_set", dict(reversed(list(tricky[0][1].items())))) == sids[0]
    # deterministic, and the same whatever the key order
    assert query_source_id("bnlearn", "asia", "backdoor_set", dict(reversed(list(q.items())))) == \
        "bnlearn-asia-backdoor_set-smoke-dysp-any"


def test_exhaustive_small_graph_counts_match_the_families():
    """brute_n_valid itself: on every query of small random graphs it equals the family's class size."""
    from calver.data_gen.meta import class_size

    rng = random.Random(3)
    for _ in range(8):
        nodes = list("ABCDE")
        g = CausalGraph.build(nodes, [(a, b) for a, b in itertools.combinations(nodes, 2) if rng.random() < 0.45], ())
        for x, y in itertools.permutations(nodes, 2):
            for task, v in (("backdoor_set", "any"), ("separation_set", "minimal"), ("mediator", "any")):
                q = {"x": [x], "y": [y], "variant": v} if task == "separation_set" else \
                    {"treatment": x, "outcome": y, "variant": v}
                p = Problem(task=task, query=q, graph=g)
                assert class_size(p) == brute_n_valid(p), (task, q, g.to_text())
