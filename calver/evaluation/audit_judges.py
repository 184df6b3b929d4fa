"""Judge / PRM audit by deterministic corruption (``calver audit-judges``).

From max-score (valid) traces, deterministic variants are made (pure string edits, no model):

* ``clean`` -- the trace itself (control);
* ``answer_swap`` -- ANSWER replaced by an object invalid on the verification graph
  (:func:`calver.evaluation.audits.swap_answer`);
* ``consistent_swap`` -- STRATEGY, ANSWER and the DERIVATION's object argument all replaced by the same
  invalid object, so the chain "supports" the wrong answer (decision families: ANSWER and a yes/no
  RESULT flipped together);
* ``strategy_only`` -- only STRATEGY replaced (the returned ANSWER stays valid);
* ``edge_deletion`` -- one edge deleted from the GRAPH slot (the first edge, in sorted order, whose
  deletion makes the returned answer invalid on the reduced graph; else the first edge);
* ``truncation`` -- the DERIVATION slot cut in the middle (RESULT and ANSWER kept).

Every variant is scored by the symbolic verifier (accept = score 6), optionally by a distilled PRM
(accept = score >= threshold; the PRM predicts the 0-6 verifier total) and an LLM judge through the
shared sampler (the ``judge`` selector's prompt; accept = score >= 0.5). Acceptance rates and deltas
vs the clean control get clustered (source_id) bootstrap intervals. The verifier's expected verdict
is known by construction (``expected_reject``), from the bit semantics of docs/trace-contract.md.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

from calver.evaluation.audits import invalid_answer, replace_slot, slot_spans
from calver.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.evaluation.grading import grading_problems, is_correct
from calver.evaluation.report import ci_text
from calver.evaluation.results import to_json
from calver.infer.firewall import SelectorView, strip_problem
from calver.infer.pool import Pool
from calver.verifier import CausalGraph, Problem, Verdict, get_family, score
from calver.verifier.contract import parse_call

VARIANTS = ("clean", "answer_swap", "consistent_swap", "strategy_only", "edge_deletion", "truncation")


# ---- helpers --------------------------------------------------------------------------------------
def invalid_object(trace: str, problem: Problem, seed: int = 0, sc: Verdict | None = None) -> str | None:
    """Text of an object invalid on the verification graph, different from the trace's ANSWER: the
    one :func:`swap_answer` puts in (the family's seeded :meth:`invalid_objects` search)."""
    obj = invalid_answer(trace, problem, seed, sc)
    return None if obj is None else get_family(problem.task).format_object(obj)


def _replace_derivation_arg(trace: str, derivation: str | None, key: str, value: str) -> str | None:
    """``trace`` with argument ``key`` of its DERIVATION (whose text is ``derivation``) set to ``value``."""
    if derivation is None:
        return None
    try:
        op, args = parse_call(derivation)
    except ValueError:
        return None
    if key not in args:
        return None
    args[key] = value
    return replace_slot(trace, "DERIVATION", f"{op}(" + ", ".join(f"{k}={v}" for k, v in args.items()) + ")")


_FLIP = {"valid": "invalid", "invalid": "valid", "reachable": "unreachable", "unreachable": "reachable",
         "yes": "no", "no": "yes", "true": "false", "false": "true", "consistent": "inconsistent",
         "inconsistent": "consistent"}


# ---- the corruptions ---------------------------------------------------------------------------------
def consistent_swap(trace: str, problem: Problem, seed: int = 0, sc: Verdict | None = None) -> str | None:
    sc = sc if sc is not None else score(trace, problem)
    fam = get_family(problem.task)
    bad = invalid_object(trace, problem, seed, sc)
    if bad is None:
        return None
    out = replace_slot(trace, "ANSWER", bad)
    if fam.is_decision:  # the decision and its RESULT flipped together
        res = (sc.slots.get("RESULT") or "").strip().lower()
        if res not in _FLIP:
            return None
        return replace_slot(out, "RESULT", _FLIP[res])
    out = replace_slot(out, "STRATEGY", bad)
    if fam.object_arg:
        out = _replace_derivation_arg(out, sc.slots.get("DERIVATION"), fam.object_arg, bad) or out
    return out


def strategy_only(trace: str, problem: Problem, seed: int = 0, sc: Verdict | None = None) -> str | None:
    sc = sc if sc is not None else score(trace, problem)
    fam = get_family(problem.task)
    if fam.is_decision:  # STRATEGY is evidence (a witness, an adjustment set), not the answer
        cur = (sc.slots.get("STRATEGY") or "").strip()
        nodes = sorted(sc.g_ver.nodes) if isinstance(sc.g_ver, CausalGraph) else []
        options = ["none", "{}"] + ["{" + n + "}" for n in nodes]
        try:
            cur_key = repr(fam.parse_object(cur))
        except (ValueError, TypeError, RecursionError):  # GraphError is a ValueError
            cur_key = cur
        for o in options:
            try:
                key = repr(fam.parse_object(o))
            except (ValueError, TypeError, RecursionError):
                continue
            if key != cur_key:
                return replace_slot(trace, "STRATEGY", o)
        return None
    bad = invalid_object(trace, problem, seed, sc)
    return None if bad is None else replace_slot(trace, "STRATEGY", bad)


def edge_deletion(trace: str, problem: Problem, sc: Verdict | None = None) -> tuple[str, bool] | None:
    """(variant, whether the deletion makes the returned answer invalid on the reduced graph)."""
    sc = sc if sc is not None else score(trace, problem)
    fam = get_family(problem.task)
    g = sc.trace_graph
    if fam.graph_label != "GRAPH" or "GRAPH" not in slot_spans(trace) or not isinstance(g, CausalGraph):
        return None
    edges = [("d", e) for e in sorted(g.directed)] + [("b", e) for e in sorted(g.bidirected)]
    if not edges:
        return None
    query = fam.normalize_query(problem)

    def reduced(e):
        kind, (a, b) = e
        return g.with_edges(remove_directed=[(a, b)] if kind == "d" else (),
                            remove_bidirected=[(a, b)] if kind == "b" else ())

    chosen, flips = edges[0], False
    if sc.answer is not None:
        for e in edges:
            try:
                if not fam.is_valid_on(reduced(e), query, sc.answer, problem):
                    chosen, flips = e, True
                    break
            except (ValueError, TypeError, KeyError, RecursionError):  # incl. GraphError, TooLargeToGrade
                continue
    return replace_slot(trace, "GRAPH", reduced(chosen).to_text()), flips


def truncation(trace: str, problem: Problem, sc: Verdict | None = None) -> str | None:
    d = (sc if sc is not None else score(trace, problem)).slots.get("DERIVATION")
    if not d or len(d) < 4:
        return None
    return replace_slot(trace, "DERIVATION", d[: len(d) // 2].rstrip())


def make_variants(trace: str, problem: Problem, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Variant name -> {"text", "expected_reject"} for one max-score trace (``problem`` label-free).

    ``expected_reject`` is the verifier's verdict known by construction: True where a bit provably
    fails, None where the corruption can be neutral (an edge deletion in constructed mode that keeps
    the returned answer valid on the reduced graph)."""
    sc = score(trace, problem)  # every corruption reads this one parse (slots, graphs, answer)
    out: dict[str, dict[str, Any]] = {"clean": {"text": trace, "expected_reject": False}}
    for name, fn in (("answer_swap", swap_or_none), ("consistent_swap", consistent_swap),
                     ("strategy_only", strategy_only)):
        t = fn(trace, problem, seed, sc)
        if t is not None and t != trace:
            out[name] = {"text": t, "expected_reject": True}
    ed = edge_deletion(trace, problem, sc)
    if ed is not None:
        out["edge_deletion"] = {"text": ed[0],
                                "expected_reject": True if (problem.mode == "supplied" or ed[1]) else None}
    t = truncation(trace, problem, sc)
    if t is not None:
        out["truncation"] = {"text": t, "expected_reject": True}
    return out


def swap_or_none(trace: str, problem: Problem, seed: int = 0, sc: Verdict | None = None) -> str | None:
    bad = invalid_object(trace, problem, seed, sc)
    return None if bad is None else replace_slot(trace, "ANSWER", bad)


# ---- sources ---------------------------------------------------------------------------------------------
def source_traces(pool: Pool, sources: Sequence[str] = ("pool", "canonical"),
                  k: int | None = None) -> list[dict[str, Any]]:
    """Max-score, correct traces: the pool's (first per unit) and/or each problem's canonical trace."""
    problems, graded = pool.problems(), grading_problems(pool)
    stripped = {pid: strip_problem(p) for pid, p in problems.items()}
    out = []
    if "pool" in sources:
        for u in pool.units(k):
            sp, gp = stripped[u.problem_id], graded[u.problem_id]
            for i, t in enumerate(u.texts):
                ts = score(t, sp)
                if ts.max_score and is_correct(gp, ts.answer):
                    out.append({"problem_id": u.problem_id, "source_id": u.source_id,
                                "origin": f"pool:{u.seed}:{i}", "text": t})
                    break
    if "canonical" in sources:
        for pid, p in problems.items():
            t = canonical_for(graded[pid])
            if t is not None and score(t, stripped[pid]).max_score:
                out.append({"problem_id": pid, "source_id": p.source_id, "origin": "canonical", "text": t})
    return out


def canonical_for(problem: Problem) -> str | None:
    try:
        from calver.data_gen.generators import canonical_trace

        return canonical_trace(problem)
    except Exception:  # noqa: BLE001 - no validity class in meta: the family's default valid object
        pass
    try:
        return get_family(problem.task).canonical_trace(problem)
    except Exception:  # noqa: BLE001 - no valid answer (or none the family can write)
        return None


# ---- scorers ---------------------------------------------------------------------------------------------
def _views(items, problems):
    return [SelectorView(problem_id=it["problem_id"], seed=0, problem=problems[it["problem_id"]], texts=(),
                         candidate_index=())
            for it in items]


def score_items(items: list[dict[str, Any]], problems: dict[str, Problem], *, prm=None, prm_threshold: float = 5.5,
                judge_sampler=None, judge_threshold: float = 0.5, judge_max_tokens: int = 16) -> list[str]:
    """Adds ``scores``/``accept`` per scorer to every item; returns the scorer names used."""
    names = ["verifier"]
    for it in items:
        ts = score(it["text"], problems[it["problem_id"]])
        it["scores"] = {"verifier": float(ts.total)}
        it["bits"] = list(ts.bits)
        it["accept"] = {"verifier": ts.max_score}
    pairs = [(i, it["text"]) for i, it in enumerate(items)]
    if prm is not None:
        from calver.infer.selectors import PRMSelector

        vals = PRMSelector(scorer=prm).score_pairs(_views(items, problems), pairs)
        for it, s in zip(items, vals):
            it["scores"]["prm"] = float(s)
            it["accept"]["prm"] = bool(math.isfinite(s) and s >= prm_threshold)
        names.append("prm")
    if judge_sampler is not None:
        from calver.infer.selectors import JudgeSelector

        vals = JudgeSelector(sampler=judge_sampler, max_tokens=judge_max_tokens).score_pairs(
            _views(items, problems), pairs)
        for it, s in zip(items, vals):
            it["scores"]["judge"] = float(s)
            it["accept"]["judge"] = bool(not math.isnan(s) and s >= judge_threshold)
        names.append("judge")
    return names


# ---- the run -----------------------------------------------------------------------------------------------
def run_audit(pool: Pool | str, *, prm=None, prm_threshold: float = 5.5, judge_sampler=None,
              judge_threshold: float = 0.5, judge_max_tokens: int = 16, sources: Sequence[str] = ("pool", "canonical"),
              max_sources: int | None = None, seed: int = 0, draws: int = 2000, out: str | Path | None = None,
              log=lambda m: None) -> dict[str, Any]:
    """Corrupt every source trace, score all variants, write ``audit_judges.{json,md}`` and
    ``audit_items.jsonl`` under ``out``. ``max_sources`` keeps the first N source traces."""
    pool = pool if isinstance(pool, Pool) else Pool(pool)
    problems = {pid: strip_problem(p) for pid, p in pool.problems().items()}
    srcs = source_traces(pool, sources)[:max_sources]
    items = []
    for j, s in enumerate(srcs):
        for name, v in make_variants(s["text"], problems[s["problem_id"]], seed).items():
            items.append({**s, "trace_id": j, "variant": name, "text": v["text"],
                          "expected_reject": v["expected_reject"]})
    log(f"audit: {len(srcs)} source trace(s), {len(items)} variant(s)")
    scorers = score_items(items, problems, prm=prm, prm_threshold=prm_threshold, judge_sampler=judge_sampler,
                          judge_threshold=judge_threshold, judge_max_tokens=judge_max_tokens)
    table = acceptance_table(items, scorers, draws=draws, seed=seed)
    result = {"pool": str(pool.root), "sources": list(sources), "n_source_traces": len(srcs), "scorers": scorers,
              "thresholds": {"verifier": 6, "prm": prm_threshold, "judge": judge_threshold}, "table": table,
              "verifier_matches_expectation": verifier_matches(items)}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "audit_judges.json").write_text(json.dumps(to_json(result), indent=2, sort_keys=True))
        with open(out / "audit_items.jsonl", "w", encoding="utf-8") as fh:
            for it in items:
                fh.write(json.dumps(to_json(it), sort_keys=True) + "\n")
        (out / "audit_judges.md").write_text(markdown(result))
    result["items"] = items
    return result


def acceptance_table(items: list[dict[str, Any]], scorers: Sequence[str], *, draws: int = 2000,
                     seed: int = 0) -> list[dict[str, Any]]:
    """One row per (scorer, variant): acceptance rate and its delta vs clean (paired by source trace)."""
    clean = {it["trace_id"]: it for it in items if it["variant"] == "clean"}
    rows = []
    for sc in scorers:
        for var in VARIANTS:
            its = [it for it in items if it["variant"] == var and it["trace_id"] in clean]
            if not its:
                continue
            acc = [float(it["accept"][sc]) for it in its]
            cl = [float(clean[it["trace_id"]]["accept"][sc]) for it in its]
            clusters = [it["source_id"] for it in its]
            row = {"scorer": sc, "variant": var, "n": len(its),
                   "acceptance": mean_ci(acc, clusters, draws=draws, seed=seed),
                   "mean_score": sum(it["scores"][sc] for it in its) / len(its)}
            if var != "clean":
                row["delta_vs_clean"] = paired_diff_ci(acc, cl, clusters, draws=draws, seed=seed)
            if sc == "verifier":
                exp = [it["expected_reject"] for it in its if it["expected_reject"] is not None]
                row["expected_acceptance"] = sum(1 for e in exp if e is False) / len(exp) if exp else None
                row["undetermined"] = len(its) - len(exp)
                row["determined_acceptance"] = (sum(it["accept"]["verifier"] for it in its
                                                    if it["expected_reject"] is not None)
                                                / len(exp)) if exp else None
            rows.append(row)
    return rows


def verifier_matches(items: list[dict[str, Any]]) -> bool:
    """The verifier rejects every variant expected rejected and accepts every clean control."""
    return all(it["accept"]["verifier"] != bool(it["expected_reject"])
               for it in items if it["expected_reject"] is not None)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# Judge / PRM audit by deterministic corruption ({result['n_source_traces']} max-score source traces)",
             "",
             "| scorer | variant | n | acceptance % [95% CI] | Δ vs clean pp [95% CI] "
             "| verifier: expected % on determined items |",
             "|---|---|---|---|---|---|"]
    for r in result["table"]:
        exp = ""
        if r["scorer"] == "verifier":
            e = r.get("expected_acceptance")
            exp = "—" if e is None else f"{100 * e:.0f} (got {100 * r['determined_acceptance']:.0f})"
            exp += f"; {r['undetermined']} undetermined" if r.get("undetermined") else ""
        lines.append(f"| {r['scorer']} | {r['variant']} | {r['n']} | {ci_text(r['acceptance'])} | "
                     f"{ci_text(r.get('delta_vs_clean'), signed=True) if 'delta_vs_clean' in r else '—'} | {exp} |")
    lines += ["", f"Verifier matches its by-construction expectation: {result['verifier_matches_expectation']}. "
              f"Accept rules: verifier = score 6; PRM = score >= {result['thresholds']['prm']}; "
              f"judge = score >= {result['thresholds']['judge']}. Intervals: clustered bootstrap by source_id."]
    return "\n".join(lines) + "\n"


__all__ = ["VARIANTS", "acceptance_table", "consistent_swap", "edge_deletion", "invalid_object", "make_variants",
           "markdown", "run_audit", "score_items", "source_traces", "strategy_only", "truncation", "verifier_matches"]
