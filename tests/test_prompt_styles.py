"""Prompt styles of `calver sample` (zero_shot | few_shot:N | completion): rendering, template hash,
manifest/resume, bad values, and a real tiny-model run of the non-default styles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_infer_sample import DetSampler, cfg_for, problems_file  # noqa: F401 - problems_file is a fixture

import calver.data_gen.prompt_styles as ps
from calver.config import ConfigError
from calver.data_gen.generators import GenConfig, generate
from calver.data_gen.prompt_styles import (
    FEW_SHOT_SEED,
    PromptStyle,
    build_prompt,
    few_shot_examples,
    parse_prompt_style,
    response_prefix,
    template_hash,
)
from calver.data_gen.prompts import render_prompt, system_prompt, user_text
from calver.data_gen.trace_style import TraceStyle
from calver.infer.manifest import sha256_text
from calver.infer.pool import PoolError
from calver.infer.sample import run_sample
from calver.verifier import score


def item(task: str, seed: int = 7):
    return generate(task, 1, GenConfig(seed=seed))[0]


def test_parse_prompt_style():
    assert parse_prompt_style("zero_shot") == PromptStyle()
    assert parse_prompt_style("few_shot:3") == PromptStyle("few_shot", 3)
    assert parse_prompt_style("few_shot:03").spec == "few_shot:3"
    assert parse_prompt_style("completion").chat is False
    for bad in ("few_shot:0", "few_shot:x", "few_shot", "chat", "", "few_shot:-1"):
        with pytest.raises(ConfigError, match="few_shot:N"):
            parse_prompt_style(bad)


def test_zero_shot_is_render_prompt():
    p = item("backdoor_set")
    assert build_prompt(p, PromptStyle()) == render_prompt(p) and response_prefix(p, PromptStyle()) == ""


@pytest.mark.parametrize("task", ["backdoor_set", "knights_knaves", "cycle_witness"])
def test_few_shot_examples_are_scored_training_items_of_the_family(task):
    p = item(task)
    msgs = build_prompt(p, parse_prompt_style("few_shot:2"))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[0]["content"] == system_prompt(task) and msgs[-1]["content"] == user_text(p)
    train = {q.id: q for q in generate(task, 3, GenConfig(seed=FEW_SHOT_SEED))}
    shown = few_shot_examples(p, 2)
    turns = [(u["content"], a["content"]) for u, a in zip(msgs[1:5:2], msgs[2:5:2])]
    assert [(e.user, e.trace) for e in shown] == turns
    for ex in shown:
        q = train[ex.problem_id]
        assert q.task == task and q.id != p.id and ex.user != user_text(p) and ex.user == user_text(q)
        assert score(ex.trace, q).total == 6


def test_few_shot_never_shows_the_item_itself():
    own = generate("path", 1, GenConfig(seed=FEW_SHOT_SEED))[0]  # the first training example
    shown = few_shot_examples(own, 2)
    assert len(shown) == 2 and own.id not in {e.problem_id for e in shown}
    assert all(e.user != user_text(own) for e in shown)


def test_completion_is_one_string_ending_in_the_first_slot_label():
    style = parse_prompt_style("completion")
    for task, label in (("backdoor_set", "GRAPH"), ("knights_knaves", "CONSTRAINTS")):
        p = item(task)
        text = build_prompt(p, style)
        assert isinstance(text, str) and text.startswith(system_prompt(task)) and user_text(p) in text
        assert text.endswith(f"\n{label}:") and response_prefix(p, style) == f"{label}:"


def test_template_hash_changes_with_the_template(monkeypatch):
    tasks = ["backdoor_set", "knights_knaves"]
    specs = ("zero_shot", "few_shot:1", "few_shot:2", "completion")
    h = {s: template_hash(parse_prompt_style(s), tasks) for s in specs}
    assert len(set(h.values())) == 4
    assert template_hash(parse_prompt_style("few_shot:2"), reversed(tasks)) == h["few_shot:2"]
    assert template_hash(PromptStyle(), ["backdoor_set"]) != h["zero_shot"]
    monkeypatch.setattr(ps, "COMPLETION_FORMAT", ps.COMPLETION_FORMAT.replace("### Response", "### Answer"))
    assert template_hash(parse_prompt_style("completion"), tasks) != h["completion"]
    monkeypatch.setattr(ps, "FEW_SHOT_SEED", FEW_SHOT_SEED + 1)  # other examples
    ps.example_pool.cache_clear()
    try:
        assert template_hash(parse_prompt_style("few_shot:1"), tasks) != h["few_shot:1"]
    finally:
        monkeypatch.undo()
        ps.example_pool.cache_clear()
    assert template_hash(parse_prompt_style("few_shot:1"), tasks) == h["few_shot:1"]
    # stable across processes (the examples come from the seeded generator, not from hash())
    code = ("from calver.data_gen.prompt_styles import *; "
            "print(template_hash(parse_prompt_style('few_shot:2'), ['backdoor_set', 'knights_knaves']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == h["few_shot:2"]


def test_manifest_records_style_and_resume_refuses_another(tmp_path, problems_file):  # noqa: F811
    det = DetSampler()
    pool = run_sample(cfg_for(tmp_path, problems_file, prompt="few_shot:1"), sampler=det, log=lambda m: None)
    m = pool.manifest()["prompt"]
    tasks = {p.task for p in pool.problems().values()}
    assert m["style"] == "few_shot:1" and m["template_hash"] == template_hash(parse_prompt_style("few_shot:1"), tasks)
    assert m["user_prompts_hash"] and "response_prefixes" not in m
    assert all(len(p) == 4 for p in det.prompts)  # system, example user + assistant, item
    for other in ("few_shot:2", "zero_shot", "completion"):
        with pytest.raises(PoolError, match="prompt"):
            run_sample(cfg_for(tmp_path, problems_file, prompt=other), sampler=DetSampler(), log=lambda m: None)


def test_completion_rows_hold_the_whole_trace_and_unstyled_pools_refuse(tmp_path, problems_file):  # noqa: F811
    det = DetSampler()
    pool = run_sample(cfg_for(tmp_path, problems_file, out="c", prompt="completion"), sampler=det, log=lambda m: None)
    assert all(isinstance(p, str) and p.endswith("GRAPH:") for p in det.prompts)
    tasks = {p.task for p in pool.problems().values()}
    assert pool.manifest()["prompt"]["response_prefixes"] == dict.fromkeys(sorted(tasks), "GRAPH:")
    assert all(r["text"].startswith("GRAPH:ANSWER") for r in pool.candidate_rows())
    # a manifest that does not record its prompt template cannot be resumed under any
    cfg = cfg_for(tmp_path, problems_file, out="z", freeze=False)
    z = run_sample(cfg, sampler=DetSampler(), log=lambda m: None)
    old = z.manifest()
    del old["prompt"]["style"], old["prompt"]["template_hash"]
    z.manifest_path.write_text(json.dumps(old))
    with pytest.raises(PoolError, match="prompt"):
        run_sample(cfg, sampler=DetSampler(), log=lambda m: None)


def test_cli_bad_prompt_exits_2_and_help_lists_it(tmp_path, problems_file, capsys):  # noqa: F811
    from calver.infer.cli import main  # the sample command's own parser (as `calver sample`)

    path, model = problems_file
    base = ["sample", "--problems", str(path), "--out", str(tmp_path / "p"), "--model", str(model), "--backend", "hf"]
    for bad in ("few_shot:0", "few_shot:x", "chat"):
        assert main([*base, "--prompt", bad]) == 2
        err = capsys.readouterr().err
        assert "'prompt'" in err and "zero_shot | compact | few_shot:N (1 <= N <= 64) | completion" in err
    assert not (tmp_path / "p").exists()
    with pytest.raises(SystemExit) as e:
        main(["sample", "--help"])
    assert e.value.code == 0 and "--prompt" in capsys.readouterr().out


class Recording:
    """The real sampler, keeping the prompts it was given."""

    def __init__(self, inner):
        self.inner, self.backend, self.prompts = inner, inner.backend, []

    def generate(self, prompts, cfg, seeds, **kw):
        self.prompts += prompts
        return self.inner.generate(prompts, cfg, seeds, **kw)

    def close(self):
        self.inner.close()


@pytest.mark.parametrize("style", ["completion", "few_shot:1"])
def test_real_sample_run_on_the_tiny_model(tiny_model_dir, tmp_path, style):
    pytest.importorskip("torch")
    from calver.infer.sample_config import SampleConfig
    from calver.infer.sampler import make_sampler

    src = tmp_path / "problems.jsonl"
    src.write_text(json.dumps(item("backdoor_set").to_dict()) + "\n")
    cfg = SampleConfig(problems=str(src), out=str(tmp_path / "pool"), model=str(tiny_model_dir), k=2, seeds=[0],
                       max_tokens=6, backend="hf", model_hash="none", prompt=style)
    rec = Recording(make_sampler(tiny_model_dir, backend="hf"))
    pool = run_sample(cfg, sampler=rec, log=lambda m: None)
    rows = list(pool.candidate_rows())
    assert pool.frozen and len(rows) == 2 and pool.manifest()["prompt"]["style"] == style
    (prompt,) = rec.prompts
    if style == "completion":
        assert isinstance(prompt, str) and rec.inner.render(prompt) == prompt  # sent untemplated
        assert all(r["text"].startswith("GRAPH:") for r in rows)
    else:
        assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
        assert prompt[2]["content"] in rec.inner.render(prompt)


def test_compact_style_shares_the_user_turn_and_shortens_the_system_message(tmp_path, problems_file):  # noqa: F811
    """Issue 31 (compact rows): the contract instructions were 55-58% of every SFT row and carry no loss. The
    compact style keeps the user turn and replaces the system message with one line naming the task and
    its slot labels; training exports and sampling use the same message, and the manifest records it."""
    from calver.data_gen.export import to_grpo_rows, to_sft_rows

    assert parse_prompt_style("compact") == PromptStyle("compact") and PromptStyle("compact").system == "compact"
    for task in ("backdoor_set", "knights_knaves", "ate_threshold"):
        p = generate(task, 1, GenConfig(seed=4))[0]
        full, compact = render_prompt(p), build_prompt(p, PromptStyle("compact"))
        assert compact[1] == full[1] and compact[0]["content"] == system_prompt(task, "compact")
        label = "CONSTRAINTS" if task == "knights_knaves" else "GRAPH"
        assert task in compact[0]["content"] and label in compact[0]["content"]
        assert len(compact[0]["content"]) * 5 < len(full[0]["content"])  # a line, not the contract
        sft = to_sft_rows([p], style=TraceStyle(system="compact"))[0]["messages"]
        assert sft[0] == compact[0] and sft[1] == compact[1] and score(sft[2]["content"], p).total == 6
        assert to_grpo_rows([p], system="compact")[0]["prompt"] == compact
    assert template_hash(PromptStyle("compact"), ["backdoor_set"]) != template_hash(PromptStyle(), ["backdoor_set"])
    with pytest.raises(ValueError, match="system prompt"):
        system_prompt("backdoor_set", "terse")
    pool = run_sample(cfg_for(tmp_path, problems_file, prompt="compact"), sampler=DetSampler(), log=lambda m: None)
    m = pool.manifest()
    assert m["prompt"]["style"] == "compact"
    want = {t: sha256_text(system_prompt(t, "compact")) for t in m["prompt"]["system_prompt_hashes"]}
    assert m["prompt"]["system_prompt_hashes"] == want
