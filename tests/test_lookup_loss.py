"""``calver train sft --lookup_loss_weight``: which tokens weigh more, and the loss against one computed from logits."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import networkx as nx
import pytest

from calver.config import ConfigError
from calver.data_gen.export import to_sft_rows
from calver.data_gen.trace_style import TraceStyle
from calver.train.common import generate_problems
from calver.train.lookup_loss import check_weight, lookup_spans, token_weights

RECIPE = Path(__file__).resolve().parents[1] / "configs/sft/tiny-cpu.yaml"
TASKS = ["backdoor_set", "frontdoor_set", "separation_set", "blocking_set", "cycle_witness"]


def _rule_rows(n: int = 4, seed: int = 5) -> tuple[list, list[dict]]:
    problems = generate_problems(TASKS, n, seed=seed, n_nodes=(4, 6))
    return problems, to_sft_rows(problems, style=TraceStyle(answers="rule", rationale="rule", system="compact"))


def _nx_edges(problem, kind: str, node: str) -> set[tuple[str, str]]:
    g = nx.DiGraph()
    g.add_nodes_from(problem.graph.nodes)
    g.add_edges_from(problem.graph.directed)
    if kind == "into":
        return {(p, node) for p in g.predecessors(node)}
    return {(node, c) for c in g.successors(node)}


def test_spans_cover_exactly_each_lookup_s_edges_against_networkx():
    problems, rows = _rule_rows()
    seen = set()
    for p, row in zip(problems, rows):
        trace = row["messages"][-1]["content"]
        spans = lookup_spans(trace)
        heads = [line for line in trace.split("Edges ")[1:]]
        assert len(spans) == len(heads)
        for (s, e), head in zip(spans, heads):
            kind = "out of" if head.startswith("out of ") else "into"
            node = head[len(kind) + 1:].split(":", 1)[0]
            text = trace[s:e]
            listed = set() if text == "none" else {tuple(x.split(" -> ")) for x in text.split(", ")}
            assert listed == _nx_edges(p, kind, node), (trace, text)
            assert trace[e] == "." and trace[s - 2:s] == ": "
            seen.add(p.task)
    # blocking and cycle rules are all words; the three adjustment/separation rules look edges up
    assert seen == {"backdoor_set", "frontdoor_set", "separation_set"}


def test_token_weights_weigh_overlapping_trained_tokens_only():
    text = "GRAPH: A -> B\nRule: x. Edges into B: A -> B.\nSTRATEGY: {A}"
    spans = lookup_spans(text)
    assert [text[s:e] for s, e in spans] == ["A -> B"]
    s, e = spans[0]
    offsets = [(0, 5), (s - 2, s), (s - 1, s + 1), (s + 1, e), (e, e + 1), (e + 1, len(text))]
    labels = [-100, 1, 1, 1, 1, 1]
    assert token_weights(offsets, labels, spans, 4.0) == [0.0, 1.0, 4.0, 4.0, 1.0, 1.0]
    labels[2] = -100  # an ignored token never weighs, inside a span or not
    assert token_weights(offsets, labels, spans, 4.0)[2] == 0.0
    assert token_weights(offsets, [1] * 6, [], 4.0) == [1.0] * 6


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, "5", None])
def test_a_weight_the_loss_cannot_use_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="lookup_loss_weight"):
        check_weight(bad, SimpleNamespace(packing=False, padding_free=False))


@pytest.mark.parametrize("mode", ["packing", "padding_free"])
def test_a_weight_needs_padded_batches(mode):
    args = SimpleNamespace(packing=False, padding_free=False)
    setattr(args, mode, True)
    with pytest.raises(ConfigError, match="padded batches"):
        check_weight(5.0, args)
    check_weight(1.0, args)  # the plain loss has nothing to drop


def test_a_weight_needs_rows_truncated_at_their_end():
    args = SimpleNamespace(packing=False, padding_free=False, truncation_mode="keep_end")
    with pytest.raises(ConfigError, match="keep_start"):
        check_weight(5.0, args)
    check_weight(1.0, args)
    args.truncation_mode = "keep_start"
    check_weight(5.0, args)


@pytest.fixture(scope="module")
def weighted(tiny_model_dir, tmp_path_factory):
    from calver.train.sft import build_sft_trainer
    from calver.train.sft_config import load_sft_config

    tmp = tmp_path_factory.mktemp("lookup_loss")
    _, rows = _rule_rows(n=2)
    (tmp / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def build(weight: float, *extra: str):
        args = load_sft_config(RECIPE, [
            "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp / f"out-{weight}"),
            "--dataset_path", str(tmp / "sft.jsonl"), "--lookup_loss_weight", str(weight), *extra])
        trainer = build_sft_trainer(*args)[0]
        trainer.data_path = str(tmp / "sft.jsonl")
        return trainer

    return build


def test_weighted_tokens_are_the_lookups_of_each_row(weighted):
    trainer = weighted(5.0)
    tok = trainer.processing_class
    for ex in trainer.train_dataset:
        ids, labels, w = ex["input_ids"], ex["labels"], ex["loss_weights"]
        assert len(w) == len(ids)
        assert all((x == 0) == (lab == -100) for x, lab in zip(w, labels))
        heavy = tok.decode([i for i, x in zip(ids, w) if x == 5.0])
        trace = ex["messages"][-1]["content"]
        expected = [trace[s:e] for s, e in lookup_spans(trace)]
        assert heavy.split() == " ".join(expected).split()  # each edge list; one leading space token apiece


def test_weighted_loss_matches_one_computed_from_the_logits(weighted):
    import torch

    trainer = weighted(5.0)
    model = trainer.model
    model.train()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(3)])
    loss = trainer.compute_loss(model, dict(batch))
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    labels = batch["labels"][:, 1:]
    mask = labels != -100
    nll = -torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0] * mask
    w = batch["loss_weights"][:, 1:]
    assert float(loss) == pytest.approx(float((nll * w).sum() / mask.sum()), rel=1e-4)
    assert float(loss) > float(nll.sum() / mask.sum()) * 1.01  # the lookups did weigh more

    plain = weighted(1.0)
    assert type(plain).__name__ == "SFTTrainer" and "loss_weights" not in plain.train_dataset.column_names
    plain_batch = plain.data_collator([plain.train_dataset[i] for i in range(3)])
    assert torch.equal(plain_batch["labels"], batch["labels"])
    plain.model.train()
    assert float(plain.compute_loss(plain.model, dict(plain_batch))) == pytest.approx(
        float(nll.sum() / mask.sum()), rel=1e-4)


def test_weighted_sft_trains_and_records_its_weight(weighted):
    from calver.train.common import SUMMARY_FILE
    from calver.train.sft import run_sft
    from calver.train.sft_config import load_sft_config

    trainer = weighted(3.0)  # the fixture's paths, trained through the entry point's own path
    out = trainer.args.output_dir
    run = run_sft(*load_sft_config(RECIPE, [
        "--model_name_or_path", trainer.model.name_or_path, "--output_dir", out,
        "--dataset_path", trainer.data_path, "--lookup_loss_weight", "3", "--max_steps", "2"]))
    assert run.summary["lookup_loss_weight"] == 3.0 and run.summary["steps"] == 2
    assert math.isfinite(run.summary["train_loss"])
    saved = json.loads((Path(out) / SUMMARY_FILE).read_text())
    assert saved["lookup_loss_weight"] == 3.0
    weights = run.trainer.train_dataset["loss_weights"]
    assert saved["trained_tokens"] == sum(lab != -100 for row in run.trainer.train_dataset["labels"] for lab in row)
    assert saved["lookup_tokens"] == sum(x == 3.0 for row in weights for x in row) > 0
