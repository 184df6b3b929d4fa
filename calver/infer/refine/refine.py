"""Verifier-guided refinement, and the token-matched best-of-K' it is compared with (label-free).

Round 0 is a pool's K candidates. For every unit without a max-score candidate, the current best
candidate (highest six-bit score; ties -> the latest) goes back to the policy as an assistant turn,
followed by a user turn holding :func:`~calver.infer.refine.feedback.feedback_for` of it, and the
policy (through the shared sampler) writes a revision. Rounds stop at the maximum score or after
``rounds``. The refined answer is CALVER over pool + revisions.

Baseline, same problems and the same sampled-token budget: for each unit, fresh candidates are
sampled from the original prompt until their tokens reach what refinement spent on that unit
(best-of-K', K' >= K), then CALVER selects. Sampled tokens are completion tokens (``num_tokens``);
prompt tokens of the revision prompts are reported beside them.

Scoring and feedback read only the firewall views (label-free problems). Round 0's scores come from
the pool's score table (:mod:`calver.infer.score_table`); a revision or extra sample is scored once,
unless it repeats a text the problem's units already have. Grading the arms and the ``calver refine`` report live
in :mod:`calver.evaluation.refine_eval`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from calver.config import ConfigError, cfg_field, check_types, parse
from calver.data_gen.prompts import render_prompt as prompt_messages
from calver.infer.firewall import SelectorView, make_views
from calver.infer.pool import Pool
from calver.infer.refine.feedback import feedback_for
from calver.infer.score_table import ScoreTable, score_table
from calver.infer.selectors import candidate_scores
from calver.verifier import SLOTS, Verdict, score, select_from_scores

MAX_SCORE = len(SLOTS)


@dataclass
class RefineConfig:
    """Settings of the refinement loop (``calver refine --config``, ``configs/refine/*.yaml``)."""

    rounds: int = cfg_field(2, help="T: revision rounds at most")
    revisions: int = cfg_field(1, help="samples per revision round")
    k: int | None = cfg_field(None, help="candidates per unit taken from the pool as round 0 (its first k); "
                              "null: all of them")
    temperature: float | None = cfg_field(None, help="null: the pool's sampling settings")
    top_p: float | None = cfg_field(None, help="null: the pool's sampling settings")
    max_tokens: int | None = cfg_field(None, help="null: the pool's sampling settings")
    seed: int = cfg_field(0, help="seed of the revision and best-of-K' samples")
    baseline: bool = cfg_field(True, help="also run the token-matched best-of-K'")
    baseline_batch: int = cfg_field(8, help="most extra candidates drawn per unit and call")
    draws: int = cfg_field(2000, help="bootstrap draws")
    sampler_kwargs: dict[str, Any] = cfg_field(
        {}, help="extra backend arguments of the policy sampler `calver refine` builds (YAML mapping, e.g. "
        "tensor_parallel_size, max_model_len, dtype); recorded in refine.json's config")

    def __post_init__(self) -> None:
        check_types(self)
        for name, low in (("rounds", 0), ("revisions", 1), ("baseline_batch", 1), ("draws", 1)):
            if getattr(self, name) < low:
                raise ConfigError(f"field {name!r} must be >= {low}, got {getattr(self, name)}")
        if self.k is not None and self.k < 1:
            raise ConfigError(f"field 'k' must be >= 1 or null, got {self.k}")


def load_refine_config(path: str | Path | None, args: Sequence[str] = (), **overrides: Any) -> RefineConfig:
    """A :class:`RefineConfig` from YAML (unknown keys are errors), then ``--field value`` ``args``, then
    non-None keyword ``overrides``."""
    return parse(RefineConfig, path, args, overrides=overrides)


def derived_seed(*parts: Any) -> int:
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def sampling_config(pool: Pool, cfg: RefineConfig, n: int):
    from calver.infer.sampler import SamplingConfig

    s = {}
    try:
        s = pool.manifest().get("sampling", {}) or {}
    except Exception:  # noqa: BLE001 - a pool without a manifest samples with the defaults
        pass
    pick = lambda mine, key, default: mine if mine is not None else s.get(key, default)  # noqa: E731
    return SamplingConfig(temperature=float(pick(cfg.temperature, "temperature", 0.8)),
                          top_p=float(pick(cfg.top_p, "top_p", 1.0)),
                          max_tokens=int(pick(cfg.max_tokens, "max_tokens", 256)), n=n, stop=s.get("stop"),
                          logprobs=False)


@dataclass
class Cand:
    text: str
    num_tokens: int
    origin: str  # pool | revision | extra
    round: int
    total: int
    bits: list[int]
    answer: Any = field(default=None, repr=False)


def _cand(text: str, n_tok: int, origin: str, rnd: int, view: SelectorView, known: dict[str, Verdict]) -> Cand:
    """A candidate of ``view``'s unit; ``known`` (text -> score, per problem) scores a repeated text once."""
    ts = known.get(text)
    if ts is None:
        ts = known[text] = score(text, view.problem)
    return Cand(text, int(n_tok), origin, rnd, ts.total, list(ts.bits), ts.answer)


def _feedback(c: Cand, view: SelectorView, known: dict[str, Verdict]) -> str:
    """Feedback on ``c`` from a score that holds the parse feedback reads (slots, g_ver): a stored
    score has none, so that text is scored once more (and kept for the problem's other units)."""
    ts = known.get(c.text)
    if ts is None or ts.slots is None:
        ts = known[c.text] = score(c.text, view.problem)
    return feedback_for(c.text, view.problem, ts)


def calver_pick(cands: Sequence[Cand]) -> int:
    """CALVER's deployed rule (:func:`calver.verifier.select_from_scores`): among the candidates
    with the maximum score, the earliest whose ANSWER parsed, else the earliest."""
    return select_from_scores([c.total for c in cands], parsed=[c.answer is not None for c in cands])


def current_best(cands: Sequence[Cand]) -> int:
    """The candidate to revise: the highest score, ties -> the latest (the policy sees its newest attempt)."""
    best = max(c.total for c in cands)
    return max(i for i, c in enumerate(cands) if c.total == best)


def revision_messages(view: SelectorView, trace: str, feedback: str) -> list[dict[str, str]]:
    """Original prompt + the candidate as the assistant turn + the verifier feedback as a user turn."""
    return prompt_messages(view.problem) + [{"role": "assistant", "content": trace},
                                            {"role": "user", "content": feedback}]


# ---- refinement ---------------------------------------------------------------------------------
def refine_units(views: Sequence[SelectorView], pool_rows: dict, sampler, cfg: RefineConfig,
                 scfg_of) -> list[dict[str, Any]]:
    """Run the revision rounds; one state dict per unit (candidates, rounds log, stop reason). Round 0
    is scored through the views (:func:`~calver.infer.selectors.candidate_scores`: primed from the
    score table by :func:`refine_pool`)."""
    states = []
    by_problem: dict[str, dict[str, Verdict]] = {}  # text -> score, shared by a problem's units
    for v in views:
        known = by_problem.setdefault(v.problem_id, {})
        for t, ts in zip(v.texts, candidate_scores(v)):
            if t not in known or known[t].slots is None:
                known[t] = ts
        cands = [_cand(t, r.get("num_tokens", 0), "pool", 0, v, known) for t, r in zip(v.texts, pool_rows[v.unit])]
        states.append({"view": v, "cands": cands, "rounds": [], "prompt_tokens": 0, "known": known,
                       "stop": "pool_max" if max(c.total for c in cands) == MAX_SCORE else None})
    for rnd in range(1, cfg.rounds + 1):
        active = [s for s in states if s["stop"] is None]
        if not active:
            break
        prompts, seeds = [], []
        for s in active:
            v, cands = s["view"], s["cands"]
            i = current_best(cands)
            fb = _feedback(cands[i], v, s["known"])
            msgs = revision_messages(v, cands[i].text, fb)
            s["rounds"].append({"round": rnd, "revised": i, "revised_score": cands[i].total, "feedback": fb})
            prompts.append(msgs)
            seeds.append(derived_seed("refine", cfg.seed, v.problem_id, v.seed, rnd))
        res = sampler.generate(prompts, scfg_of(cfg.revisions), seeds=seeds, progress=False)
        for s, msgs, comps in zip(active, prompts, res):
            v = s["view"]
            s["prompt_tokens"] += _prompt_len(sampler, msgs) * len(comps)
            new = [_cand(c.text, c.num_tokens, "revision", rnd, v, s["known"]) for c in comps]
            s["cands"] += new
            s["rounds"][-1]["scores"] = [c.total for c in new]
            s["rounds"][-1]["tokens"] = sum(c.num_tokens for c in new)
            if max(c.total for c in new) == MAX_SCORE:
                s["stop"] = "max_score"
    for s in states:
        s["stop"] = s["stop"] or ("rounds" if cfg.rounds else "no_rounds")
    return states


def _prompt_len(sampler, msgs) -> int:
    try:
        return len(sampler.encode(msgs))
    except Exception:  # noqa: BLE001 - a sampler without a tokenizer: prompt tokens unknown
        return 0


def matched_best_of_k(states: list[dict[str, Any]], sampler, cfg: RefineConfig, scfg_of) -> None:
    """Per unit, extra candidates from the original prompt until their sampled tokens reach the
    tokens refinement spent on revisions there; stored as ``s["extra"]``."""
    for s in states:
        s["budget"] = sum(c.num_tokens for c in s["cands"] if c.origin == "revision")
        s["extra"] = []
    call = 0
    while True:
        todo = [s for s in states if sum(c.num_tokens for c in s["extra"]) < s["budget"]]
        if not todo:
            return
        call += 1
        groups: dict[int, list[dict[str, Any]]] = {}
        for s in todo:
            need = s["budget"] - sum(c.num_tokens for c in s["extra"])
            pool_toks = [c.num_tokens for c in s["cands"] if c.origin == "pool"] or [1]
            avg = max(1.0, sum(pool_toks) / len(pool_toks))
            groups.setdefault(min(cfg.baseline_batch, max(1, math.ceil(need / avg))), []).append(s)
        for n, group in sorted(groups.items()):
            prompts = [prompt_messages(s["view"].problem) for s in group]
            seeds = [derived_seed("bestofk", cfg.seed, s["view"].problem_id, s["view"].seed, call) for s in group]
            res = sampler.generate(prompts, scfg_of(n), seeds=seeds, progress=False)
            for s, comps in zip(group, res):
                for c in comps:
                    if sum(x.num_tokens for x in s["extra"]) >= s["budget"]:
                        break  # the prefix that first reaches the budget
                    s["extra"].append(_cand(c.text, c.num_tokens, "extra", call, s["view"], s["known"]))
                if not comps or all(c.num_tokens == 0 for c in comps):
                    s["budget"] = 0  # a sampler that writes nothing cannot reach the budget


# ---- the run ------------------------------------------------------------------------------------
def refine_pool(pool: Pool | str, sampler, cfg: RefineConfig | None = None, log=lambda m: None, *,
                table: ScoreTable | None = None) -> list[dict[str, Any]]:
    """Revision rounds on every unit of ``pool`` (its ``cfg.k``-prefix) and, when ``cfg.baseline``,
    the token-matched best-of-K' candidates; one state dict per unit (see :func:`arm_candidates`).
    Round 0's scores: ``table`` (default: the pool's score table, stored when missing)."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    cfg = cfg or RefineConfig()
    views = (table if table is not None else score_table(pool, log=log)).with_verdicts(make_views(pool, cfg.k))
    rows = {(u.problem_id, u.seed): u.rows for u in pool.units(cfg.k)}
    scfg_of = lambda n: sampling_config(pool, cfg, n)  # noqa: E731
    states = refine_units(views, rows, sampler, cfg, scfg_of)
    log(f"refine: {sum(len(s['rounds']) for s in states)} revision prompt(s) over {len(states)} unit(s)")
    if cfg.baseline:
        matched_best_of_k(states, sampler, cfg, scfg_of)
        log(f"best-of-K': {sum(len(s['extra']) for s in states)} extra candidate(s)")
    return states


def arm_candidates(state: dict[str, Any], baseline: bool = True) -> dict[str, list[Cand]]:
    """The candidates CALVER selects among in each arm: the pool alone (``calver@K``), pool +
    revisions (``refine``), pool + token-matched extra samples (``best_of_K'``)."""
    pool_c = [c for c in state["cands"] if c.origin == "pool"]
    arms = {"calver@K": pool_c, "refine": state["cands"]}
    if baseline:
        arms["best_of_K'"] = pool_c + state["extra"]
    return arms


__all__ = ["MAX_SCORE", "Cand", "RefineConfig", "arm_candidates", "calver_pick", "current_best", "derived_seed",
           "load_refine_config", "matched_best_of_k", "refine_pool", "refine_units", "revision_messages",
           "sampling_config"]
