"""``calver train rft``: verifier-filtered self-training (rejection-sampling fine-tuning, STaR-style).

Each round samples ``rft_k`` candidates per training problem from the current policy, scores them with
the verifier against the problem's source, keeps the 6/6 traces (up to ``rft_max_answers`` *distinct*
valid answers per problem, by the family's canonical answer key: a problem with many valid answers teaches
more than one canonical answer), and fine-tunes the base model on every trace kept so far (each round
starts again from the base, as STaR does, so adapters never stack). The next round samples from that
policy. A round whose sampling keeps nothing is reported and trains nothing.

Output: ``output_dir/round_R/`` holds ``candidates.jsonl`` (every sample with its bits), ``rows.jsonl``
(the SFT rows trained on), ``model/`` (the round's adapter or model) and ``round.json`` (yield, per-bit
rates, distinct answers, timings), written last: a finished round is skipped on a rerun, so an interrupted
run resumes at its first unfinished round. ``output_dir/rft_summary.json`` lists every round.

The problems are training problems (``dataset_path``: a ``calver gen`` problems.jsonl or folder; else
generated with ``generate_*``); the verifier reads their full source, so no label of an evaluation item is
involved. Sampling uses :func:`calver.infer.sampler.make_sampler` (vLLM when it imports, else HF).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from calver.data_gen.prompts import render_prompt
from calver.verifier import BIT_KEYS, Problem, prepare, score

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class RoundResult:
    """What one round sampled, kept and trained."""

    round: int
    policy: str  # the model (and adapter) sampled: "base" or the previous round's model folder
    problems: int
    candidates: int
    kept_traces: int  # this round's 6/6 traces kept (distinct answers per problem, capped)
    problems_with_a_kept_trace: int
    bit_rates: dict[str, float]  # per-bit pass rates over every candidate of the round
    max_score_rate: float
    train_rows: int  # rows trained on: every round's kept traces so far
    trained: bool
    seconds: dict[str, float]
    wrong_lookups: int = 0  # 6/6 traces not kept: their rationale states a wrong edge lookup

    @property
    def yield_rate(self) -> float:
        return self.problems_with_a_kept_trace / self.problems if self.problems else 0.0


def load_problems(script_args) -> list[Problem]:
    """The training problems: ``dataset_path`` (problems.jsonl, or a ``calver gen`` folder), else generated."""
    if script_args.dataset_path:
        from calver.infer.sample import load_problem_rows

        return [Problem.from_dict(r["problem"]) for r in load_problem_rows(script_args.dataset_path)]
    from calver.train.common import generate_problems

    return generate_problems(script_args.generate_tasks, script_args.generate_n, script_args.generate_seed,
                             script_args.generate_n_nodes)


def lookups_right(text: str, problem: Problem) -> bool:
    """Whether every edge lookup and scan the trace's rationale states (:mod:`calver.data_gen.rationales`) is
    right on the problem's source graph; a trace that states none passes."""
    from calver.data_gen.rationales import check_lookups

    if problem.graph is None:
        return True
    c = check_lookups(text, problem.graph)
    return c.exact == c.lookups and c.complete == c.scans and c.marks_right == c.scanned


def keep_verified(problems: Sequence[Problem], texts: Sequence[Sequence[str]], max_answers: int,
                  check_lookups: bool = True) -> tuple[list[tuple[Problem, str]], dict[str, Any]]:
    """Per problem, its 6/6 traces with distinct answers (first seen first, at most ``max_answers``), and the
    round's statistics over every candidate. ``check_lookups``: a 6/6 trace whose rationale states a wrong
    edge lookup (which no bit checks) is not kept, so self-training does not teach the wrong lookup."""
    kept: list[tuple[Problem, str]] = []
    bit_sums = [0] * len(BIT_KEYS)
    n = n_max = n_wrong = 0
    for p, cands in zip(problems, texts):
        prepared = prepare(p)
        seen: set[Any] = set()
        for text in cands:
            v = score(text, prepared)
            n += 1
            bit_sums = [a + b for a, b in zip(bit_sums, v.bits)]
            if not v.max_score:
                continue
            n_max += 1
            if check_lookups and not lookups_right(text, p):
                n_wrong += 1
                continue
            key = v.answer_key
            if key in seen or len(seen) >= max_answers:
                continue
            seen.add(key)
            kept.append((p, text))
    stats = {"candidates": n, "max_score_rate": n_max / n if n else 0.0, "wrong_lookups": n_wrong,
             "bit_rates": {k: (s / n if n else 0.0) for k, s in zip(BIT_KEYS, bit_sums)}}
    return kept, stats


def _rows(kept: Sequence[tuple[Problem, str]], system: str) -> list[dict[str, Any]]:
    return [{"id": p.id, "task": p.task, "messages": render_prompt(p, system=system) +
             [{"role": "assistant", "content": t}]} for p, t in kept]


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)


