"""Rule rationales (calver.data_gen.rationales): what each says is checked against networkx, and the
paragraph changes neither the trace's slots nor its score."""

from __future__ import annotations

import json
import re

import networkx as nx
import pytest

from calver.data_gen.gen_config import GenConfig
from calver.data_gen.generators import canonical_answer, canonical_trace, generate
from calver.data_gen.rationales import RATIONALE_TASKS, rule_rationale, with_rationale
from calver.data_gen.trace_style import TraceStyle
from calver.verifier import get_family, score
from calver.verifier.contract import split_slots

NAMINGS = ("letters", "random_letters", "identifiers", "phrases")

PLAIN, REASONED, SCANNED = (TraceStyle("rule", 0, r) for r in ("none", "rule", "scan"))


def _problems(task, variants=("any",), n=24):
    out = []
    for seed, naming in enumerate(NAMINGS):
        cfg = GenConfig(seed=40 + seed, n_nodes=(4, 9), variants=variants, naming=(naming,))
        out += generate(task, n // len(NAMINGS), cfg)
    return out


def _edges(text: str) -> set[tuple[str, str]]:
    if text == "none":
        return set()
    return {tuple(part.split(" -> ")) for part in text.split(", ")}


def _sections(rationale: str, label: str) -> dict[str, set[tuple[str, str]]]:
    """``Edges into X: a -> X, b -> X.`` sections of a rationale, by node."""
    return {m.group(1): _edges(m.group(2)) for m in re.finditer(label + r" (.+?): (.+?)\.(?= Edges|$)", rationale)}


@pytest.mark.parametrize("task,variants", [("backdoor_set", ("any", "maximal")), ("frontdoor_set", ("any",)),
                                           ("separation_set", ("any", "maximal")), ("blocking_set", ("any",)),
                                           ("cycle_witness", ("any",))])
def test_rationale_states_the_graph_facts_and_keeps_the_score(task, variants):
    seen = 0
    for p in _problems(task, variants):
        obj = canonical_answer(p, "rule")
        plain, reasoned = canonical_trace(p, PLAIN), canonical_trace(p, REASONED)
        # the paragraph is not part of any slot: same slot values, same bits
        assert split_slots(reasoned).values == split_slots(plain).values
        assert score(reasoned, p).bits == score(plain, p).bits and score(reasoned, p).total == 6
        text = rule_rationale(p, obj)
        if text is None:
            assert reasoned == plain
            continue
        seen += 1
        assert reasoned.index(text) < reasoned.index("STRATEGY:") and "\n" not in text
        nxg, q = p.graph.to_networkx(), get_family(task).normalize_query(p)
        if task in ("backdoor_set", "separation_set"):
            for node, edges in _sections(text, "Edges into").items():
                assert edges == {(a, node) for a in nxg.predecessors(node)}
            if "non-descendant" in text:
                desc = re.search(r"Descendants of .+?: \{(.*)\}\.$", text).group(1)
                assert set(filter(None, desc.split(", "))) == nx.descendants(nxg, q["treatment"])
        elif task == "frontdoor_set":
            (node, edges), = _sections(text, "Edges out of").items()
            assert node == q["treatment"] and edges == {(node, c) for c in nxg.successors(node)}
        elif task == "blocking_set":
            nodes = q["path"][0]
            colliders = {b for a, b, c in zip(nodes, nodes[1:], nodes[2:])
                         if (nxg.has_edge(a, b) or (a, b) in _bidirected(p) or (b, a) in _bidirected(p))
                         and (nxg.has_edge(c, b) or (b, c) in _bidirected(p) or (c, b) in _bidirected(p))}
            assert ("no collider" in text) == (not colliders)
            if colliders:
                assert "{" + ", ".join(sorted(colliders)) + "}" in text
        else:
            assert ("no directed cycle" in text) == nx.is_directed_acyclic_graph(nxg)
            if not nx.is_directed_acyclic_graph(nxg):
                for chunk in text.rsplit(": ", 1)[1].rstrip(".").split(" and "):
                    walk = chunk.split(" -> ")
                    assert all(nxg.has_edge(a, b) for a, b in zip(walk, walk[1:]))
                    assert len(walk) == 2 if " and " in text else walk[0] == walk[-1]
    assert seen >= 10


def _bidirected(p):
    return {tuple(e) for e in p.graph.bidirected}


def test_no_rationale_for_an_answer_no_rule_gives():
    p = next(x for x in _problems("backdoor_set", n=24)
             if len(get_family("backdoor_set").validity_class(x.graph, get_family("backdoor_set").normalize_query(x)))
             > 2)
    fam = get_family("backdoor_set")
    rule = fam.rule_object(p)
    other = next(o for o in fam.validity_class(p.graph, fam.normalize_query(p)) if o != rule and
                 o != frozenset(p.graph) - {fam.normalize_query(p)["treatment"]})
    if rule_rationale(p, other) is not None:  # `other` may still be the non-descendant set
        assert "non-descendant" in rule_rationale(p, other)
    assert rule_rationale(p, frozenset(["not a node"])) is None
    assert with_rationale("GRAPH: A -> B", None) == "GRAPH: A -> B"
    with pytest.raises(ValueError, match="no STRATEGY"):
        with_rationale("GRAPH: A -> B", "Rule: x")
    assert set(RATIONALE_TASKS) == {"backdoor_set", "frontdoor_set", "separation_set", "blocking_set",
                                    "cycle_witness"}


def test_gen_rationale_rows_and_their_manifest(tmp_path):
    """`calver gen --rationale rule`: the rows carry the paragraph, the manifest records it, and a
    contamination --clean_out rewrite keeps it."""
    pytest.importorskip("datasets")
    from calver.bench.contamination import write_clean
    from calver.cli import main
    from calver.verifier import Problem

    out = tmp_path / "mix"
    assert main(["gen", "--tasks", "backdoor_set", "frontdoor_set", "--n", "6", "--seed", "5", "--out", str(out),
                 "--system", "compact", "--answers", "rule", "--rationale", "rule", "--variants", "any"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sft_rationale"] == "rule"
    traces = [json.loads(x)["messages"][-1]["content"] for x in (out / "sft.jsonl").read_text().splitlines()]
    assert sum("\n\nRule: " in t for t in traces) >= 8
    problems = [Problem.from_dict(json.loads(x)) for x in (out / "problems.jsonl").read_text().splitlines()]

    class _NoMatches:
        matches = ()

    write_clean(problems, _NoMatches(), out, tmp_path / "clean")
    assert (tmp_path / "clean" / "sft.jsonl").read_text() == (out / "sft.jsonl").read_text()
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--out", str(tmp_path / "x"),
                 "--rationale", "maybe"]) == 2
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--out", str(tmp_path / "y"),
                 "--rationale", "true"]) == 2  # a style name, not a switch


