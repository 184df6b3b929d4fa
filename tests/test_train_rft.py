"""``calver train rft``: verified traces kept with distinct answers, rounds trained from the base and
resumed; the policy each round samples from is the previous round's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calver.data_gen.generators import GenConfig, canonical_trace, generate
from calver.data_gen.trace_style import TraceStyle
from calver.evaluation.audits import replace_slot
from calver.train.rft import keep_verified
from calver.verifier import get_family, score

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "configs/sft/tiny-cpu.yaml"


def _many():
    """Backdoor problems with at least two valid sets, and two gold traces with different answers each."""
    probs = generate("backdoor_set", 6, GenConfig(seed=9, n_nodes=(5, 7), many_satisfier=True, min_valid=2))
    out = []
    for p in probs:
        fam = get_family(p.task)
        objs = fam.validity_class(p.graph, fam.normalize_query(p))[:2]
        out.append((p, [fam.canonical_trace(p, o) for o in objs]))
    return out


def test_keep_verified_keeps_distinct_valid_answers_only():
    cases = _many()
    problems = [p for p, _ in cases]
    texts = []
    for p, (a, b) in cases:
        wrong = replace_slot(a, "ANSWER", "{}")
        texts.append([a, a, wrong, "junk", b])
    kept, stats = keep_verified(problems, texts, max_answers=4)
    assert len(kept) == 2 * len(problems)  # the repeat of a and the wrong/junk traces are not kept
    assert all(score(t, p).total == 6 for p, t in kept)
    assert {(p.id, t) for p, t in kept} == {(p.id, t) for p, (a, b) in cases for t in (a, b)}
    n = 5 * len(problems)
    assert stats["candidates"] == n and stats["max_score_rate"] == pytest.approx(3 * len(problems) / n)
    assert stats["bit_rates"]["graph"] == pytest.approx(
        sum(score(t, p).bits[0] for p, ts in zip(problems, texts) for t in ts) / n)
    one, _ = keep_verified(problems, texts, max_answers=1)
    assert [t for _, t in one] == [a for _, (a, _) in cases]


def test_keep_verified_drops_six_of_six_traces_with_a_wrong_rationale_lookup():
    """A 6/6 trace whose rationale lists a wrong edge lookup (or a scan with a wrong mark) earns every bit, but
    RFT does not keep it unless asked (``rft_check_lookups: false``); right rationales and none are kept."""
    import re

    from calver.train.rft import lookups_right

    probs = [p for p in generate("backdoor_set", 12, GenConfig(seed=4, n_nodes=(5, 8)))
             if "Edges into" in canonical_trace(p, TraceStyle("rule", 0, "scan"))][:4]
    assert probs
    texts, rights = [], []
    for p in probs:
        right = canonical_trace(p, TraceStyle("rule", 0, "scan"))
        bad_mark = re.sub(r" yes([,.])", r" no\1", right, count=1)
        bad_list = re.sub(r"(Edges into [^:]+: )[^.]*\.", r"\1none.", right)
        assert score(bad_mark, p).total == score(bad_list, p).total == 6
        assert lookups_right(right, p) and not lookups_right(bad_mark, p) and not lookups_right(bad_list, p)
        texts.append([bad_mark, bad_list, right])
        rights.append(right)
    kept, stats = keep_verified(probs, texts, max_answers=4)
    assert [t for _, t in kept] == rights and stats["wrong_lookups"] == 2 * len(probs)
    unchecked, stats = keep_verified(probs, texts, max_answers=4, check_lookups=False)
    assert [t for _, t in unchecked] == [ts[0] for ts in texts] and stats["wrong_lookups"] == 0
    plain = [[canonical_trace(p, TraceStyle("rule", 0))] for p in probs]
    assert len(keep_verified(probs, plain, max_answers=4)[0]) == len(probs)


class ScriptedSampler:
    """Stands in for the policy: per problem, ``plan(problem_index)`` texts; records how it was built."""

    backend = "hf"

    def __init__(self, built, model, adapter, plan, problems):
        built.append((model, adapter))
        self.plan, self.problems = plan, problems

    def generate(self, prompts, cfg, seeds=None, progress=None):
        from calver.infer.sampler import Completion

        assert len(prompts) == len(self.problems)  # one prompt per training problem, in order
        return [[Completion(t, "stop", 5, None) for t in self.plan(i)][: cfg.n] for i in range(len(prompts))]


@pytest.mark.slow
def test_rounds_train_from_the_base_resume_and_sample_the_last_policy(tiny_model_dir, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    from calver.train.rft import load_problems, run_rft
    from calver.train.rft_config import load_rft_config

    args = load_rft_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "rft"),
                                    "--generate_n", "3", "--generate_n_nodes", "4", "5", "--rounds", "3",
                                    "--rft_k", "3", "--max_steps", "1"])
    problems = load_problems(args[0])
    golds = [canonical_trace(p) for p in problems]
    built: list = []
    # round 0: one gold trace per problem; round 1: nothing verifiable; round 2: gold again
    plans = {0: lambda i: [golds[i], "junk", golds[i]], 1: lambda i: ["junk"] * 3, 2: lambda i: [golds[i]] * 3}
    calls = iter(range(3))

    def factory(model, adapter):
        return ScriptedSampler(built, model, adapter, plans[next(calls)], problems)

    rounds = run_rft(*args, sampler_factory=factory)
    out = tmp_path / "rft"
    assert [r.trained for r in rounds] == [True, True, True]  # round 1 trains on round 0's kept traces
    assert [r.kept_traces for r in rounds] == [3, 0, 3] and [r.train_rows for r in rounds] == [3, 3, 3]
    assert rounds[0].yield_rate == 1.0 and rounds[1].yield_rate == 0.0 and rounds[1].max_score_rate == 0.0
    assert built[0] == (str(tiny_model_dir), None)  # round 0 samples the base
    assert built[1] == (str(tiny_model_dir), str(out / "round_0" / "model"))  # then the base + last adapter
    assert built[2] == (str(tiny_model_dir), str(out / "round_1" / "model"))
    assert (out / "round_2" / "model" / "adapter_config.json").exists()
    rows = [json.loads(x) for x in (out / "round_0" / "rows.jsonl").read_text().splitlines()]
    assert [r["messages"][-1]["content"] for r in rows] == golds
    summary = json.loads((out / "rft_summary.json").read_text())
    assert [r["kept_traces"] for r in summary["rounds"]] == [3, 0, 3]
    # a rerun reads every finished round back and samples nothing
    again = run_rft(*args, sampler_factory=lambda m, a: pytest.fail("a finished round was sampled again"))
    assert [r.kept_traces for r in again] == [3, 0, 3]


@pytest.mark.slow
def test_a_real_sampler_round_on_the_tiny_model(tiny_model_dir, tmp_path):
    """The production path: make_sampler (HF) on the random-init tiny model, which writes no 6/6 trace, so the
    round is recorded with its rates and trains nothing."""
    pytest.importorskip("trl")
    from calver.train.rft import run_rft
    from calver.train.rft_config import load_rft_config

    args = load_rft_config(RECIPE, ["--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "r"),
                                    "--generate_n", "2", "--generate_n_nodes", "4", "4", "--rounds", "1",
                                    "--rft_k", "2", "--rft_max_tokens", "12", "--rft_backend", "hf"])
    (res,) = run_rft(*args)
    assert res.candidates == 4 and res.trained is False and res.kept_traces == 0
    rows = [json.loads(x) for x in (tmp_path / "r" / "round_0" / "candidates.jsonl").read_text().splitlines()]
    assert [len(r["texts"]) for r in rows] == [2, 2]


def test_smollm2_rft_config_loads_as_measured():
    """configs/rft/smollm2-135m.yaml (the README's RFT round): one round, K=4 at T=0.8 with vLLM, full fine-tuning,
    rationale lookups checked."""
    pytest.importorskip("trl")
    from calver.train.rft_config import load_rft_config

    s, t, m = load_rft_config(ROOT / "configs/rft/smollm2-135m.yaml", ["--use_cpu", "true"])
    assert (s.rounds, s.rft_k, s.rft_temperature, s.rft_backend, s.system_prompt) == (1, 4, 0.8, "vllm", "compact")
    assert s.rft_check_lookups and s.full_finetune and not m.use_peft and t.num_train_epochs == 2
