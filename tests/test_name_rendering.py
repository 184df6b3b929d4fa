"""Names that render and read back (verifier audit 2026-12-03, M2): the contract's own canonical trace for
every legal node name (separators, keywords, the empty-set words, brackets, quotes, unicode) scores 6/6,
``grade`` agrees with networkx, and an empty-set word that names a node is never read as the empty set."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calver.verifier import CausalGraph, Problem, grade, score
from calver.verifier.contract import format_set
from calver.verifier.graph import GraphError, check_name
from calver.verifier.parsers import parse_node_set
from calver.verifier.registry import get_family

# the audit's single names (repro-2026-12-03/names_single.py)
AUDIT_NAMES = ["ANSWER: yes", "RESULT", "Strategy - x", "QUERY:", "GRAPH", "a -> b", "x <-> y", "blood pressure",
               "température", "Ω", "名前", "and", "or", "none", "yes", "no", "{}", "∅", "Z,W", "1", "-1", "true",
               "rock and roll", "gdp.growth", "age (years)", "it's", '"q"', "A;B", "[x]", "x=y",
               "DERIVATION: backdoor_check()", "CONSTRAINTS", "->", "<-", "#", "`z`", "**b**", " lead",
               "tab\tname", "Aì", "\u200dzwj", "ｘ", "Ａ", "empty", "nothing", "set()", "N/A", "X", "Y|Z", "a,b",
               "(a)", "a)", "{a}", "null", "the empty set", "no nodes", "frozenset()", "[]", "{∅}", "a\\", '\\"']
SPELLINGS = ["o-o", "o->", "confounded with", "_", "x_", "(bidirected)"]  # read as edge syntax unless quoted
HOSTILE = st.sampled_from(AUDIT_NAMES + SPELLINGS + [",", ";", ".", "=", "{", "}", "(", ")", "'", '"', "“x”",
                                                     "and or", "set", "empty set", "Y", "Z", "a b", "a  b", "ANSWER:",
                                                     "\\"])
NAMES = st.one_of(HOSTILE, st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x0b\x0c"
                                                 "\x1c\x1d\x1e\x85\u2028\u2029"), min_size=1, max_size=12))


def legal(name: str) -> bool:
    try:
        check_name(name)
    except GraphError:
        return False
    return True


def backdoor(n: str, x: str = "X", y: str = "Y") -> Problem:
    g = CausalGraph.build([n, x, y], [(n, x), (n, y), (x, y)], (), "DAG")
    return Problem.from_dict({"id": "one", "task": "backdoor_set", "graph": g, "graph_class": "DAG",
                              "query": {"treatment": x, "outcome": y, "variant": "any"}})


@pytest.mark.parametrize("name", [n for n in AUDIT_NAMES if legal(n) and n not in ("X", "Y")])
def test_the_audit_names_render_and_score_six(name):
    p = backdoor(name)
    fam = get_family("backdoor_set")
    s = score(fam.canonical_trace(p, frozenset({name})), p)
    assert s.total == 6, (name, format_set([name]), s.reasons)
    assert s.answer == frozenset({name}) and grade(p, s.answer)
    assert score(fam.canonical_trace(p, frozenset()), p).total < 6


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(names=st.lists(NAMES, min_size=3, max_size=3, unique=True).filter(lambda ns: all(legal(n) for n in ns)))
def test_every_legal_name_renders_scores_six_and_grades_like_networkx(names):
    n, x, y = names
    p = backdoor(n, x, y)
    fam = get_family("backdoor_set")
    d = nx.DiGraph([(n, x), (n, y), (x, y)])
    for z in (frozenset(), frozenset({n})):
        truth = nx.is_d_separator(nx.DiGraph([(n, x), (n, y)]), {x}, {y}, set(z))  # backdoor graph
        s = score(fam.canonical_trace(p, z), p)
        assert s.answer == z, (names, format_set(z), s.reasons)
        assert (s.total == 6) == truth, (names, s.bits, s.reasons)
        assert grade(p, format_set(z)) == truth == grade(p, z)
    assert parse_node_set(format_set(names)) == frozenset(names)
    assert d.number_of_nodes() == 3


@pytest.mark.parametrize("word", ["none", "empty", "nothing", "null", "None", "EMPTY"])
def test_an_empty_set_word_that_names_a_node_is_not_the_empty_set(word):
    """X -> Y, X -> word, Y -> word: conditioning on the collider is invalid, the empty set is valid."""
    g = CausalGraph.build(["X", "Y", word], [("X", "Y"), ("X", word), ("Y", word)], (), "DAG")
    p = Problem.from_dict({"id": "c", "task": "backdoor_set", "graph": g, "graph_class": "DAG",
                           "query": {"treatment": "X", "outcome": "Y", "variant": "any"}})
    fam = get_family("backdoor_set")
    bare = fam.canonical_trace(p, frozenset()).replace("ANSWER: {}", "ANSWER: {" + word + "}")
    bare = bare.replace("STRATEGY: {}", "STRATEGY: {" + word + "}")
    s = score(bare, p)
    assert s.total < 6 and "ambiguous" in (s.reasons.get("ANSWER", "") + s.reasons.get("STRATEGY", ""))
    assert not grade(p, "{" + word + "}") and not grade(p, word)
    assert grade(p, "{}") and grade(p, "set()")
    assert not grade(p, '{"' + word + '"}')  # quoted: the node, and the collider is invalid
    assert format_set([word]) == '{"' + word + '"}'


def test_the_audit_names_battery_finds_no_wrong_six_and_no_false_reject():
    import names_battery

    counts = names_battery.run(8, seed=1)
    assert counts["traces"] > 500 and counts["right"] > 0
    assert counts["wrong_six"] == 0 and counts["right_below_six"] == 0, counts
