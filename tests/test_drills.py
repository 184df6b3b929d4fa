"""Lookup drills (``calver.data_gen.drills``) and ``calver drill-report``: the gold reply of every drill is
exact, its scan copies the GRAPH line's edges in order and marks them as networkx says, and the checker counts
a wrong reply as wrong."""

from __future__ import annotations

import json
import re

import networkx as nx
import pytest
from fixtures import edges_as_read

from calver.cli import main as cli_main
from calver.data_gen.drills import (
    DRILL_TASK,
    TRANSCRIBE_TASK,
    DrillCheck,
    DrillConfig,
    check_replies,
    draw_drill,
    drill_rows,
    drills,
)
from calver.data_gen.names import NAMINGS
from calver.data_gen.rationales import lookup_line
from calver.evaluation.drill_report import (
    compare_reports,
    lookups_by_edges,
    lookups_by_line,
    lookups_by_size,
    rates,
    solved_rates,
)
from calver.verifier.parsers import parse_graph

NAMED = [DrillConfig(n=60, seed=s, namings=(naming,), min_nodes=2, max_nodes=12)
         for s, naming in enumerate(("letters", "random_letters", "identifiers", "phrases", "mixed"))]


def _summed(items, replies) -> DrillCheck:
    return sum(check_replies(items, replies), DrillCheck())


def _edges_of(d):
    """The node's edges of the drill's kind, from networkx (the oracle)."""
    g = nx.DiGraph(list(d.graph.directed))
    g.add_nodes_from(d.graph.nodes)
    return set(g.in_edges(d.node)) if d.kind == "into" else set(g.out_edges(d.node))


def _scan_items(answer: str):
    scan = answer.split(": ", 1)[1].split(". Edges ", 1)[0]
    return [(tuple(item.rpartition(" ")[0].split(" -> ")), item.rpartition(" ")[2]) for item in scan.split(", ")]


@pytest.mark.parametrize("cfg", NAMED, ids=lambda c: c.namings[0])
def test_gold_reply_is_exact_and_agrees_with_networkx(cfg):
    for d in drills(cfg):
        items = _scan_items(d.answer)
        assert [e for e, _ in items] == list(d.order.directed)  # the GRAPH line's edges, in its order
        assert {e for e, mark in items if mark == "yes"} == _edges_of(d)
        assert {m for _, m in items} <= {"yes", "no"}
        c = d.check(d.answer).lookup
        assert (c.lookups, c.exact, c.scans, c.complete) == (1, 1, 1, 1)
        assert c.marks_right == c.scanned == len(d.graph.directed)
        assert c.true == len(_edges_of(d))


@pytest.mark.parametrize("cfg", NAMED, ids=lambda c: c.namings[0])
def test_rule_style_reply_is_the_list_alone_and_agrees_with_networkx(cfg):
    rule = DrillConfig(**{**cfg.__dict__, "lookup": "rule"})
    for scanned, d in zip(drills(cfg), drills(rule)):
        assert (d.graph, d.order, d.kind, d.node) == (scanned.graph, scanned.order, scanned.kind, scanned.node)
        assert d.question == scanned.question and d.system != scanned.system
        assert d.answer == "Edges " + scanned.answer.split(". Edges ", 1)[1]  # the scan's last sentence
        listed = d.answer.split(": ", 1)[1].removesuffix(".")
        got = [] if listed == "none" else [tuple(e.split(" -> ")) for e in listed.split(", ")]
        assert set(got) == _edges_of(d) and len(got) == len(set(got))
        rank = {e: i for i, e in enumerate(d.order.directed)}
        assert got == sorted(got, key=rank.__getitem__)  # in the GRAPH line's order
        c = d.check(d.answer).lookup
        assert (c.lookups, c.exact, c.scans) == (1, 1, 0)


@pytest.mark.parametrize("cfg", NAMED, ids=lambda c: c.namings[0])
def test_prompt_graph_line_reads_back_to_the_drill_graph(cfg):
    for d in drills(cfg)[:20]:
        line, question = d.question.split("\n")
        g = parse_graph(line.removeprefix("GRAPH: "), "arrows", kind=d.graph.kind)
        assert g.directed == d.graph.directed and g.bidirected == d.graph.bidirected
        assert set(g.nodes) == set(d.graph.nodes)
        assert question.startswith(f"List the edges {d.kind} ")


