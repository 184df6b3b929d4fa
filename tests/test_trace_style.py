"""TraceStyle: one value for how SFT rows are written, validated, and read back from a manifest."""

from __future__ import annotations

import pytest

from calver.data_gen.gen_config import parse_run
from calver.data_gen.trace_style import TraceStyle


@pytest.mark.parametrize("field,value", [("answers", "best"), ("rationale", "why"), ("graph_slot", "json"),
                                         ("system", "long"), ("witnesses", -1), ("witnesses", True),
                                         ("witnesses", 1.5)])
def test_a_bad_value_names_its_field(field, value):
    with pytest.raises(ValueError, match=field):
        TraceStyle(**{field: value})


def test_the_manifest_round_trip_and_an_older_manifest():
    style = TraceStyle("rule", 0, "scan", "verbatim", "compact")
    assert style.manifest() == {"sft_answers": "rule", "sft_witnesses": 0, "sft_rationale": "scan",
                                "sft_graph_slot": "verbatim", "system_prompt": "compact"}
    assert TraceStyle.from_manifest(style.manifest()) == style
    # a manifest written before a field existed (or with it null) reads as that field's default
    assert TraceStyle.from_manifest({"sft_answers": "rule", "system_prompt": "compact"}) == TraceStyle(
        answers="rule", system="compact")
    assert TraceStyle.from_manifest({}) == TraceStyle()


@pytest.mark.parametrize("flags,want", [
    ([], TraceStyle()),
    (["--system", "compact"], TraceStyle(witnesses=0, system="compact")),  # compact rows list no witness paths
    (["--system", "compact", "--witnesses", "2"], TraceStyle(witnesses=2, system="compact")),
    (["--answers", "rule", "--rationale", "rule", "--graph_slot", "verbatim"],
     TraceStyle("rule", None, "rule", "verbatim")),
])
def test_a_run_config_gives_its_style(flags, want):
    assert parse_run(args=["--seed", "1", *flags]).trace_style() == want
