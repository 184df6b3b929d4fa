"""Export: loadable datasets with the expected columns, a content hash, and rows that rebuild
problems whose gold traces still score 6."""

from __future__ import annotations

import hashlib
import json

import pytest

datasets = pytest.importorskip("datasets")

from calver.data_gen.export import GRPO_COLUMNS, SFT_COLUMNS, export_dataset, problems_from_rows  # noqa: E402
from calver.data_gen.gen_config import GenConfig  # noqa: E402
from calver.data_gen.generators import canonical_trace, generate  # noqa: E402
from calver.data_gen.trace_style import TraceStyle  # noqa: E402
from calver.verifier import contract_instructions, score  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    cfg = GenConfig(seed=21, encoding=["arrows", "json_parents", "prose"], naming="mixed")
    problems = generate("backdoor_set", 15, cfg) + generate("intervention_reachability", 10, cfg) \
        + generate("cycle_witness", 5, cfg)
    out = tmp_path_factory.mktemp("export")
    manifest = export_dataset(problems, out, cfg)
    return out, problems, manifest, cfg


def test_files_and_card(exported):
    out, problems, manifest, cfg = exported
    for name in ("problems.jsonl", "sft.jsonl", "grpo.jsonl", "sft.parquet", "grpo.parquet", "manifest.json",
                 "README.md", "hf"):
        assert (out / name).exists(), name
    digest = hashlib.sha256((out / "problems.jsonl").read_bytes()).hexdigest()
    assert manifest["content_hash"] == digest
    card = (out / "README.md").read_text()
    assert digest in card and '"seed": 21' in card and "calver 0.1.0" in card
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk["config"] == cfg.to_dict() and on_disk["n_rows"] == 30


def test_hf_dataset_columns(exported):
    out, problems, _, _ = exported
    dd = datasets.load_from_disk(str(out / "hf"))
    assert set(dd) == {"sft", "grpo"}
    assert tuple(dd["sft"].column_names) == SFT_COLUMNS
    assert tuple(dd["grpo"].column_names) == GRPO_COLUMNS
    assert len(dd["sft"]) == len(dd["grpo"]) == len(problems)
    row = dd["sft"][0]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert row["messages"][0]["content"] == contract_instructions(row["task"])
    pq = datasets.Dataset.from_parquet(str(out / "grpo.parquet"))
    assert pq.column_names == dd["grpo"].column_names and len(pq) == len(problems)


def test_rows_rebuild_problems_that_score(exported):
    out, problems, _, _ = exported
    rows = [json.loads(line) for line in (out / "grpo.jsonl").read_text().splitlines()]
    sft = [json.loads(line) for line in (out / "sft.jsonl").read_text().splitlines()]
    rebuilt = problems_from_rows(rows)
    for p, q, r, s in zip(problems, rebuilt, rows, sft):
        assert q.id == p.id and q.graph == p.graph and q.meta["validity_class"] == p.meta["validity_class"]
        assert r["prompt"] == s["messages"][:2]
        trace = s["messages"][2]["content"]
        assert trace == canonical_trace(p)
        assert score(trace, q).total == 6


def test_export_is_deterministic(exported, tmp_path):
    _, problems, manifest, cfg = exported
    again = export_dataset(problems, tmp_path / "again", cfg)
    assert again["content_hash"] == manifest["content_hash"]
    assert again["file_sha256"] == manifest["file_sha256"]


def test_duplicate_ids_rejected(exported, tmp_path):
    _, problems, _, cfg = exported
    with pytest.raises(ValueError, match="duplicate"):
        export_dataset([problems[0], problems[0]], tmp_path / "dup", cfg)


def test_gen_writes_compact_rows_when_asked(tmp_path):
    from calver.cli import main
    from calver.data_gen.prompts import system_prompt

    out = tmp_path / "compact"
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--seed", "0", "--out", str(out), "--system",
                 "compact"]) == 0
    sft = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    grpo = [json.loads(x) for x in (out / "grpo.jsonl").read_text().splitlines()]
    want = system_prompt("backdoor_set", "compact")
    assert all(r["messages"][0]["content"] == want for r in sft)
    assert all(r["prompt"][0]["content"] == want for r in grpo)
    assert json.loads((out / "manifest.json").read_text())["system_prompt"] == "compact"
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--seed", "0", "--out", str(tmp_path / "x"),
                 "--system", "terse"]) == 2