def test_drills_are_seeded_per_item_and_vary():
    first = [d.row() for d in drills(DrillConfig(n=12, seed=3))][:5]
    assert [d.row() for d in drills(DrillConfig(n=5, seed=3))] == first
    assert drill_rows(DrillConfig(n=5, seed=3)) != drill_rows(DrillConfig(n=5, seed=4))
    many = drills(DrillConfig(n=300, seed=0))
    assert {d.kind for d in many} == {"into", "out of"}
    assert {d.graph.kind.value for d in many} == {"DAG", "ADMG", "directed"}
    assert {len(d.graph.nodes) for d in many} == set(range(4, 10))
    assert any(not _edges_of(d) for d in many)  # some drills ask about a node without such edges
    row = many[0].row()
    assert row["task"] == DRILL_TASK and [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]


def test_sorted_order_when_not_shuffled():
    for d in drills(DrillConfig(n=30, seed=1, shuffle_order=False)):
        assert list(d.order.directed) == sorted(d.graph.directed)


def test_wrong_replies_are_counted_wrong():
    items = drills(DrillConfig(n=80, seed=7))
    def flip(answer):
        return answer.replace(" yes,", " \0,").replace(" no,", " yes,").replace(" \0,", " no,")
    def all_no(d):
        marks = ", ".join(f"{a} -> {b} no" for a, b in d.order.directed)
        return f"Scan for edges {d.kind} {d.node}: {marks}. Edges {d.kind} {d.node}: none."
    gold = _summed(items, [d.answer for d in items]).lookup
    no = _summed(items, [all_no(d) for d in items]).lookup
    assert no.marks_right == no.not_the_node_s == gold.not_the_node_s < gold.marks_right
    assert no.exact == sum(1 for d in items if not _edges_of(d))
    flipped = _summed(items, [flip(d.answer) for d in items]).lookup
    assert flipped.marks_right < gold.marks_right
    assert _summed(items, ["I do not know."] * len(items)).lookup.lookups == 0
    with pytest.raises(ValueError, match="replies"):
        _summed(items, [])


def test_lookup_line_refuses_bad_input():
    d = draw_drill(DrillConfig(n=1, seed=0), 0)
    with pytest.raises(ValueError, match="kind"):
        lookup_line("beside", d.node, d.graph)
    with pytest.raises(ValueError, match="not a node"):
        lookup_line("into", "no such node", d.graph)


@pytest.mark.parametrize("bad", [dict(n=-1), dict(min_nodes=1), dict(min_nodes=9, max_nodes=4), dict(density=0.0),
                                 dict(namings=("klingon",)), dict(kinds=("beside",)), dict(graph_kinds=()),
                                 dict(encodings=("morse",)), dict(encodings=()), dict(lookup="guess")])
def test_config_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="drills"):
        DrillConfig(**bad)


def test_every_naming_draws(tmp_path):
    for naming in NAMINGS:
        assert drills(DrillConfig(n=2, seed=0, namings=(naming,)))


