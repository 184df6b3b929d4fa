"""``calver data bnlearn | cg2llm | kk``: the benchmark adapters as commands (issue 21, item 1).

Each command's problems are what ``calver sample --problems`` reads, carry one cluster id per question
and the breakdown fields, and are gradeable: each family's canonical trace of a problem scores 6/6 and
its answer grades correct.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from testing_utils import is_available

from calver.cli import main
from calver.infer.sample import load_problem_rows
from calver.verifier import Problem, get_family, grade, score

# the bnlearn networks (bnlearn, cg2llm) are the .bif.gz files the pgmpy wheel ships (extra 'data')
require_pgmpy = pytest.mark.skipif(not is_available("pgmpy"),
                                   reason="pgmpy (which ships the bnlearn .bif.gz files) is not installed")


def _run(tmp_path, *args) -> list[Problem]:
    out = tmp_path / args[0]
    assert main(["data", *args, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = load_problem_rows(out)  # what `calver sample --problems OUT` reads
    problems = [Problem.from_dict(r["problem"]) for r in rows]
    assert summary["n_problems"] == len(problems) > 0
    assert len({p.id for p in problems}) == len(problems)
    return problems


def _gradeable(problems: list[Problem]) -> None:
    for p in problems:
        ts = score(get_family(p.task).canonical_trace(p), p)
        assert ts.total == 6 and grade(p, ts.answer), (p.id, ts.reasons)


@require_pgmpy
def test_bnlearn_supplied_and_ate(tmp_path):
    problems = _run(tmp_path, "bnlearn", "--nets", "asia", "sachs", "--tasks", "backdoor_set", "ate", "--n", "3")
    per = Counter((p.meta["network"], p.task) for p in problems)
    assert set(per) == {(n, t) for n in ("asia", "sachs") for t in ("backdoor_set", "ate_threshold")}
    assert max(per.values()) <= 3
    assert all(p.mode == "supplied" and p.meta["source"] == "bnlearn" for p in problems)
    assert len({p.source_id for p in problems}) == len(problems)  # one cluster per question, not per network
    assert all(isinstance(p.meta["ate"], float) for p in problems if p.task == "ate_threshold")
    _gradeable(problems)


@require_pgmpy
def test_bnlearn_text_levels_are_constructed(tmp_path):
    problems = _run(tmp_path, "bnlearn", "--nets", "asia", "--tasks", "backdoor_set", "--n", "3", "--level", "L1")
    assert all(p.mode == "constructed" and p.meta["text_level"] == "L1" and p.text for p in problems)


@require_pgmpy
def test_cg2llm_one_cluster_per_question_across_encodings(tmp_path):
    problems = _run(tmp_path, "cg2llm", "--nets", "asia", "--n", "2", "--encodings", "prose", "dot")
    by_source = Counter(p.source_id for p in problems)
    assert set(by_source.values()) == {2}  # each question in both encodings, one cluster
    assert {p.meta["encoding"] for p in problems} == {"prose", "dot"}
    _gradeable(problems)


def test_kk_sizes(tmp_path):
    problems = _run(tmp_path, "kk", "--people", "3", "5", "--n", "4")
    assert Counter(p.meta["people"] for p in problems) == {3: 4, 5: 4}
    assert all(p.task == "knights_knaves" for p in problems)
    _gradeable(problems)


@pytest.mark.parametrize("args, needle", [
    (["bnlearn", "--nets", "nope"], "nets"),
    pytest.param(["bnlearn", "--level", "L4"], "level", marks=require_pgmpy),  # (the default nets come first)
    pytest.param(["cg2llm", "--encodings", "svg"], "encodings", marks=require_pgmpy),
    (["kk", "--people", "1"], "people"), (["kk", "--n", "0"], "'n'"),
])
def test_bad_settings_exit_2_with_one_line(tmp_path, capsys, args, needle):
    assert main(["data", *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize("name", ["clear", "bnlearn", "cg2llm", "kk"])
def test_help_documents_each_adapter(capsys, name):
    with pytest.raises(SystemExit) as e:
        main(["data", name, "--help"])
    assert e.value.code == 0
    assert "--out" in capsys.readouterr().out


@require_pgmpy
def test_bnlearn_backdoor_items_on_every_default_network_and_andes(tmp_path):
    """Every default network, and andes (223 nodes, almost no pair's ancestral subgraph fits 16 nodes), yields
    backdoor items; seeded and deterministic; each prompt graph is the pair's ancestral subgraph (networkx)
    and the family's answer is a valid back-door set by the independent oracle."""
    import networkx as nx
    import oracles as O

    from calver.data_gen.benchmark_cli import BNLEARN_DEFAULT_NETS
    from calver.data_gen.bnlearn import load_network

    nets = [*BNLEARN_DEFAULT_NETS, "andes"]
    args = ["bnlearn", "--nets", *nets, "--tasks", "backdoor_set", "--n", "3"]
    problems = _run(tmp_path, *args)
    summary = json.loads((tmp_path / "bnlearn" / "summary.json").read_text())
    assert summary["empty"] == [] and all(summary["items"][f"{n}/backdoor_set"] > 0 for n in nets)
    first = (tmp_path / "bnlearn" / "problems.jsonl").read_bytes()
    assert main(["data", *args, "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "problems.jsonl").read_bytes() == first
    for p in problems:
        full, _ = load_network(p.meta["network"])
        x, y = p.query["treatment"], p.query["outcome"]
        h = nx.DiGraph(list(full.directed))
        assert set(p.graph.nodes) == nx.ancestors(h, y) | {y} and x in nx.ancestors(h, y) and len(p.graph) <= 16
        g = O.G(p.graph.nodes, p.graph.directed, p.graph.bidirected)
        answer = get_family(p.task).canonical_trace(p)
        assert O.backdoor(g, x, y, set(score(answer, p).answer)), p.id
        # open backdoor path unless marked (only networks with no confounded pair: cancer, earthquake)
        confounded = not O.msep_nx(O.G(g.nodes, {e for e in g.D if e[0] != x}, ()), {x}, {y}, set())
        assert confounded == p.meta.get("backdoor_open", True), p.id
        assert p.meta["network"] in ("cancer", "earthquake") or confounded