def test_lookups_read_back_from_traces_are_checked_against_the_graph(tmp_path):
    """check_lookups: the canonical rationales' lookups are all exact; a lookup that names an edge the graph
    lacks, misses one, or names a node the graph lacks is counted as such, and one that lists none where the node
    has edges is counted as empty; policy-report sums them per pool."""
    from fixtures import build_pool

    from calver.data_gen.rationales import LookupCheck, check_lookups
    from calver.evaluation.policy_report import rationale_lookups
    from calver.evaluation.units import load_units

    probs = [p for p in _problems("backdoor_set", n=16) if p.graph.parents(get_family(p.task).normalize_query(p)
                                                                          ["treatment"])]
    total = LookupCheck()
    for p in probs:
        total += check_lookups(canonical_trace(p, REASONED), p.graph)
    assert total.lookups == total.exact == len(probs) and total.listed == total.listed_true == total.true
    g = probs[0].graph
    x = get_family("backdoor_set").normalize_query(probs[0])["treatment"]
    parents = sorted(g.parents(x))
    fake = next(n for n in g.nodes if n != x and n not in parents and (n, x) not in g.directed)
    wrong = f"Rule: ... Edges into {x}: {fake} -> {x}.\n\nSTRATEGY: {{}}"
    assert check_lookups(wrong, g) == LookupCheck(1, 0, 1, 0, 0, len(parents))
    assert check_lookups("Edges into nowhere: none.\n", g) == LookupCheck(1, 0, 0, 0, 0, 0)
    assert check_lookups(f"Edges into {x}: none.\n", g) == LookupCheck(1, 0, 0, 0, 0, len(parents), empty=1)
    empty = f"Rule: ... Edges into {x}: none.\n\nSTRATEGY: {{}}"
    pool = build_pool(str(tmp_path / "pool"), [(p, 0, [canonical_trace(p, REASONED), wrong, empty])
                                               for p in probs[:1]] + [(p, 0, [canonical_trace(p, PLAIN)])
                                                                      for p in probs[1:3]], raw_texts=True)
    got = rationale_lookups(load_units(pool.root))
    assert got["lookups"] == 3 and got["exact"] == pytest.approx(1 / 3) and got["empty"] == pytest.approx(1 / 3)
    assert got["in_graph"] == pytest.approx(len(parents) / (len(parents) + 1))
    # no scans in this pool: their shares are null, and the whole section is strict JSON (no NaN)
    assert got["scans"] == 0 and got["scans_complete"] is None and got["marks_right"] is None
    json.dumps(got, allow_nan=False)
    plain = build_pool(str(tmp_path / "plain"), [(p, 0, [canonical_trace(p, PLAIN)]) for p in probs[:2]],
                       raw_texts=True)
    assert rationale_lookups(load_units(plain.root)) is None


