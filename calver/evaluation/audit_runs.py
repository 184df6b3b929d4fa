"""Pool-level audit runs: renaming / answer-swap / witness-damage summaries, the graph-corruption
ladder (CALVER's lift over plurality at each rung), and the strict-ATE guard audit.

Baselines come from the units' scores (:attr:`UnitFacts.scores`); only perturbed (text, problem)
pairs are scored, each once (a perturbed text that is a candidate of the same problem, or a rung
whose corrupted graph equals the clean one, reuses the candidate's score)."""

from __future__ import annotations

import dataclasses
import zlib
from collections import Counter
from typing import Any, Sequence

import numpy as np

from calver.evaluation.audits import LADDER, corrupt_graph, damage_witness, invalid_answer, rename_nodes, replace_slot
from calver.evaluation.bootstrap import DECOMPOSITION_DRAWS, paired_diff_ci
from calver.evaluation.metrics import calver_index, plurality_index, selected_correct, unit_parsed
from calver.evaluation.units import UnitFacts
from calver.verifier import Problem, ProblemError, Verdict, get_family, prepare, score
from calver.verifier.contract import slot_spans


def known_scores(units: Sequence[UnitFacts]) -> dict[str, dict[str, Verdict]]:
    """problem id -> {candidate text: its score} over the units that carry scores."""
    out: dict[str, dict[str, Verdict]] = {}
    for u in units:
        if len(u.scores) == len(u.texts):
            out.setdefault(u.problem_id, {}).update(zip(u.texts, u.scores))
    return out


def audit_score(u: UnitFacts, i: int) -> Verdict:
    """Candidate ``i``'s score with what the swap audit reads (answer, ``g_ver``): the unit's own when
    computed in this process; a stored one (no parse) of a grounded candidate with ``g_ver`` set to
    the problem's source, exactly what :func:`~calver.verifier.score` judges it on; else scored now."""
    ts = u.scores[i] if i < len(u.scores) else None
    if ts is not None and ts.slots is not None:
        return ts
    if ts is not None and ts.grounded:
        try:
            pp = prepare(u.problem)
        except (KeyError, ProblemError):
            pass
        else:
            return dataclasses.replace(ts, g_ver=pp.family.verification_graph(pp.problem, None, False, pp.source))
    return score(u.texts[i], u.problem)


def _swap(u: UnitFacts, i: int, rng) -> str | None:
    """:func:`calver.evaluation.audits.swap_answer` of candidate ``i``, on its own score."""
    text, p = u.texts[i], u.problem
    if "ANSWER" not in slot_spans(text):
        return None
    obj = invalid_answer(text, p, rng, sc=audit_score(u, i))
    return None if obj is None else replace_slot(text, "ANSWER", get_family(p.task).format_object(obj))


def _iter_candidates(units: Sequence[UnitFacts], limit: int | None):
    n = 0
    for u in units:
        for i, text in enumerate(u.texts):
            if limit is not None and n >= limit:
                return
            n += 1
            yield u, i, text