def run_rft(script_args, training_args, model_args, *, sampler_factory=None) -> list[RoundResult]:
    """All rounds (finished ones are read back, not redone). ``sampler_factory(model, adapter)`` replaces
    :func:`make_sampler` (tests)."""
    from calver.infer.pool import read_jsonl
    from calver.infer.sampler import SamplingConfig, make_sampler
    from calver.train.sft import run_sft

    out = Path(training_args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = model_args.model_name_or_path
    problems = load_problems(script_args)
    if not problems:
        raise ValueError("rft: no training problems")
    make = sampler_factory or (lambda model, adapter: make_sampler(model, adapter, backend=script_args.rft_backend))
    results: list[RoundResult] = []
    all_kept: list[dict[str, Any]] = []
    policy: tuple[str, str | None] = (base, None)
    for r in range(script_args.rounds):
        rdir = out / f"round_{r}"
        done = rdir / "round.json"
        if done.exists():  # a finished round: read back its rows and result
            res = RoundResult(**json.loads(done.read_text()))
            all_kept = list(read_jsonl(rdir / "rows.jsonl"))
            results.append(res)
            if res.trained:
                policy = _policy(base, rdir / "model", model_args)
            continue
        rdir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        sampler = make(*policy)
        try:
            prompts = [render_prompt(p, system=script_args.system_prompt) for p in problems]
            cfg = SamplingConfig(temperature=script_args.rft_temperature, max_tokens=script_args.rft_max_tokens,
                                 n=script_args.rft_k, logprobs=False)
            seeds = [script_args.generate_seed * 1_000_003 + 7919 * r + i for i in range(len(problems))]
            outs = sampler.generate(prompts, cfg, seeds=seeds)
        finally:
            close = getattr(sampler, "close", None)
            if close is not None:
                close()
        texts = [[c.text for c in cands] for cands in outs]
        t_sample = time.perf_counter() - t0
        kept, stats = keep_verified(problems, texts, script_args.rft_max_answers, script_args.rft_check_lookups)
        _write_jsonl(rdir / "candidates.jsonl", [{"problem_id": p.id, "texts": ts} for p, ts in zip(problems, texts)])
        new_rows = _rows(kept, script_args.system_prompt)
        have = {(x["id"], x["messages"][-1]["content"]) for x in all_kept}
        all_kept += [x for x in new_rows if (x["id"], x["messages"][-1]["content"]) not in have]
        _write_jsonl(rdir / "rows.jsonl", all_kept)
        t1 = time.perf_counter()
        trained = bool(all_kept)
        if trained:
            sa = copy.copy(script_args)
            sa.dataset_path = str(rdir / "rows.jsonl")
            ta = copy.deepcopy(training_args)
            ta.output_dir = str(rdir / "model")
            run_sft(sa, ta, model_args)
        else:
            logger.warning("rft round %d: no 6/6 trace among %d candidates: nothing to train on", r,
                           stats["candidates"])
        res = RoundResult(
            round=r, policy="base" if policy[0] == base and policy[1] is None else str(policy[1] or policy[0]),
            problems=len(problems), candidates=stats["candidates"], kept_traces=len(kept),
            problems_with_a_kept_trace=len({p.id for p, _ in kept}), bit_rates=stats["bit_rates"],
            max_score_rate=stats["max_score_rate"], train_rows=len(all_kept), trained=trained,
            wrong_lookups=stats["wrong_lookups"],
            seconds={"sample": round(t_sample, 2), "train": round(time.perf_counter() - t1, 2)})
        done.write_text(json.dumps(dataclasses.asdict(res), indent=2) + "\n")
        logger.info("rft round %d: %d/%d problems yielded a 6/6 trace (%d kept), max-score rate %.3f", r,
                    res.problems_with_a_kept_trace, res.problems, res.kept_traces, res.max_score_rate)
        results.append(res)
        if trained:
            policy = _policy(base, rdir / "model", model_args)
    summary = {"rounds": [dict(dataclasses.asdict(x), yield_rate=x.yield_rate) for x in results],
               "answers_per_problem": dict(Counter(Counter(x["id"] for x in all_kept).values())),
               "train_rows": len(all_kept)}
    (out / "rft_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return results


def _policy(base: str, model_dir: Path, model_args) -> tuple[str, str | None]:
    """What the next round samples: the base with the round's LoRA adapter, or the round's full model."""
    return (base, str(model_dir)) if getattr(model_args, "use_peft", False) else (str(model_dir), None)


def run_rft_command(script_args, training_args, model_args):
    """``calver train rft``'s entry: every round, and the summary it wrote."""
    from calver.train.common import TrainRun

    run_rft(script_args, training_args, model_args)
    summary = json.loads((Path(training_args.output_dir) / "rft_summary.json").read_text())
    return TrainRun(trainer=None, summary={"trainer": "rft", **summary})


__all__ = ["RoundResult", "keep_verified", "load_problems", "lookups_right", "run_rft", "run_rft_command"]