def test_policy_report_counts_lookups_per_prompt_encoding_and_family(tmp_path):
    """per_group: each encoding's (and family's) rationale lookups are counted apart, against the source graph:
    exact traces on arrow-list prompts, a lookup naming an edge the graph lacks on JSON-map prompts; the markdown
    row of each group says its share and count."""
    from fixtures import build_pool

    from calver.data_gen.prompts import prompt_encoding
    from calver.evaluation.policy_report import encoding_of, grade_heuristics, markdown, per_group, report_pool, task_of
    from calver.evaluation.units import load_units

    probs = []
    for seed, enc in enumerate(("arrows", "json_parents"), start=7):  # a seed each: problem ids are per seed
        cfg = GenConfig(seed=seed, n_nodes=(4, 9), variants=("any",), encoding=(enc,), naming=("letters",))
        probs += [p for p in generate("backdoor_set", 12, cfg)
                  if p.graph.parents(get_family(p.task).normalize_query(p)["treatment"])][:3]
    assert [prompt_encoding(p) for p in probs] == ["arrows"] * 3 + ["json_parents"] * 3

    def wrong(p):  # the treatment's lookup lists an edge from a node that is not its parent
        x = get_family(p.task).normalize_query(p)["treatment"]
        fake = next(n for n in p.graph.nodes if n != x and n not in p.graph.parents(x))
        return f"Rule: adjust for the parents of {x}. Edges into {x}: {fake} -> {x}.\n\nSTRATEGY: {{}}"

    pool = build_pool(str(tmp_path / "pool"), [(p, 0, [canonical_trace(p, REASONED)] * 2) for p in probs[:3]]
                      + [(p, 0, [wrong(p)]) for p in probs[3:]], raw_texts=True)
    units = load_units(pool.root)
    by_enc = per_group(grade_heuristics(units), encoding_of, draws=50, seed=0)
    assert by_enc["arrows"]["rationale_lookups"]["lookups"] == 6 and by_enc["arrows"]["rationale_lookups"]["exact"] == 1
    assert by_enc["json_parents"]["rationale_lookups"]["lookups"] == 3
    assert by_enc["json_parents"]["rationale_lookups"]["exact"] == 0
    assert by_enc["json_parents"]["rationale_lookups"]["precision"] == 0
    by_task = per_group(grade_heuristics(units), task_of, draws=50, seed=0)
    assert by_task["backdoor_set"]["rationale_lookups"]["lookups"] == 9
    assert by_task["backdoor_set"]["rationale_lookups"]["exact"] == pytest.approx(6 / 9)
    text = markdown({"p": report_pool(units, shuffles=1, draws=50, seed=0)}, {})
    rows = [r for r in text.splitlines() if r.startswith("| p | json_parents |") or r.startswith("| p | arrows |")]
    assert [r.rsplit("|", 2)[1].strip() for r in rows] == ["100.0 of 6", "0.0 of 3"]