def test_drill_report_command_end_to_end(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "drills.json"
    rc = cli_main(["drill-report", "--model", str(tiny_model_dir), "--backend", "hf", "--n", "3", "--max_tokens", "8",
                   "--out", str(out)])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["drills"]["n"] == 3 and report["drills"]["seed"] == 9001
    # 8 random tokens state no lookup: nothing is counted, and no rate is invented
    assert report["lookups"] == 0 and report["exact"] is None and report["marks_right"] is None
    for split in ("by_lookup", "by_size", "by_edges"):  # n=3 drills, all lookups by default
        assert sum(v["drills"] for v in report[split].values()) == 3
    assert all(v["solved"] == 0.0 for v in report["by_lookup"].values())
    assert json.loads(capsys.readouterr().out)["model"] == str(tiny_model_dir)
    rc = cli_main(["drill-report", "--model", str(tiny_model_dir), "--backend", "hf", "--n", "4", "--max_tokens", "8",
                   "--kinds", "transcribe", "--encodings", "matrix", "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0 and report["transcriptions"] == 4 and report["lookups"] == 0
    assert set(report["by_encoding"]) == {"matrix"} and report["by_encoding"]["matrix"]["transcriptions"] == 4
    assert report["graph_exact"] == 0.0  # 8 random tokens copy no graph


def test_report_rates_count_listed_edges_against_the_graph():
    items = drills(DrillConfig(n=40, seed=11, lookup="rule"))
    gold = rates(_summed(items, [d.answer for d in items]))
    assert gold["exact"] == gold["lookup_precision"] == gold["lookup_recall"] == gold["lookup_in_graph"] == 1.0
    # one true edge dropped from each lookup that has any, and an invented edge added to each
    def damaged(d):
        true = sorted(_edges_of(d), key=list(d.order.directed).index)
        listed = [*true[1:], ("nobody", d.node)]
        return f"Edges {d.kind} {d.node}: " + ", ".join(f"{a} -> {b}" for a, b in listed) + "."
    got = rates(_summed(items, [damaged(d) for d in items]))
    true = sum(len(_edges_of(d)) for d in items)
    kept = true - sum(1 for d in items if _edges_of(d))
    assert got["exact"] == 0.0 and got["lookup_recall"] == kept / true
    assert got["lookup_precision"] == got["lookup_in_graph"] == kept / (kept + len(items))


def test_a_drill_is_solved_only_by_the_asked_lookup_listed_exactly():
    for lookup in ("scan", "rule"):
        items = drills(DrillConfig(n=60, seed=12, lookup=lookup, kinds=("into", "out of", "transcribe")))
        assert all(d.solved(d.answer) for d in items)
    items = [d for d in drills(DrillConfig(n=80, seed=13, lookup="rule")) if _edges_of(d)]
    for d in items:
        other = next(n for n in d.graph.nodes if n != d.node)
        assert not d.solved(d.answer.replace(f"Edges {d.kind} {d.node}:", f"Edges {d.kind} {other}:", 1))
        flipped = "out of" if d.kind == "into" else "into"
        assert not d.solved(d.answer.replace(f"Edges {d.kind} ", f"Edges {flipped} ", 1))  # the other kind
        first = sorted(_edges_of(d))[0]
        dropped = [e for e in d.order.directed if e in _edges_of(d) and e != first]
        short = f"Edges {d.kind} {d.node}: " + (", ".join(f"{a} -> {b}" for a, b in dropped) or "none") + "."
        assert not d.solved(short) and not d.solved("")
        assert d.solved(f"Edges {d.kind} {other}: none.\n{d.answer}")  # the asked node's lookup decides


def test_lookups_by_line_splits_the_solved_drills_by_kind_and_graph_line():
    items = drills(DrillConfig(n=80, seed=21, lookup="rule", kinds=("into", "out of", "transcribe"),
                               lookup_encodings=("arrows", "json_parents")))
    # every third drill answered with its gold reply, the rest with nothing
    replies = [d.answer if i % 3 == 0 else "" for i, d in enumerate(items)]
    got = lookups_by_line(items, solved_rates(items, replies)["per_drill"])
    want: dict[str, list[int]] = {}
    for i, d in enumerate(items):
        if d.kind in ("into", "out of"):
            t = want.setdefault(f"{d.kind} / {d.encoding}", [0, 0])
            t[0] += 1
            t[1] += int(i % 3 == 0)
    assert set(got) == {"into / arrows", "into / json_parents", "out of / arrows", "out of / json_parents"}
    assert {k: (v["drills"], v["solved"]) for k, v in got.items()} == {k: (n, s / n) for k, (n, s) in want.items()}
    assert sum(v["drills"] for v in got.values()) < len(items)  # the transcriptions are not lookups


def test_lookups_by_size_and_by_edges_count_against_networkx():
    items = drills(DrillConfig(n=120, seed=22, lookup="rule", min_nodes=3, max_nodes=11,
                               kinds=("into", "out of", "transcribe")))
    replies = [d.answer if i % 2 == 0 else "" for i, d in enumerate(items)]  # every other drill solved
    per = solved_rates(items, replies)["per_drill"]
    by_size, by_edges = lookups_by_size(items, per), lookups_by_edges(items, per)
    want_size: dict[str, list[int]] = {}
    want_edges: dict[str, list[int]] = {}
    for i, d in enumerate(items):
        if d.kind == "transcribe":
            continue
        g = nx.DiGraph(list(d.graph.directed))
        g.add_nodes_from(d.graph.nodes)
        n = g.in_degree(d.node) if d.kind == "into" else g.out_degree(d.node)
        for want, key in ((want_size, str(g.number_of_nodes())), (want_edges, str(n) if n < 4 else "4+")):
            t = want.setdefault(key, [0, 0])
            t[0] += 1
            t[1] += int(i % 2 == 0)
    for got, want in ((by_size, want_size), (by_edges, want_edges)):
        assert {k: (v["drills"], v["solved"]) for k, v in got.items()} == {k: (n, s / n) for k, (n, s) in want.items()}
    assert list(by_size) == sorted(by_size, key=int) and "10" in by_size  # numeric order: 10 after 9
    assert list(by_edges)[-1] == "4+" and list(by_edges)[0] == "0"


def _report(items, replies, model):
    return {"model": model, "drills": {"seed": 1}, **solved_rates(items, replies)}


def test_drill_compare_pairs_the_drills_both_reports_asked(tmp_path, capsys):
    items = drills(DrillConfig(n=60, seed=14, lookup="rule"))
    a_replies = [d.answer if i % 3 else "" for i, d in enumerate(items)]  # a solves 2 in 3
    b_replies = [d.answer if i % 2 else "" for i, d in enumerate(items)]  # b solves 1 in 2
    a, b = _report(items, a_replies, "a"), _report(items, b_replies, "b")
    assert a["solved"] == 40 / 60 and a["solved_ci"][0] < 40 / 60 < a["solved_ci"][1]
    got = compare_reports(a, b)
    assert (got["drills"], got["solved_a"], got["solved_b"]) == (60, 40 / 60, 30 / 60)
    assert got["b_minus_a"] == pytest.approx(-10 / 60) and got["ci"][0] < -10 / 60 < got["ci"][1]
    b_less = {**b, "per_drill": {i: v for i, v in list(b["per_drill"].items())[:30]}}  # b asked fewer drills
    assert compare_reports(a, b_less)["drills"] == 30
    with pytest.raises(ValueError, match="different settings"):
        compare_reports(a, {**b, "drills": {"seed": 2}})
    with pytest.raises(ValueError, match="no drill"):
        compare_reports(a, {**b, "per_drill": {"elsewhere": 1}})
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert cli_main(["drill-compare", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "b.json"),
                     "--out", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["drills"] == 60
    (tmp_path / "odd.json").write_text(json.dumps({**b, "per_drill": {"x": "yes"}}))
    assert cli_main(["drill-compare", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "odd.json")]) == 2
    assert "per_drill outcomes must be 0 or 1" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert cli_main(["drill-compare", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "b.json"),
                     "--out", str(tmp_path / "file" / "c.json")]) == 2
    (tmp_path / "bad.json").write_text('{"model": "m"}')
    assert cli_main(["drill-compare", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "bad.json")]) == 2
    assert cli_main(["drill-compare", "--a", str(tmp_path / "a.json"), "--b", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "bad.json: not a drill report" in err and "none.json: not a readable drill report" in err


def test_drill_report_refuses_bad_drill_settings(capsys):
    assert cli_main(["drill-report", "--model", "m", "--kinds", "sideways"]) == 2
    assert "kinds" in capsys.readouterr().err


def test_drill_report_refuses_exclude_data_it_cannot_read(tmp_path, capsys):
    assert cli_main(["drill-report", "--model", "m", "--exclude", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err



def test_drill_report_refuses_a_missing_model(capsys):
    assert cli_main(["drill-report"]) == 2
    assert "model" in capsys.readouterr().err


# ---- transcription drills ---------------------------------------------------------------------------------
TRANSCRIBE = [DrillConfig(n=50, seed=s, namings=(naming,), min_nodes=2, max_nodes=12, kinds=("transcribe",),
                          encodings=("arrows", "clear", "json_parents", "prose", "matrix", "json", "dot", "graphml"))
              for s, naming in enumerate(("letters", "random_letters", "identifiers", "phrases"))]


@pytest.mark.parametrize("cfg", TRANSCRIBE, ids=lambda c: c.namings[0])
def test_transcription_gold_is_the_prompts_graph_in_reading_order(cfg):
    seen = set()
    for d in drills(cfg):
        row = d.row()
        assert row["task"] == TRANSCRIBE_TASK and row["id"].startswith(TRANSCRIBE_TASK)
        block = d.question.split("\n", 1)[1].rsplit("\n\n", 1)[0]
        assert parse_graph(block, kind=d.graph.kind) == d.graph  # the prompt shows the drill's graph
        gold = parse_graph(d.answer.removeprefix("GRAPH: "), "arrows", kind=d.graph.kind)
        assert gold == d.graph
        read = edges_as_read(block, d.encoding)
        want = read[0] if read is not None else list(d.order.directed)  # edge lists: as listed
        assert re.findall(r"(?:^|, )(.+?) -> (.+?)(?=, |$)", d.answer.removeprefix("GRAPH: ")) == list(want)
        t = d.check(d.answer).transcription
        assert (t.drills, t.parsed, t.exact, t.verbatim) == (1, 1, 1, 1)
        assert t.right == t.listed == t.graph_edges == len(d.graph.directed) + len(d.graph.bidirected)
        seen.add(d.encoding)
    assert len(seen) >= 6


def test_wrong_transcriptions_are_counted_wrong():
    items = [d for d in drills(DrillConfig(n=60, seed=2, kinds=("transcribe",))) if len(d.graph.directed) >= 2]
    def drop_one(d):
        return d.answer.replace(f"{d.order.directed[0][0]} -> {d.order.directed[0][1]}", "", 1).replace(
            "GRAPH: , ", "GRAPH: ")
    def reordered(d):
        return "GRAPH: " + d.graph.to_text()  # sorted: the right graph, not the text's order
    dropped = _summed(items, [drop_one(d) for d in items]).transcription
    assert dropped.exact == 0 and dropped.right < dropped.graph_edges and dropped.right == dropped.listed
    moved = _summed(items, [reordered(d) for d in items]).transcription
    assert moved.exact == len(items) and moved.verbatim < len(items)
    none = _summed(items, ["The graph has edges."] * len(items)).transcription
    assert (none.drills, none.parsed, none.exact) == (len(items), 0, 0)
    broken = _summed(items, ["GRAPH: A -> -> B"] * len(items)).transcription
    assert broken.parsed == 0 and broken.listed == 0
    lookups_only = _summed(items, [d.answer for d in items]).lookup
    assert lookups_only.lookups == 0  # a transcription is not a lookup


def test_a_transcription_is_read_as_the_graph_bit_reads_a_graph_slot():
    """The reply's GRAPH slot is split as a trace's is (decoration, other slots after it) and parsed with the
    drill graph's class: a copy the GRAPH bit would refuse does not count as read."""
    dags = [d for d in drills(DrillConfig(n=80, seed=6, kinds=("transcribe",), graph_kinds=("DAG",)))
            if d.graph.directed]
    for d in dags:
        line = d.answer.removeprefix("GRAPH: ")
        t = d.check(f"**GRAPH:** `{line}`\nQUERY: none").transcription
        assert (t.parsed, t.exact, t.verbatim) == (1, 1, 1)
        x, y = sorted(d.graph.directed)[0]
        cyclic = d.check(f"GRAPH: {line}, {y} -> {x}").transcription  # a cycle: not a DAG
        assert (cyclic.parsed, cyclic.exact, cyclic.listed) == (0, 0, 0)
        twice = d.check(f"GRAPH: {line}\nGRAPH: {line}").transcription  # a duplicated slot fails the bit
        assert twice.parsed == 0


def test_lookup_drills_are_unchanged_by_the_transcription_kind():
    """Default drills draw lookups only, as before the transcription kind: their rows are the same."""
    assert DrillConfig().kinds == ("into", "out of")
    mixed = drills(DrillConfig(n=80, seed=4, kinds=("into", "out of", "transcribe")))
    assert {d.kind for d in mixed} == {"into", "out of", "transcribe"}
    assert {d.encoding for d in mixed if d.kind == "transcribe"} == {"arrows", "clear", "json_parents", "prose",
                                                                      "matrix"}