def audit_summary(units: Sequence[UnitFacts], *, limit: int | None = None, seed: int = 0) -> dict[str, Any]:
    """Run the three trace perturbations over the pool's candidates (the first ``limit`` of them).

    rename: over all candidates, how many keep all six bits; swap / damage: the score distribution
    after the perturbation among max-score candidates, plus the fraction lowered over all
    candidates where the perturbation applies.
    """
    rng = np.random.default_rng(seed)
    errors: list[str] = []
    ren = {"n": 0, "unchanged": 0, "changed_examples": []}
    out: dict[str, dict[str, Any]] = {
        name: {"n_max_score": 0, "applied_max_score": 0, "distribution": Counter(), "applied_all": 0, "lowered_all": 0}
        for name in ("swap", "damage")
    }
    known = known_scores(units)
    for u, i, text in _iter_candidates(units, limit):
        p = u.problem
        if p is None:
            continue
        same_problem = known.get(u.problem_id, {})
        before = int(u.totals[i])
        ren["n"] += 1
        try:
            t2, p2 = rename_nodes(text, p, rng=rng)
            same = list(score(t2, p2).bits) == [int(b) for b in u.bits[i]]
        except Exception as e:  # noqa: BLE001 - a renamed problem the verifier rejects counts as changed
            same = False
            errors.append(f"rename {u.problem_id}/{u.seed}/{i}: {type(e).__name__}: {e}")
        if same:
            ren["unchanged"] += 1
        elif len(ren["changed_examples"]) < 5:
            ren["changed_examples"].append({"problem_id": u.problem_id, "seed": u.seed, "index": i})
        for name, fn in (("swap", lambda: _swap(u, i, rng)),
                         ("damage", lambda: damage_witness(text, p, audit_score(u, i)))):
            rec = out[name]
            is_max = before == 6
            rec["n_max_score"] += is_max
            try:
                new = fn()
                hit = None if new is None else same_problem.get(new)
                after = None if new is None else (hit if hit is not None else score(new, p)).total
            except Exception as e:  # noqa: BLE001 - recorded; the perturbation is counted as not applied
                errors.append(f"{name} {u.problem_id}/{u.seed}/{i}: {type(e).__name__}: {e}")
                after = None
            if after is None:
                continue
            rec["applied_all"] += 1
            rec["lowered_all"] += after < before
            if is_max:
                rec["applied_max_score"] += 1
                rec["distribution"][after] += 1
    for rec in out.values():
        rec["distribution"] = {int(k): int(v) for k, v in sorted(rec["distribution"].items())}
        rec["lost_max"] = sum(v for k, v in rec["distribution"].items() if k < 6)
        rec["lowered_all_frac"] = rec["lowered_all"] / rec["applied_all"] if rec["applied_all"] else float("nan")
    ren["unchanged_frac"] = ren["unchanged"] / ren["n"] if ren["n"] else float("nan")
    return {"rename": ren, **out, "limit": limit, "seed": seed, "n_errors": len(errors), "errors": errors[:10]}


def graph_ladder(units: Sequence[UnitFacts], rungs: Sequence[str] = LADDER, *, frac: float = 0.1, seed: int = 0,
                 draws: int = DECOMPOSITION_DRAWS) -> dict[str, Any]:
    """CALVER re-scored on a corrupted checker graph (supplied-graph units only; candidates and
    answers frozen, grading on the source graph), and its lift over exact plurality per rung."""
    units = [u for u in units if u.problem is not None and u.problem.mode == "supplied" and u.problem.graph is not None]
    if not units:
        return {"rungs": [], "n_units": 0, "note": "no supplied-graph units"}
    corrupted: dict[tuple[str, str], Problem] = {}
    skipped: set[str] = set()
    for r, rung in enumerate(rungs):
        for u in units:
            if rung == "clean" or (u.problem_id, rung) in corrupted or u.problem_id in skipped:
                continue
            rng = np.random.default_rng([seed, r, zlib.crc32(u.problem_id.encode())])
            p2 = dataclasses.replace(u.problem, graph=corrupt_graph(u.problem.graph, rung, frac, rng))
            try:  # e.g. ATE: CPTs no longer match a corrupted graph -> the problem is malformed
                get_family(p2.task).normalize_query(p2)
            except (ProblemError, ValueError):
                skipped.add(u.problem_id)
            corrupted[(u.problem_id, rung)] = p2
    units = [u for u in units if u.problem_id not in skipped]
    if not units:
        return {"rungs": [], "n_units": 0, "n_skipped_problems": len(skipped), "note": "no unit survives corruption"}
    clusters = [u.source_id for u in units]
    plur = selected_correct(units, [plurality_index(u.answer_keys) for u in units])
    rows = []
    clean_lift = None
    memo: dict[tuple[int, str], Verdict] = {}  # (id of the corrupted problem, text) -> score
    for rung in rungs:
        idx = []
        for u in units:
            p2 = None if rung == "clean" else corrupted[(u.problem_id, rung)]
            if p2 is None or _same_graph(p2.graph, u.problem.graph):  # nothing corrupted: the unit's scores
                idx.append(calver_index(u.totals, parsed=unit_parsed(u)))
                continue
            sc = [memo[(id(p2), t)] if (id(p2), t) in memo else memo.setdefault((id(p2), t), score(t, p2))
                  for t in u.texts]
            idx.append(calver_index([s.total for s in sc], parsed=[s.answer is not None for s in sc]))
        cal = selected_correct(units, idx)
        ci = paired_diff_ci(cal, plur, clusters, draws=draws, seed=seed)
        lift = ci["mean_diff"]
        if rung == "clean":
            clean_lift = lift
        rows.append({"rung": rung, "calver": float(cal.mean()), "plurality": float(plur.mean()), "lift": ci,
                     "retained": (lift / clean_lift) if clean_lift else float("nan")})
    return {"rungs": rows, "frac": frac, "n_units": len(units), "n_skipped_problems": len(skipped), "seed": seed}