def test_policy_report_splits_lookups_into_copy_and_lookup(tmp_path):
    """rationale_lookups tells the copy from the lookup: a trace whose GRAPH slot drops an edge into the treatment
    and whose lookup reads that slot right is exact against its own slot, not against the source, and is not
    counted among GRAPH-bit candidates; a trace that copies the graph right and then lists a wrong edge is counted
    among them, not exact either way; a trace whose GRAPH slot does not parse has no own graph to be checked
    against; a canonical trace is exact in all three. Only the canonical trace answers validly. The markdown says
    both splits and the answers."""
    from fixtures import build_pool

    from calver.evaluation.policy_report import markdown, rationale_lookups, report_pool
    from calver.evaluation.units import load_units
    from calver.verifier import parse_graph, render_graph

    cfg = GenConfig(seed=11, n_nodes=(5, 9), variants=("any",), encoding=("arrows",), naming=("identifiers",))
    p = next(p for p in generate("backdoor_set", 40, cfg)
             if len(p.graph.parents(get_family(p.task).normalize_query(p)["treatment"])) >= 2)
    x = get_family(p.task).normalize_query(p)["treatment"]
    parents = sorted(p.graph.parents(x))
    edges = lambda ps: ", ".join(f"{a} -> {x}" for a in ps)  # noqa: E731
    rule = lambda graph, ps: (f"GRAPH: {graph}\n\nRule: adjust for the parents of {x}. "  # noqa: E731
                              f"Edges into {x}: {edges(ps)}.\n\nSTRATEGY: {{}}")
    good = canonical_trace(p, REASONED)
    miscopied = rule(render_graph(p.graph.with_edges(remove_directed=[(parents[0], x)]), "arrows"), parents[1:])
    fake = next(n for n in p.graph.nodes if n != x and n not in parents)
    misread = rule(render_graph(p.graph, "arrows"), [fake])
    garbled = rule(f"{x} -> -> {parents[0]}", parents)
    pool = build_pool(str(tmp_path / "pool"), [(p, 0, [good, miscopied, misread, garbled])], raw_texts=True)
    units = load_units(pool.root)
    assert [int(b[0]) for b in units[0].bits] == [1, 0, 1, 0]  # the copies, as the verifier grades them
    with pytest.raises(ValueError):
        parse_graph(f"{x} -> -> {parents[0]}")
    assert [bool(c) for c in units[0].correct] == [True, False, False, False]  # STRATEGY {} is no valid set here
    lk = rationale_lookups(units)
    n = len(re.findall(r"Edges (?:into|out of) ", good))
    assert lk["lookups"] == n + 3 and lk["exact"] == pytest.approx((n + 1) / (n + 3))
    assert lk["graph_bit"] == {"lookups": n + 1, "exact": pytest.approx(n / (n + 1))}
    assert lk["own_graph"] == {"lookups": n + 2, "exact": pytest.approx((n + 1) / (n + 2))}
    assert lk["answers"] == {"all_exact": {"candidates": 2, "valid": 0.5},
                             "some_wrong": {"candidates": 2, "valid": 0.0}}
    lines = markdown({"p": report_pool(units, shuffles=1, draws=50, seed=0)}, {}).splitlines()
    row = lines[next(i for i, r in enumerate(lines) if r.startswith("| policy | lookups |")) + 2]
    assert [c.strip() for c in row.split("|")][4:6] == [f"{100 * n / (n + 1):.1f} of {n + 1}",
                                                        f"{100 * (n + 1) / (n + 2):.1f} of {n + 2}"]
    row = lines[next(i for i, r in enumerate(lines) if r.startswith("| policy | candidates | every")) + 2]
    assert [c.strip() for c in row.split("|")][2:6] == ["4", "2", "50.0 of 2", "0.0 of 2"]


