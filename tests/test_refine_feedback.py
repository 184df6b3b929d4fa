"""Model-free: feedback text per family (from the registry), no label leaks, refinement helpers."""

from __future__ import annotations

import random

import pytest

from calver.data_gen.generators import GenConfig, available_tasks, canonical_trace, generate
from calver.data_gen.text_levels import constructed_problems
from calver.evaluation.audit_judges import invalid_object
from calver.evaluation.audits import replace_slot
from calver.infer.firewall import FirewallError, strip_problem
from calver.infer.refine.feedback import HEADER, feedback_for, redact, slot_docs, slot_feedback
from calver.infer.refine.refine import Cand, calver_pick, current_best, revision_messages
from calver.verifier import SLOTS, score


def _broken(trace, problem):
    """The canonical trace with its ANSWER swapped to an invalid object (or unparsable text)."""
    bad = invalid_object(trace, problem)
    return replace_slot(trace, "ANSWER", bad if bad is not None else "garbage")


@pytest.mark.parametrize("task", available_tasks())
def test_feedback_lines_match_failed_slots_for_every_family(task):
    p = generate(task, 1, GenConfig(seed=3))[0]
    sp = strip_problem(p)
    good = canonical_trace(p)
    assert feedback_for(good, sp) == ""  # max score: nothing to revise
    bad = _broken(good, sp)
    ts = score(bad, sp)
    assert ts.total < 6
    lines = slot_feedback(bad, sp, ts)
    failed = [s for s, b in zip(SLOTS, ts.bits) if not b]
    assert list(lines) == failed
    docs = slot_docs(task)
    assert set(docs) == set(SLOTS)  # every family gets a contract hint for every slot
    for slot in failed:
        assert docs[slot] in lines[slot]
    text = feedback_for(bad, sp)
    assert text.startswith(HEADER.format(n=len(failed)))


def test_backdoor_descendant_reason_reaches_feedback():
    p = next(q for q in generate("backdoor_set", 20, GenConfig(seed=5))
             if q.graph.children(q.query["treatment"]) - {q.query["outcome"]})
    x = p.query["treatment"]
    m = sorted(p.graph.children(x) - {p.query["outcome"]})[0]
    sp = strip_problem(p)
    bad = replace_slot(replace_slot(canonical_trace(p), "STRATEGY", "{" + m + "}"), "ANSWER", "{" + m + "}")
    fb = feedback_for(bad, sp)
    assert f"descendant of treatment {x}" in fb and "STRATEGY" in fb


def test_redaction_hides_valid_objects_and_decisions():
    ps = generate("backdoor_set", 30, GenConfig(seed=2, variants=("minimal",)))
    hit = 0
    for p in ps:
        sp = strip_problem(p)
        from calver.data_gen.generators import validity_objects

        valid = validity_objects(p)
        big = max(valid, key=len) if valid else None
        if big is None:
            continue
        # a valid but non-minimal superset: the family names a smaller valid set in its reason
        extra = sorted(set(p.graph.nodes) - big - {p.query["treatment"], p.query["outcome"]})
        for n in extra:
            obj = frozenset(big | {n})
            if obj in valid:
                continue
            trace = canonical_trace(p)
            txt = "{" + ", ".join(sorted(obj)) + "}"
            t2 = replace_slot(replace_slot(trace, "STRATEGY", txt), "ANSWER", txt)
            reason = score(t2, sp).reasons.get("STRATEGY", "")
            if "is also valid" in reason:
                hit += 1
                fb = feedback_for(t2, sp)
                assert "is also valid" not in fb or "another set is also valid" in fb
                for v in valid:
                    if v != obj:
                        assert "{" + ", ".join(sorted(v)) + "}" not in fb.split("STRATEGY", 1)[1].split("\n")[0]
            break
    assert hit >= 1
    problem = strip_problem(generate("intervention_reachability", 1, GenConfig(seed=1))[0])
    assert redact("the correct decision is yes", "", problem) == "the returned decision is wrong"


def test_constructed_feedback_never_reads_the_source_graph():
    base = generate("backdoor_set", 6, GenConfig(seed=4))
    probs, _ = constructed_problems(base, 1, random.Random(0))
    for p in probs:
        sp = strip_problem(p)
        assert sp.graph is None
        # a trace on a graph of its own, with an edge the source graph lacks
        nodes = list(p.variables)
        own = f"{nodes[0]} -> {nodes[-1]}"
        trace = replace_slot(canonical_trace(p), "GRAPH", own)
        with pytest.raises(FirewallError, match="stripped"):
            feedback_for(trace, p)  # the scorer would judge on G*: its reasons would describe it
        for a, b in sorted(p.graph.directed):
            if f"{a} -> {b}" != own:
                assert f"{a} -> {b}" not in feedback_for(trace, sp).split("Expected")[0]


def test_refine_selection_rules_and_prompt_shape():
    mk = lambda t: Cand("x", 1, "pool", 0, t, [1] * t + [0] * (6 - t))  # noqa: E731
    cands = [mk(3), mk(5), mk(2), mk(5)]
    assert calver_pick(cands) == 1  # earliest maximum (CALVER)
    assert current_best(cands) == 3  # latest maximum (the newest attempt is revised)
    p = strip_problem(generate("backdoor_set", 1, GenConfig(seed=1))[0])

    class V:
        problem = p

    msgs = revision_messages(V, "TRACE", "FEEDBACK")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == "TRACE" and msgs[3]["content"] == "FEEDBACK"


def test_refine_configs_load():
    from pathlib import Path

    from calver.infer.refine.refine import load_refine_config

    paths = sorted((Path(__file__).resolve().parents[1] / "configs" / "refine").glob("*.yaml"))
    assert paths
    for p in paths:
        cfg = load_refine_config(p)
        assert cfg.rounds >= 1 and cfg.revisions >= 1
    with pytest.raises(ValueError, match="unknown"):
        load_refine_config(None, bogus=1)
