"""``calver contamination``: training graphs isomorphic to a benchmark's (up to renaming) and equal K&K puzzles
are found; the isomorphism test agrees with a brute-force search over node bijections."""

from __future__ import annotations

import json
import random
import re

from fixtures import iso_brute_force, random_admg, random_dag, renamed_graph
from testing_utils import require_modules

from calver.bench.contamination import MIN_NODES, check
from calver.data_gen.generators import GenConfig, generate
from calver.data_gen.isomorphism import GraphIndex, isomorphic, repeated_graphs
from calver.data_gen.knights import generate_kk
from calver.evaluation.audits import rename_problem
from calver.verifier import CausalGraph


def test_isomorphism_agrees_with_brute_force():
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for _ in range(120):
        n = rng.randint(3, 6)
        a = random_admg(rng, n) if rng.random() < 0.5 else random_dag(rng, n)
        b = renamed_graph(a, rng) if rng.random() < 0.4 else (random_admg(rng, n) if rng.random() < 0.5
                                                          else random_dag(rng, n))
        want = iso_brute_force(a, b)
        assert isomorphic(a, b) == want
        seen[want] += 1
    assert seen[True] >= 20 and seen[False] >= 20  # both outcomes exercised


def test_graph_index_finds_the_first_isomorphic_graph():
    """``GraphIndex.find`` (behind ``calver contamination`` and ``drill-report --exclude``) returns the first
    indexed graph that a brute-force bijection search calls isomorphic, and None where none is."""
    rng = random.Random(11)
    indexed = []
    for i in range(60):
        n = rng.randint(3, 5)
        g = random_admg(rng, n) if i % 3 == 0 else random_dag(rng, n)
        indexed.append(renamed_graph(indexed[rng.randrange(i)], rng) if i and i % 5 == 0 else g)
    index = GraphIndex((f"g{i}", g) for i, g in enumerate(indexed))
    assert len(index) == 60
    queries = [renamed_graph(rng.choice(indexed), rng) for _ in range(40)]
    queries += [random_admg(rng, n) if rng.random() < 0.5 else random_dag(rng, n) for n in [3, 4, 5, 6] * 10]
    found = 0
    for q in queries:
        want = next((f"g{i}" for i, g in enumerate(indexed) if iso_brute_force(q, g)), None)
        assert index.find(q) == want
        found += want is not None
    assert 40 <= found < len(queries)
    labelled = [(f"q{i}", q) for i, q in enumerate(queries)]
    assert repeated_graphs(labelled, indexed) == {lab for lab, q in labelled if index.find(q) is not None}


def test_edge_types_count():
    dag = CausalGraph.build(nodes=list("ABCDE"), directed=[("A", "B"), ("B", "C"), ("C", "D"), ("D", "E")])
    admg = CausalGraph.build(nodes=list("ABCDE"), directed=[("A", "B"), ("B", "C"), ("C", "D")],
                             bidirected=[("D", "E")])
    assert not isomorphic(dag, admg) and isomorphic(dag, renamed_graph(dag, random.Random(0)))


def test_planted_graphs_and_puzzles_are_found_and_only_they():
    rng = random.Random(1)
    bench = generate("backdoor_set", 12, GenConfig(seed=7, n_nodes=(6, 8)))
    train = generate("backdoor_set", 20, GenConfig(seed=8, n_nodes=(6, 8)))
    clean = check(train, [("row", p) for p in bench])
    planted = rename_problem(bench[3], {n: f"z_{i}" for i, n in enumerate(rng.sample(list(bench[3].graph.nodes),
                                                                                  len(bench[3].graph.nodes)))})
    planted.id = "planted"
    puzzles = [generate_kk(3, i, 0) for i in range(4)]
    rep = check([*train, planted, generate_kk(3, 2, 0), generate_kk(3, 9, 5)],
                [("row", p) for p in bench] + [("kk_3", p) for p in puzzles])
    new = {(m.kind, m.train_id) for m in rep.matches} - {(m.kind, m.train_id) for m in clean.matches}
    assert new == {("graph", "planted"), ("puzzle", "kk-3-0-2")}
    assert next(m.bench for m in rep.matches if m.train_id == "planted") == f"row: {bench[3].id}"
    for m in clean.matches:  # a chance repeat among random 6-8 node graphs is a real isomorphism
        assert isomorphic(next(p.graph for p in train if p.id == m.train_id),
                          next(p.graph for p in bench if p.id == m.bench.split(": ")[1]))
    assert rep.n_train_puzzles == 2 and rep.n_bench_puzzles == 4 and rep.n_bench_graphs == 12