@pytest.mark.parametrize("task", ["backdoor_set", "frontdoor_set", "separation_set"])
def test_scan_rationale_lists_every_edge_in_graph_order_and_marks_the_node_s(task):
    """The scan style: before each lookup, every directed edge of the GRAPH line in its order, marked yes exactly
    when it runs into (out of) the node -- checked against networkx; the lookup after it and the score are the
    rule style's."""
    seen = 0
    for p in _problems(task, n=40):
        obj = canonical_answer(p, "rule")
        rule, scan = rule_rationale(p, obj), rule_rationale(p, obj, "scan")
        reasoned = canonical_trace(p, SCANNED)
        assert score(reasoned, p).total == 6
        assert split_slots(reasoned).values == split_slots(canonical_trace(p, PLAIN)).values
        if rule is None:
            assert scan is None
            continue
        # the scan style is the rule style with a scan before each lookup
        assert re.sub(r"Scan for edges .+?: .+?\. (?=Edges )", "", scan) == rule
        graph_line = reasoned.split("\n", 1)[0].removeprefix("GRAPH: ").split(", ")
        in_line = [tuple(e.split(" -> ")) for e in graph_line if " -> " in e]
        nxg = p.graph.to_networkx()
        for kind, node, text in re.findall(r"Scan for edges (into|out of) (.+?): (.+?)\.(?= Edges )", scan):
            seen += 1
            marks = [item.rsplit(" ", 1) for item in text.split(", ")]
            assert [tuple(e.split(" -> ")) for e, _ in marks] == in_line  # every edge, in the GRAPH line's order
            want = set(nxg.in_edges(node)) if kind == "into" else set(nxg.out_edges(node))
            assert {tuple(e.split(" -> ")) for e, m in marks if m == "yes"} == want
            assert {m for _, m in marks} <= {"yes", "no"}
    assert seen >= 5
    with pytest.raises(ValueError, match="style"):
        rule_rationale(_problems(task, n=4)[0], None, "prose")


def test_scans_read_back_are_checked_against_the_graph(tmp_path):
    """check_lookups on scans: the canonical scans are complete and every mark is right; a scan that drops an
    edge, invents one or marks one wrongly is counted as such, and the lookup after a scan is still read;
    policy-report sums them per pool."""
    from calver.data_gen.rationales import LookupCheck, check_lookups

    probs = [p for p in _problems("separation_set", n=40) if "Scan for" in canonical_trace(p, SCANNED)]
    total = LookupCheck()
    for p in probs:
        total += check_lookups(canonical_trace(p, SCANNED), p.graph)
    assert total.scans == total.complete == total.lookups == total.exact >= 4
    assert total.scanned == total.scanned_in_graph == total.marks_right > total.not_the_node_s > 0
    from calver.verifier.graph import CausalGraph, GraphClass

    g = CausalGraph.build(["A", "B", "C"], [("A", "B"), ("C", "B")], (), GraphClass.DAG)
    text = "Rule: x. Scan for edges into B: A -> B yes, C -> B no, B -> A no. Edges into B: A -> B.\n"
    assert check_lookups(text, g) == LookupCheck(lookups=1, exact=0, listed=1, listed_true=1, in_graph=1, true=2,
                                                 scans=1, complete=0, scanned=3, scanned_in_graph=2, marks_right=2,
                                                 not_the_node_s=1)
    from fixtures import build_pool

    from calver.evaluation.policy_report import rationale_lookups
    from calver.evaluation.units import load_units

    pool = build_pool(str(tmp_path / "pool"), [(p, 0, [canonical_trace(p, SCANNED)]) for p in probs[:3]],
                      raw_texts=True)
    got = rationale_lookups(load_units(pool.root))
    assert got["scans"] >= 3 and got["scans_complete"] == got["marks_right"] == got["scanned_in_graph"] == 1.0
    assert 0 < got["always_no"] < 1
    good = "Scan for edges out of C: A -> B no, C -> B yes. Edges out of C: C -> B. Scan for edges into A: none."
    assert check_lookups(good, g) == LookupCheck(1, 1, 1, 1, 1, 1, scans=2, complete=1, scanned=2,
                                                 scanned_in_graph=2, marks_right=2, not_the_node_s=1)