def _same_graph(a, b) -> bool:
    return (a.kind == b.kind and set(a.nodes) == set(b.nodes) and set(a.directed) == set(b.directed)
            and set(a.bidirected) == set(b.bidirected))


# ---- strict ATE ------------------------------------------------------------------------------------------

GUARD_PATTERNS = (  # reason prefixes of calver.verifier.ate_certificate.strict_certificate -> guard
    ("X in Z", "treatment_exclusion"),
    ("Y in Z", "treatment_exclusion"),
    ("descendant of X in Z", "treatment_exclusion"),
    ("backdoor path open", "backdoor_separation"),
    ("inside margin", "decision_margin"),
)


def guard_of(reason: str) -> str | None:
    """The strict guard a certificate reason names (None for bookkeeping lines such as 'ψ not computed')."""
    for prefix, guard in GUARD_PATTERNS:
        if reason.startswith(prefix):
            return guard
    if reason.startswith("ψ not computed: Z violates"):
        return None
    return "other"


def is_ate_task(task: str) -> bool:
    return task == "ate_threshold" or task.lower().startswith("ate")


def strict_ate_audit(units: Sequence[UnitFacts], max_examples: int = 20) -> dict[str, Any]:
    """Among max-score ATE traces: how many are wrong, and which strict guard each violates.

    Guards come from ``calver.verifier.ate_certificate.strict_certificate`` (treatment exclusion, backdoor
    separation in G with X's outgoing edges removed, decision margin |ψ − τ| > ε), evaluated on the
    full problem (graph and CPTs) after selection. ``certified_wrong`` must be 0 (Theorem 1).
    """
    res: dict[str, Any] = {"n_units": 0, "n_max_score": 0, "n_correct": 0, "n_wrong": 0, "guards": Counter(),
                           "wrong_by_guard_set": Counter(), "unexplained": 0, "certified": 0, "certified_wrong": 0,
                           "examples": []}
    units = [u for u in units if u.problem is not None and is_ate_task(u.problem.task)]
    if not units:
        res.update(guards={}, wrong_by_guard_set={})
        return res
    from calver.verifier.ate_certificate import strict_certificate

    for u in units:
        res["n_units"] += 1
        gp = u.grading_problem or u.problem
        for i in np.flatnonzero(u.totals == 6):
            res["n_max_score"] += 1
            wrong = not bool(u.correct[i])
            try:
                certified, reasons = strict_certificate(gp, u.texts[i])
            except Exception as e:  # noqa: BLE001 - an uncheckable trace is uncertified, with the reason
                certified, reasons = False, [f"certificate failed: {type(e).__name__}: {e}"]
            guards = sorted({g for g in map(guard_of, reasons) if g})
            res["certified"] += bool(certified)
            res["certified_wrong"] += bool(certified and wrong)
            res["n_correct"] += not wrong
            if wrong:
                res["n_wrong"] += 1
                res["guards"].update(guards)
                res["wrong_by_guard_set"]["+".join(guards) or "none"] += 1
                res["unexplained"] += not guards
                if len(res["examples"]) < max_examples:
                    res["examples"].append({"problem_id": u.problem_id, "seed": u.seed, "index": int(i),
                                            "guards": guards, "reasons": reasons})
    res["guards"] = dict(res["guards"])
    res["wrong_by_guard_set"] = dict(res["wrong_by_guard_set"])
    return res