def test_gen_rule_answers_without_witnesses_and_a_list_of_namings(tmp_path):
    """The training mix's rows: `answers: rule` writes the family rule's answer, the compact system drops the
    witness paths the verifier does not need (unless `witnesses` says otherwise), and `naming` may list several
    vocabularies, one drawn per item and recorded in its meta."""
    from calver.cli import main
    from calver.data_gen.names import DOMAINS
    from calver.verifier import Problem, get_family, score

    out = tmp_path / "mix"
    assert main(["gen", "--tasks", "backdoor_set", "separation_set", "--n", "12", "--seed", "3", "--out", str(out),
                 "--system", "compact", "--answers", "rule", "--naming", "identifiers", "medicine",
                 "--variants", "any", "--n_nodes", "5", "8"]) == 0
    rows = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    problems = [Problem.from_dict(json.loads(x)) for x in (out / "problems.jsonl").read_text().splitlines()]
    assert {p.meta["naming"] for p in problems} == {"identifiers", "medicine"}
    for p, r in zip(problems, rows):
        trace = r["messages"][2]["content"]
        fam = get_family(p.task)
        rule = fam.rule_object(p)
        if rule is not None:
            assert f"STRATEGY: {fam.format_object(rule)}\n" in trace
        if p.task == "backdoor_set":
            assert "blocked=none)" in trace  # no witness path listed
        assert score(trace, p).total == 6
        if p.meta["naming"] == "medicine":
            assert all(n in DOMAINS["medicine"] or n.rsplit("_", 1)[0] in DOMAINS["medicine"] for n in p.graph.nodes)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sft_answers"] == "rule" and manifest["sft_witnesses"] == 0
    with_paths = tmp_path / "paths"
    assert main(["gen", "--tasks", "backdoor_set", "--n", "12", "--seed", "3", "--out", str(with_paths),
                 "--system", "compact", "--answers", "rule", "--witnesses", "2", "--n_nodes", "6", "8"]) == 0
    assert json.loads((with_paths / "manifest.json").read_text())["sft_witnesses"] == 2
    assert "blocked=none)" not in (with_paths / "sft.jsonl").read_text().replace("\\n", "\n").split("DERIVATION")[1]
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--seed", "0", "--out", str(tmp_path / "y"),
                 "--answers", "best"]) == 2
    assert main(["gen", "--tasks", "backdoor_set", "--n", "2", "--seed", "0", "--out", str(tmp_path / "z"),
                 "--naming", "letters", "klingon"]) == 2


def test_clear_wordings_and_headerless_prompts_keep_the_trace():
    """wording: clear asks CLEAR's questions where CLEAR has them; headerless drops the header line; the query,
    the canonical trace and its score are unchanged, and a default config generates what it always did."""
    from calver.data_gen.gen_config import GenConfig
    from calver.data_gen.generators import canonical_trace, generate
    from calver.verifier import score

    base = dict(seed=12, n_nodes=(5, 8), variants=("any",), encoding=("clear",))
    plain = {t: generate(t, 12, GenConfig(**base)) for t in ("separation_set", "blocking_set", "cycle_witness")}
    styled = {t: generate(t, 12, GenConfig(**base, wording=("clear",), headerless=1.0)) for t in plain}
    assert [p.to_dict() for p in generate("separation_set", 12, GenConfig(**base, wording=("calver",)))] == \
        [p.to_dict() for p in plain["separation_set"]]
    seen = set()
    for task in plain:
        for a, b in zip(plain[task], styled[task]):
            assert a.query == b.query and a.graph == b.graph
            assert b.text.startswith("Given ") and not b.text.startswith("The causal graph")
            assert score(canonical_trace(b, TraceStyle("rule", 0)), b).total == 6
            if "nodeset that can d-separate node" in b.text:
                seen.add("sep")
                (x,), (y,) = b.query["x"], b.query["y"]
                assert b.text.endswith(f"d-separate node {x} and node {y} .")
            if "nodeset that can block path" in b.text:
                seen.add("block")
                assert " -> " not in b.text.rsplit("\n", 1)[-1]
            if b.text.endswith("Find one cycle in this graph."):
                seen.add("cycle")
                assert not b.graph.acyclic
    assert seen == {"sep", "block", "cycle"}
    mixed = generate("blocking_set", 30, GenConfig(**base, wording=("calver", "clear"), headerless=0.5))
    assert {p.meta["wording"] for p in mixed} == {"calver", "clear"} and {p.meta["header"] for p in mixed} == {0, 1}
