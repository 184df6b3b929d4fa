"""Encodings: every render format reads back through the verifier's parsers (round trip), and
problem prompts use them."""

from __future__ import annotations

import random

import pytest

from calver.data_gen import graphs as G
from calver.data_gen.gen_config import ENCODINGS, GenConfig
from calver.data_gen.generators import generate
from calver.data_gen.names import NAMINGS, node_names
from calver.data_gen.prompts import problem_text, render_prompt
from calver.verifier import contract_instructions, parse_graph, render_graph
from calver.verifier.parsers import RENDER_FORMATS

PARSE_FMT = {"json_parents": "json"}


def _graphs(n_graphs=40):
    out = []
    for i in range(n_graphs):
        rng = random.Random(i)
        kind = ("DAG", "ADMG", "directed")[i % 3]
        if kind == "directed" and i % 2:
            continue
        sk = G.random_skeleton(rng, rng.randint(2, 10), rng.uniform(0.1, 0.6), kind, 0.2)
        naming = NAMINGS[i % len(NAMINGS)]
        out.append(G.label(sk, node_names(sk.n, naming, rng)))
    return out


def test_encodings_are_the_verifier_render_formats():
    assert set(ENCODINGS) <= set(RENDER_FORMATS)


@pytest.mark.parametrize("fmt", ENCODINGS)
def test_round_trip_every_encoding(fmt):
    for g in _graphs():
        if fmt == "clear" and g.kind.value == "directed" and g.bidirected:
            continue
        text = render_graph(g, fmt)
        back = parse_graph(text, fmt=PARSE_FMT.get(fmt, fmt), kind=g.kind)
        assert back == g, (fmt, text)
        auto = parse_graph(text, kind=g.kind)  # auto-detection reads it too
        assert auto == g, (fmt, text)


@pytest.mark.parametrize("fmt", ENCODINGS)
def test_problem_text_carries_the_graph(fmt):
    cfg = GenConfig(seed=0, encoding=fmt, naming="mixed")
    for p in generate("backdoor_set", 5, cfg) + generate("cycle_witness", 3, cfg):
        block = render_graph(p.graph, fmt)
        assert block in p.text and p.meta["encoding"] == fmt
        assert parse_graph(block, kind=p.graph_class) == p.graph


def test_mixed_encodings_drawn_per_item():
    cfg = GenConfig(seed=0, encoding=list(ENCODINGS))
    used = {p.meta["encoding"] for p in generate("separation_set", 60, cfg)}
    assert len(used) >= 5


def test_render_prompt():
    p = generate("mediator", 1, GenConfig(seed=0))[0]
    msgs = render_prompt(p)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == contract_instructions("mediator")
    assert msgs[1]["content"] == p.text
    dot = render_prompt(p, encoding="dot")[1]["content"]
    assert render_graph(p.graph, "dot") in dot and dot.endswith(p.text.rsplit("\n", 1)[-1])
    with pytest.raises(ValueError, match="encoding"):
        problem_text(p.graph, "q?", "yaml")


def test_user_text_appends_a_missing_question():
    from calver.data_gen.prompts import question_for, user_text
    from calver.verifier import Problem

    p = generate("backdoor_set", 1, GenConfig(seed=0))[0]
    bare = Problem(task=p.task, query=p.query, graph=p.graph, text=render_graph(p.graph, "clear"))
    assert user_text(bare) == f"{bare.text}\n\n{question_for(p)}"
    assert user_text(p) == p.text  # already holds the question
    no_text = Problem(task=p.task, query=p.query, graph=p.graph)
    assert render_graph(p.graph, "arrows") in user_text(no_text)
