"""Verifier-guided refinement vs token-matched best-of-K (``calver refine``).

Round 0 is a pool's K candidates. For every unit without a max-score candidate, the current best
candidate (highest six-bit score; ties -> the latest) goes back to the policy as an assistant turn,
followed by a user turn holding :func:`~calver.infer.refine.feedback.feedback_for` of it, and the
policy (through the shared sampler) writes a revision. Rounds stop at the maximum score or after
``rounds``. The refined answer is CALVER over pool + revisions.

Baseline, same problems and the same sampled-token budget: for each unit, fresh candidates are
sampled from the original prompt until their tokens reach what refinement spent on that unit
(best-of-K', K' >= K), then CALVER selects. Sampled tokens are completion tokens (``num_tokens``);
prompt tokens of the revision prompts are reported beside them.

Scoring and feedback read only the firewall views (label-free problems); correctness is attached
afterwards from the pool's labels.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from calver.infer.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.infer.evaluation.report import ci_text, jsonable, pct
from calver.infer.evaluation.table import grading_problem, is_correct
from calver.infer.firewall import SelectorView, make_views
from calver.infer.pool import Pool
from calver.infer.refine.feedback import feedback_for
from calver.infer.sample import prompt_messages
from calver.verifier import SLOTS, score, select_from_scores

MAX_SCORE = len(SLOTS)


@dataclass
class RefineConfig:
    rounds: int = 2  # T: revision rounds at most
    revisions: int = 1  # samples per revision round
    k: int | None = None  # K-prefix of the pool used as round 0 (None: the whole pool)
    temperature: float | None = None  # None: the pool's sampling settings
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int = 0
    baseline: bool = True  # also run the token-matched best-of-K'
    baseline_batch: int = 8  # most extra candidates drawn per unit and call
    draws: int = 2000  # bootstrap draws

    def __post_init__(self) -> None:
        if self.rounds < 0 or self.revisions < 1 or self.baseline_batch < 1:
            raise ValueError("rounds must be >= 0, revisions and baseline_batch >= 1")


def load_refine_config(path: str | Path | None, **overrides: Any) -> RefineConfig:
    """A :class:`RefineConfig` from YAML (unknown keys are errors), then non-None ``overrides``."""
    d: dict[str, Any] = {}
    if path:
        import yaml

        d = dict(yaml.safe_load(Path(path).read_text()) or {})
    d.update({k: v for k, v in overrides.items() if v is not None})
    known = set(RefineConfig.__dataclass_fields__)
    bad = sorted(set(d) - known)
    if bad:
        raise ValueError(f"unknown refine config field(s): {', '.join(bad)} (known: {', '.join(sorted(known))})")
    return RefineConfig(**d)


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
    return SamplingConfig(temperature=float(pick(cfg.temperature, "temperature", 0.8)), top_p=float(pick(cfg.top_p, "top_p", 1.0)),
                          max_tokens=int(pick(cfg.max_tokens, "max_tokens", 256)), n=n, stop=s.get("stop"), logprobs=False)


@dataclass
class Cand:
    text: str
    num_tokens: int
    origin: str  # pool | revision | extra
    round: int
    total: int
    bits: list[int]
    answer: Any = field(default=None, repr=False)


def _cand(text: str, n_tok: int, origin: str, rnd: int, view: SelectorView) -> Cand:
    ts = score(text, view.problem)
    return Cand(text, int(n_tok), origin, rnd, ts.total, list(ts.bits), ts.answer)


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
    return prompt_messages(view.problem) + [{"role": "assistant", "content": trace}, {"role": "user", "content": feedback}]


# ---- refinement ---------------------------------------------------------------------------------
def refine_units(views: Sequence[SelectorView], pool_rows: dict, sampler, cfg: RefineConfig, scfg_of) -> list[dict[str, Any]]:
    """Run the revision rounds; one state dict per unit (candidates, rounds log, stop reason)."""
    states = []
    for v in views:
        cands = [_cand(t, r.get("num_tokens", 0), "pool", 0, v) for t, r in zip(v.texts, pool_rows[v.unit])]
        states.append({"view": v, "cands": cands, "rounds": [], "prompt_tokens": 0,
                       "stop": "pool_max" if max(c.total for c in cands) == MAX_SCORE else None})
    for rnd in range(1, cfg.rounds + 1):
        active = [s for s in states if s["stop"] is None]
        if not active:
            break
        prompts, seeds = [], []
        for s in active:
            v, cands = s["view"], s["cands"]
            i = current_best(cands)
            fb = feedback_for(cands[i].text, v.problem)
            msgs = revision_messages(v, cands[i].text, fb)
            s["rounds"].append({"round": rnd, "revised": i, "revised_score": cands[i].total, "feedback": fb})
            prompts.append(msgs)
            seeds.append(derived_seed("refine", cfg.seed, v.problem_id, v.seed, rnd))
        res = sampler.generate(prompts, scfg_of(cfg.revisions), seeds=seeds, progress=False)
        for s, msgs, comps in zip(active, prompts, res):
            v = s["view"]
            s["prompt_tokens"] += _prompt_len(sampler, msgs) * len(comps)
            new = [_cand(c.text, c.num_tokens, "revision", rnd, v) for c in comps]
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
                    s["extra"].append(_cand(c.text, c.num_tokens, "extra", call, s["view"]))
                if not comps or all(c.num_tokens == 0 for c in comps):
                    s["budget"] = 0  # a sampler that writes nothing cannot reach the budget


# ---- the run ------------------------------------------------------------------------------------
def run_refine(pool: Pool | str, sampler, cfg: RefineConfig | None = None, out: str | Path | None = None,
               log=lambda m: None) -> dict[str, Any]:
    """Refine every unit of ``pool`` and compare with token-matched best-of-K'; write
    ``refine.json``, ``refine_units.jsonl`` and ``refine.md`` under ``out`` when given."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    cfg = cfg or RefineConfig()
    views = make_views(pool, cfg.k)
    rows = {(u.problem_id, u.seed): u.rows for u in pool.units(cfg.k)}
    scfg_of = lambda n: sampling_config(pool, cfg, n)  # noqa: E731
    states = refine_units(views, rows, sampler, cfg, scfg_of)
    log(f"refine: {sum(len(s['rounds']) for s in states)} revision prompt(s) over {len(states)} unit(s)")
    if cfg.baseline:
        matched_best_of_k(states, sampler, cfg, scfg_of)
        log(f"best-of-K': {sum(len(s['extra']) for s in states)} extra candidate(s)")
    problems, labels = pool.problems(), pool.labels()
    units = []
    for s in states:
        v = s["view"]
        gp = grading_problem(problems[v.problem_id], labels.get(v.problem_id))
        pool_c = [c for c in s["cands"] if c.origin == "pool"]
        arms = {"calver@K": pool_c, "refine": s["cands"]}
        if cfg.baseline:
            arms["best_of_K'"] = pool_c + s["extra"]
        rec: dict[str, Any] = {"problem_id": v.problem_id, "seed": v.seed, "source_id": problems[v.problem_id].source_id,
                               "stop": s["stop"], "rounds": s["rounds"], "prompt_tokens": s["prompt_tokens"]}
        for name, cands in arms.items():
            i = calver_pick(cands)
            rec[name] = {"index": i, "score": cands[i].total, "correct": is_correct(gp, cands[i].answer),
                         "tokens": sum(c.num_tokens for c in cands), "candidates": len(cands),
                         "max_score": cands[i].total == MAX_SCORE}
        rec["texts"] = {"revisions": [c.text for c in s["cands"] if c.origin == "revision"]}
        units.append(rec)
    result = {"config": asdict(cfg), "pool": str(pool.root), "summary": summarize(units, cfg), "units": units}
    if out is not None:
        write_outputs(result, Path(out))
    return result


