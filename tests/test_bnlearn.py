"""bnlearn networks from the pgmpy wheel, offline: parsing, cache, problems, ATE, CausalGraph2LLM items."""

from __future__ import annotations

import gzip
import json
import random
import warnings

import pytest

pytest.importorskip("pgmpy", reason="pgmpy (which ships the bnlearn .bif.gz files) is not installed")

from calver.data_gen import bnlearn  # noqa: E402
from calver.data_gen.bnlearn import (  # noqa: E402
    ancestral_subgraph,
    ate_problems,
    binarized_cpts,
    binary_ate,
    bnlearn_problems,
    load_network,
    network_path,
    treatment_outcome_pairs,
)
from calver.data_gen.cg2llm import ENCODINGS, cg2llm_problems  # noqa: E402
from calver.verifier import grade, parse_graph  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CALVER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    bnlearn._cached.cache_clear()
    yield
    bnlearn._cached.cache_clear()


def _pgmpy_model(name):
    from pgmpy.readwrite import BIFReader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = gzip.decompress(network_path(name).read_bytes()).decode()
        return BIFReader(string=text).get_model()


@pytest.mark.parametrize("name", ["asia", "sachs", "alarm"])
def test_structure_matches_pgmpy(name):
    g, cpds = load_network(name)
    m = _pgmpy_model(name)
    assert set(g.nodes) == set(m.nodes())
    assert g.directed == {(a, b) for a, b in m.edges()}
    for v in g.nodes:
        cpd = m.get_cpds(v)
        assert cpds[v]["states"] == list(cpd.state_names[v])
        assert sorted(cpds[v]["parents"]) == sorted(cpd.variables[1:])
        for row in cpds[v]["table"].values():
            assert abs(sum(row) - 1) < 1e-6


def test_known_sizes_and_cached_reload(tmp_path):
    sizes = {"asia": (8, 8), "sachs": (11, 17), "alarm": (37, 46), "child": (20, 25), "insurance": (27, 52)}
    for name, (n, e) in sizes.items():
        g, _ = load_network(name, cache=tmp_path)
        assert (len(g), len(g.directed)) == (n, e), name
    assert (tmp_path / "alarm.json").is_file()
    first = load_network("alarm", cache=tmp_path)
    bnlearn._cached.cache_clear()
    data = json.loads((tmp_path / "alarm.json").read_text())
    data["nodes"] = list(data["nodes"])  # reload must come from the JSON cache
    again = load_network("alarm", cache=tmp_path)
    assert again[0] == first[0] and again[1] == first[1]
    # a stale cache (other sha) is re-parsed
    data["sha256"] = "0"
    (tmp_path / "alarm.json").write_text(json.dumps(data))
    bnlearn._cached.cache_clear()
    assert load_network("alarm", cache=tmp_path)[0] == first[0]


def test_pairs_are_nontrivial():
    from calver.verifier import get_family
    from calver.verifier.primitives import ancestors, is_separated

    g, _ = load_network("alarm")
    fam = get_family("backdoor_set")
    pairs = treatment_outcome_pairs(g, random.Random(1), 6)
    assert len(pairs) == 6
    for x, y, sub in pairs:
        assert x in ancestors(g, [y])
        assert sub == ancestral_subgraph(g, (x, y))
        assert not is_separated(sub, [x], [y], [], remove_outgoing_of=[x])
        assert len(fam.validity_class(sub, {"treatment": x, "outcome": y, "variant": "any"}, limit=2)) >= 2


@pytest.mark.parametrize("task,variant", [("backdoor_set", "any"), ("backdoor_set", "minimal"),
                                          ("frontdoor_set", "any"), ("separation_set", "any"), ("mediator", "all"),
                                          ("intervention_reachability", "any")])
def test_problems_are_answerable(task, variant):
    nets = ("alarm", "child") if task != "frontdoor_set" else ("asia", "alarm", "hepar2")
    probs = [p for net in nets for p in bnlearn_problems(net, task, 6, 0, variant=variant)]
    assert len(probs) >= (6 if task != "frontdoor_set" else 3)
    for p in probs:
        fam = p.family
        q = fam.normalize_query(p)
        if task == "intervention_reachability":
            assert grade(p, p.meta["label"]) and not grade(p, not p.meta["label"])
            continue
        valid = fam.validity_class(p.graph, q, limit=None if variant != "any" else 1)
        assert valid and grade(p, valid[0])
    if task == "intervention_reachability":
        labels = [p.meta["label"] for p in probs]
        assert abs(labels.count(True) - labels.count(False)) <= 2


def test_ate_matches_pgmpy_causal_inference():
    """asia is all-binary, so binarization is a re-coding and the ATE is the real interventional one."""
    from pgmpy.inference import CausalInference

    g, cpds = load_network("asia")
    ci = CausalInference(_pgmpy_model("asia"))
    probs = ate_problems("asia", 3, 0)
    assert probs
    for p in probs:
        x, y = p.query["treatment"], p.query["outcome"]
        sx, sy = cpds[x]["states"], cpds[y]["states"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hi = ci.query([y], do={x: sx[0]}, show_progress=False).get_value(**{y: sy[0]})
            lo = ci.query([y], do={x: sx[1]}, show_progress=False).get_value(**{y: sy[0]})
        assert abs(p.meta["ate"] - (hi - lo)) < 1e-9
        assert grade(p, p.meta["label"]) and not grade(p, not p.meta["label"])


def test_binarized_multivalued_cpts_are_consistent():
    g, cpds = load_network("sachs")
    for p in ate_problems("sachs", 3, 0):
        x, y = p.query["treatment"], p.query["outcome"]
        cpts = binarized_cpts(g, cpds, (x, y))
        assert set(cpts) == set(p.graph.nodes)
        assert all(0 <= v <= 1 for c in cpts.values() for v in c["table"].values())
        assert abs(binary_ate(cpts, x, y) - p.meta["ate"]) < 1e-9  # own VE == calver.verifier.scm.true_ate
        assert abs(p.meta["ate"] - p.query["threshold"]) >= 0.02 - 1e-9


@pytest.mark.parametrize("task,variant", [("mediator", "any"), ("mediator", "all"),
                                          ("intervention_reachability", "any")])
def test_cg2llm_items(task, variant):
    probs = (cg2llm_problems("sachs", task, 8, 0, variant=variant)
             + cg2llm_problems("alarm", task, 8, 0, variant=variant))
    assert {p.meta["encoding"] for p in probs} == set(ENCODINGS)
    for p in probs:
        graph_text = p.text.rsplit("\n\n", 1)[0]
        assert parse_graph(graph_text, fmt="json" if p.meta["encoding"] == "json_parents" else None) == p.graph
        fam = p.family
        if task == "intervention_reachability":
            assert grade(p, p.meta["label"])
        else:
            assert grade(p, fam.validity_class(p.graph, fam.normalize_query(p))[0])
    if task == "intervention_reachability":
        labels = [p.meta["label"] for p in probs if p.meta["encoding"] == "dot"]
        assert labels.count(True) == labels.count(False)