def test_small_graphs_are_left_out():
    tiny = generate("backdoor_set", 3, GenConfig(seed=1, n_nodes=(4, 4)))
    rep = check(tiny, [("row", p) for p in tiny])
    assert MIN_NODES == 5 and rep.n_train_graphs == 0 and rep.clean


@require_modules("pgmpy")
def test_cli_finds_a_renamed_bench_graph(tmp_path, capsys):
    from calver.bench.contamination import bench_items
    from calver.cli import main

    items = bench_items("quick", ["bnlearn_supplied"])
    row_problem = next(p for label, p in items if label == "bnlearn_supplied")
    copy = rename_problem(row_problem, {n: f"n{i}" for i, n in enumerate(row_problem.graph.nodes)})
    copy.id = "mine-0"
    fresh = generate("mediator", 5, GenConfig(seed=3, n_nodes=(5, 6)))
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in [*fresh, copy]))
    assert main(["contamination", "--train", str(path), "--suite", "quick", "--rows", "bnlearn_supplied"]) == 1
    out = capsys.readouterr().out
    assert f"graph: training mine-0 = bnlearn_supplied: {row_problem.id}" in out
    clean = tmp_path / "clean"
    assert main(["contamination", "--train", str(path), "--suite", "quick", "--rows", "bnlearn_supplied",
                 "--clean_out", str(clean)]) == 1  # the source is still contaminated; the copy is not
    dropped = set(re.findall(r"training (\S+) =", out))  # mine-0, and any chance repeat among the fresh ones
    kept = [json.loads(x)["id"] for x in (clean / "problems.jsonl").read_text().splitlines()]
    assert "mine-0" in dropped and kept == [p.id for p in fresh if p.id not in dropped]
    assert json.loads((clean / "manifest.json").read_text())["contamination"]["dropped"][-1] == "mine-0"
    capsys.readouterr()
    assert main(["contamination", "--train", str(clean), "--suite", "quick", "--rows", "bnlearn_supplied"]) == 0
    path.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in fresh))
    assert main(["contamination", "--train", str(path), "--suite", "quick", "--rows", "bnlearn_supplied"]) in (0, 1)
    assert main(["contamination", "--train", str(tmp_path / "missing"), "--suite", "quick"]) == 2
    assert main(["contamination", "--train", str(path), "--suite", "huge"]) == 2


@require_modules("pgmpy")
def test_clean_copy_keeps_the_sources_rows(tmp_path):
    """The clean copy is the source's rows less the dropped ones: its SFT traces keep the source's rule answers,
    witness cap and system message (it once rewrote them with random answers and witness paths)."""
    from calver.cli import main

    src, clean = tmp_path / "mix", tmp_path / "clean"
    assert main(["gen", "--tasks", "backdoor_set", "separation_set", "--n", "8", "--seed", "4", "--out", str(src),
                 "--system", "compact", "--answers", "rule", "--n_nodes", "5", "8"]) == 0
    main(["contamination", "--train", str(src), "--suite", "quick", "--rows", "bnlearn_supplied",
          "--clean_out", str(clean)])
    rows = lambda d: [json.loads(x) for x in (d / "sft.jsonl").read_text().splitlines()]  # noqa: E731
    by_id = {r["id"]: r["messages"] for r in rows(src)}
    kept = rows(clean)
    assert kept and all(r["messages"] == by_id[r["id"]] for r in kept)
    manifest = json.loads((clean / "manifest.json").read_text())
    assert (manifest["sft_answers"], manifest["sft_witnesses"], manifest["system_prompt"]) == ("rule", 0, "compact")


@require_modules("pgmpy")
def test_against_checks_extra_evaluation_sets(tmp_path, capsys):
    """--against: a held-out split counts as evaluation items, so a renamed copy of one of its graphs in the
    training set is found (and dropped by --clean_out)."""
    from calver.cli import main

    held = generate("backdoor_set", 4, GenConfig(seed=9, n_nodes=(6, 7)))
    copy = rename_problem(held[2], {n: f"q{i}" for i, n in enumerate(held[2].graph.nodes)})
    copy.id = "copy-0"
    train = [*generate("separation_set", 3, GenConfig(seed=10, n_nodes=(6, 7))), copy]
    tp, hp = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    tp.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in train))
    hp.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in held))
    args = ["contamination", "--train", str(tp), "--suite", "quick", "--rows", "bnlearn_supplied"]
    assert main([*args, "--against", str(hp)]) == 1
    assert f"graph: training copy-0 = {hp}: {held[2].id}" in capsys.readouterr().out
    assert main(args) in (0, 1) and "copy-0" not in capsys.readouterr().out