def summarize(units: list[dict[str, Any]], cfg: RefineConfig) -> dict[str, Any]:
    arms = [a for a in ("calver@K", "refine", "best_of_K'") if units and a in units[0]]
    clusters = [u["source_id"] for u in units]
    out: dict[str, Any] = {"units": len(units), "arms": {}, "stops": {}}
    for u in units:
        out["stops"][u["stop"]] = out["stops"].get(u["stop"], 0) + 1
    out["revision_rounds"] = sum(len(u["rounds"]) for u in units)
    out["revision_prompt_tokens"] = sum(u["prompt_tokens"] for u in units)
    for a in arms:
        acc = [float(u[a]["correct"]) for u in units]
        mx = [float(u[a]["max_score"]) for u in units]
        out["arms"][a] = {
            "accuracy": mean_ci(acc, clusters, draws=cfg.draws, seed=cfg.seed) if units else None,
            "max_score_rate": sum(mx) / len(mx) if mx else math.nan,
            "sampled_tokens": sum(u[a]["tokens"] for u in units),
            "mean_candidates": sum(u[a]["candidates"] for u in units) / len(units) if units else math.nan,
        }
    if "best_of_K'" in arms and units:
        out["refine_minus_best_of_K'"] = paired_diff_ci([float(u["refine"]["correct"]) for u in units],
                                                        [float(u["best_of_K'"]["correct"]) for u in units],
                                                        clusters, draws=cfg.draws, seed=cfg.seed)
    return out


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [f"# Verifier-guided refinement vs token-matched best-of-K' ({s['units']} units, T={result['config']['rounds']})", "",
             "| arm | accuracy % [95% CI] | max-score rate % | sampled tokens | mean candidates |", "|---|---|---|---|---|"]
    for a, r in s["arms"].items():
        lines.append(f"| {a} | {ci_text(r['accuracy'])} | {pct(r['max_score_rate'])} | {r['sampled_tokens']} | {r['mean_candidates']:.2f} |")
    if "refine_minus_best_of_K'" in s:
        lines += ["", f"Refine − best-of-K' (paired, clustered by source_id): {ci_text(s['refine_minus_best_of_K' + chr(39)], signed=True)} pp"]
    lines += ["", f"Stops: {', '.join(f'{k}={v}' for k, v in sorted(s['stops'].items()))}; revision prompts: "
              f"{s['revision_rounds']} ({s['revision_prompt_tokens']} prompt tokens, not counted as sampled)."]
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    slim = {k: v for k, v in result.items() if k != "units"}
    (out / "refine.json").write_text(json.dumps(jsonable(slim), indent=2, sort_keys=True))
    with open(out / "refine_units.jsonl", "w", encoding="utf-8") as fh:
        for u in result["units"]:
            fh.write(json.dumps(jsonable(u), sort_keys=True) + "\n")
    (out / "refine.md").write_text(markdown(result))


__all__ = ["RefineConfig", "calver_pick", "current_best", "derived_seed", "load_refine_config", "markdown",
           "matched_best_of_k", "refine_units", "revision_messages", "run_refine"]
