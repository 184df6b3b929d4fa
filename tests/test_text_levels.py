"""Graph-from-text levels, the rule-based extractor and the round-trip faithfulness filter."""

from __future__ import annotations

import random
import re

import pytest

from calver.data_gen.extractors import CUES, ExtractionError, SamplerExtractor, extract_graph, risky_name
from calver.data_gen.text_levels import (
    DOMAINS,
    admission_report,
    constructed_problems,
    render_level,
    template_words,
)
from calver.verifier import CausalGraph, Problem, grade, score

G = CausalGraph.build(["Smoking", "Tar", "Cancer", "Genotype", "Age", "Stress"],
                      [("Smoking", "Tar"), ("Tar", "Cancer"), ("Genotype", "Smoking"), ("Genotype", "Cancer"),
                       ("Age", "Cancer"), ("Age", "Smoking")])
ADMG = CausalGraph.build(["A", "B", "C", "D", "X", "Y", "M"],
                         [("A", "X"), ("X", "M"), ("M", "Y"), ("A", "Y"), ("B", "Y")], [("X", "Y"), ("B", "C")])


def _problems():
    ps = [Problem(task="backdoor_set", query={"treatment": "Smoking", "outcome": "Cancer", "variant": "any"}, graph=G,
                  id="toy")]
    ps.append(Problem(task="mediator", query={"treatment": "X", "outcome": "Y", "variant": "all"},
                      graph=ADMG, id="admg"))
    try:
        from calver.data_gen.bnlearn import bnlearn_problems

        for net in ("asia", "sachs", "alarm", "child"):
            ps += bnlearn_problems(net, "backdoor_set", 5, 0)
    except ImportError:  # pgmpy absent: toy graphs only
        pass
    return ps


@pytest.mark.parametrize("level", [1, 2, 3])
def test_round_trip_on_clean_renders(level):
    """Without deliberate ambiguity every level reads back exactly, DAGs and ADMGs alike."""
    for seed in range(25):
        for g in (G, ADMG):
            text = render_level(g, level, random.Random(seed), ambiguity=0.0)
            assert extract_graph(text, g.nodes) == g, text


def test_admission_rates_per_level():
    ps = _problems()
    report = admission_report(ps, seed=0)
    assert report[1]["admission_rate"] == 1.0 and report[2]["admission_rate"] == 1.0
    assert 0.5 <= report[3]["admission_rate"] <= 1.0
    assert all(r["total"] == len(ps) for r in report.values())


def test_constructed_problem_fields_and_scoring():
    p = _problems()[0]
    kept, stats = constructed_problems([p], 2, random.Random(0))
    (cp,) = kept
    assert stats["admitted"] == 1
    assert cp.mode == "constructed" and cp.graph == p.graph and set(cp.variables) == set(G.nodes)
    assert cp.text.endswith(p.family.question_text(p.family.normalize_query(p)))
    assert "->" not in cp.text  # no edge list in the prompt
    trace = p.family.canonical_trace(p, {"Genotype", "Age"})
    assert score(trace, cp).total == 6 and grade(cp, {"Genotype", "Age"})


def _skeleton(sentence: str, names) -> str:
    s = sentence
    for n in sorted(names, key=len, reverse=True):
        s = re.sub(rf"[\"]?\b{re.escape(n)}\b[\"]?", "V", s)
    return re.sub(r"V(?:, V)*(?: and V)", "V", s)


def test_l3_is_varied_and_has_distractors():
    names = list(G.nodes)
    skeletons, distractors = set(), 0
    for seed in range(30):
        text = render_level(G, 3, random.Random(seed))
        sents = re.split(r"(?<=[.!?])\s+", text)
        skeletons |= {_skeleton(s, names) for s in sents}
        # a distractor names a variable but states no edge
        distractors += sum(1 for s in sents if any(n in s for n in names) and not extract_graph(s, names).directed)
    assert len(skeletons) >= 60
    assert distractors >= 30 * 2
    l1 = {_skeleton(s, names) for seed in range(30) for s in render_level(G, 1, random.Random(seed)).splitlines()}
    l2 = {_skeleton(s, names) for seed in range(30) for s in render_level(G, 2, random.Random(seed)).splitlines()}
    assert len(l1) >= 25 and len(l2) >= 12


def test_l2_has_no_edge_list_and_l3_reorders():
    t2 = render_level(G, 2, random.Random(1))
    assert len(t2.splitlines()) == len(G.nodes)  # one mechanism per variable
    orders = {tuple(re.findall(r"Smoking|Tar|Cancer", render_level(G, 3, random.Random(s)))[:3]) for s in range(10)}
    assert len(orders) > 3


def test_domain_vocabulary_is_covered_by_the_extractor_lexicon():
    lex = {p.lower() for ps in CUES.values() for p in ps}
    for name, d in DOMAINS.items():
        for phrase in d["fwd"] + d["rev"]:
            assert phrase in lex, (name, phrase)


def test_risky_names_are_quoted():
    g = CausalGraph.build(["either", "A", "dysp"], [("either", "dysp"), ("A", "either")])
    assert risky_name("either") and risky_name("A") and not risky_name("dysp")
    for level in (1, 2, 3):
        text = render_level(g, level, random.Random(0), ambiguity=0.0)
        assert '"either"' in text and extract_graph(text, g.nodes) == g
    assert "causes" in template_words()


def test_extractor_negation_and_relative_clauses():
    v = ["A", "B", "C", "D"]
    text = ('"A" drives "B", which in turn affects "C". "D", which is logged with "A", depends on "C". '
            '"A" has no direct effect on "D". Because of "B", "D" tends to shift. '
            '"A" and "C" share a hidden common cause.')
    g = extract_graph(text, v)
    assert g.directed == {("A", "B"), ("B", "C"), ("C", "D"), ("B", "D")}
    assert g.bidirected == {("A", "C")}


def test_sampler_extractor_adapter():
    p = _problems()[0]
    good = SamplerExtractor(lambda prompt: "\n".join(G.edges_text()) + "\nEND")
    kept, stats = constructed_problems([p], 3, random.Random(0), extractor=good)
    assert stats["admitted"] == 1 and kept
    bad = SamplerExtractor(lambda prompt: "Smoking -> Cancer\nEND")
    assert constructed_problems([p], 3, random.Random(0), extractor=bad)[1]["admitted"] == 0
    with pytest.raises(ExtractionError):
        SamplerExtractor(lambda prompt: "I am not sure.")("text", ["A", "B"])
    broken = SamplerExtractor(lambda prompt: "Smoking -> Unicorn\nEND")
    assert constructed_problems([p], 1, random.Random(0), extractor=broken)[1]["extractor_errors"] == 1
