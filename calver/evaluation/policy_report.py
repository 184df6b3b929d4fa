"""``calver policy-report``: whether a policy learned the rules, read off its frozen pools.

For each pool (``--pool name=DIR``) it puts side by side, each with a problem-clustered 95% CI:

- the policy's rates: parse, per bit, 6/6, valid answers, CALVER's pick, coverage (:func:`policy_stats`);
- the answer-free heuristics on the same problems (random subset of the candidate nodes, all candidates, the
  empty set, the family rule: :mod:`calver.evaluation.baselines`) and the policy's valid-answer rate minus
  each, paired by problem;
- per task family, per prompt graph encoding and per graph size (:func:`per_group`): GRAPH, 6/6, valid answers, rule
  agreement and exact rationale lookups, beside the family rule's and a random subset's valid answers;
- rule agreement: the share of candidates whose answer equals the family's rule answer (the first rule
  proposal valid on the problem's source), over problems whose family has a rule;
- the shuffled-problem control (:func:`shuffled_control`): candidates graded against another problem of
  their family, so a policy that guesses scores the same on both;
- set answers' names (:func:`answer_names`): the share that are nodes of the graph, answers naming a query
  node, and whether an answer is what the trace's own rationale lookup lists;

and, for every ``--compare a:b``, the paired differences b − a over the units both pools hold (a stage's
effect: SFT vs base, RFT vs SFT, GRPO vs its start). It reads labels (grading), like ``calver eval``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from calver.config import ConfigError, add_command, cfg_field, parse_command
from calver.data_gen.rationales import LookupCheck, check_lookups, lookup_names
from calver.evaluation.baselines import HEURISTICS, heuristic_answers
from calver.evaluation.bootstrap import DECOMPOSITION_DRAWS, mean_ci, paired_diff_ci
from calver.evaluation.breakdowns import MISSING, stratum_order
from calver.evaluation.grading import is_correct
from calver.evaluation.policy import compare_policies, policy_stats, shuffled_control
from calver.evaluation.report import ci_text, pct, share
from calver.evaluation.units import UnitFacts
from calver.verifier import SLOTS, Problem, get_family, parse_graph
from calver.verifier.contract import split_slots
from calver.verifier.graph import CausalGraph


def rule_agreement(units: Sequence[UnitFacts]) -> tuple[list[float], list[str]]:
    """Per unit with a rule answer: the share of its candidates whose answer key equals it; and the clusters."""
    values, clusters = [], []
    for u in units:
        p = u.grading_problem
        if p is None:
            continue
        fam = get_family(p.task)
        if not fam.has_rule:
            continue
        rule = fam.rule_object(p)
        if rule is None:
            continue
        want = fam.canonical_answer_key(fam.coerce_object(rule))
        values.append(float(np.mean([k == want for k in u.answer_keys])) if u.answer_keys else 0.0)
        clusters.append(u.source_id)
    return values, clusters


HeuristicGrades = list[tuple[UnitFacts, dict[str, bool]]]  # per unit: whether each heuristic's answer is valid


def grade_heuristics(units: Sequence[UnitFacts]) -> HeuristicGrades:
    """Each unit's answer-free heuristics, graded on its source once (the pool table and the per-family table
    both read them)."""
    out: HeuristicGrades = []
    for u in units:
        if u.grading_problem is not None:
            answers = heuristic_answers(u.grading_problem)
            out.append((u, {name: ans is not None and is_correct(u.grading_problem, ans)
                            for name, ans in answers.items()}))
    return out


def versus_baselines(graded: HeuristicGrades, *, draws: int, seed: int) -> dict[str, Any]:
    """Per heuristic: its valid-answer rate on the units' problems and the policy's minus it, paired by unit."""
    out: dict[str, Any] = {}
    for name in HEURISTICS:
        rows = [(float(np.mean(u.correct)), float(valid[name]), u.source_id) for u, valid in graded if name in valid]
        if not rows:
            out[name] = {"n_units": 0}
            continue
        pol, base, cl = (list(c) for c in zip(*rows))
        out[name] = {"baseline": mean_ci(base, cl, draws=draws, seed=seed),
                     "policy_minus_baseline": paired_diff_ci(pol, base, cl, draws=draws, seed=seed)}
    return out


def task_of(u: UnitFacts) -> str:
    return u.grading_problem.task


def encoding_of(u: UnitFacts) -> str:
    """The graph encoding the unit's prompt shows (:func:`calver.data_gen.prompts.prompt_encoding`)."""
    from calver.data_gen.prompts import prompt_encoding

    return prompt_encoding(u.grading_problem) or "unknown"


def size_of(u: UnitFacts) -> str:
    """The number of nodes of the unit's source graph (``n/a`` for a problem without one, K&K's): the lookups a
    small policy gets right fall with the graph's size."""
    g = u.grading_problem.graph
    return str(len(g.nodes)) if g is not None else MISSING


def per_group(graded: HeuristicGrades, key: Callable[[UnitFacts], str], *, draws: int,
              seed: int) -> dict[str, dict[str, Any]]:
    """Per group of units (``key``: :func:`task_of`, the family; :func:`encoding_of`, the prompt's graph
    encoding; :func:`size_of`, the graph's node count), in :func:`stratum_order`: the GRAPH bit, 6/6,
    valid answers and rule agreement, beside the family rule's and a random subset's valid-answer rates on the
    same problems (which family or encoding a policy learned, which not), and the group's rationale lookups
    (:func:`rationale_lookups`: a lookup learned over one GRAPH line may not run over another)."""
    groups: dict[str, HeuristicGrades] = {}
    for u, valid in graded:
        groups.setdefault(key(u), []).append((u, valid))
    out: dict[str, dict[str, Any]] = {}
    for task, rows in sorted(groups.items(), key=lambda kv: stratum_order(kv[0])):
        us = [u for u, _ in rows]
        stats = policy_stats(us, draws=draws, seed=seed)
        agree, cl = rule_agreement(us)
        base = versus_baselines(rows, draws=draws, seed=seed)
        out[task] = {"n_units": len(us), "graph": stats["bit_graph"], "six_rate": stats["six_rate"],
                     "valid_rate": stats["valid_rate"],
                     "rule_agreement": mean_ci(agree, cl, draws=draws, seed=seed) if agree else {"n_units": 0},
                     **{h: base[h].get("baseline", {"n_units": 0}) for h in ("family_rule", "random_subset")},
                     "rationale_lookups": rationale_lookups(us)}
    return out


def _own_graph(text: str, problem: Problem) -> CausalGraph | None:
    """The graph a trace's GRAPH slot states, parsed as the verifier parses a graph family's slot; None when it has
    none or it does not parse (a lookup can only be checked against a graph that exists)."""
    slot = split_slots(text).get("GRAPH")
    if not slot:
        return None
    try:
        return parse_graph(slot, kind=problem.graph_class)
    except (ValueError, RecursionError):  # what the scorer catches around the same parse (GraphError included)
        return None


def _lookup_shares(c: LookupCheck) -> dict[str, Any]:
    return {"lookups": c.lookups, "exact": share(c.exact, c.lookups)}


def rationale_lookups(units: Sequence[UnitFacts]) -> dict[str, Any] | None:
    """How well the rationales' edge lookups (``Edges into X: ...``, :mod:`calver.data_gen.rationales`) match the
    source graph: lookups stated, the share exact, the precision and recall of the listed edges and the share of
    listed edges that are in the graph at all; for scans (``Scan for edges into X: ...``), the share that list
    every edge of the graph, of scanned edges in the graph and of yes/no marks right, beside the marks right of a
    scan that writes "no" everywhere; None when none is stated.

    Two splits say which step fails, the copy or the lookup: ``graph_bit`` counts the lookups of candidates that
    earned the GRAPH bit (the copy was right), ``own_graph`` checks every lookup against the graph the trace's own
    GRAPH slot states (the lookup step alone, whatever the copy), over traces whose GRAPH slot parses; ``answers``
    gives the valid-answer rate of candidates whose every lookup is exact and of those with one wrong. These are
    diagnostics read by an evaluator, never reward: the score checks lookups' consequences on the source only."""
    total, copied, own = LookupCheck(), LookupCheck(), LookupCheck()
    answers = {True: [0, 0], False: [0, 0]}  # every lookup exact? -> [candidates, valid answers]
    g_bit = SLOTS.index("GRAPH")
    for u in units:
        problem = u.grading_problem
        if problem is None or problem.graph is None:
            continue
        for i, text in enumerate(u.texts):
            found = check_lookups(text, problem.graph)
            total += found
            if not found.lookups:
                continue
            tally = answers[found.exact == found.lookups]
            tally[0] += 1
            tally[1] += int(i < len(u.correct) and bool(u.correct[i]))
            if i < len(u.bits) and u.bits[i][g_bit]:
                copied += found
            stated = _own_graph(text, problem)
            if stated is not None:
                own += check_lookups(text, stated)
    if not total.lookups:
        return None
    return {"lookups": total.lookups, "exact": share(total.exact, total.lookups),
            "precision": share(total.listed_true, total.listed), "recall": share(total.listed_true, total.true),
            "in_graph": share(total.in_graph, total.listed), "empty": share(total.empty, total.lookups),
            "scans": total.scans,
            "scans_complete": share(total.complete, total.scans),
            "scanned_in_graph": share(total.scanned_in_graph, total.scanned),
            "marks_right": share(total.marks_right, total.scanned),
            "always_no": share(total.not_the_node_s, total.scanned),
            "graph_bit": _lookup_shares(copied), "own_graph": _lookup_shares(own),
            "answers": {key: {"candidates": n, "valid": share(v, n)}
                        for key, (n, v) in (("all_exact", answers[True]), ("some_wrong", answers[False]))}}


def answer_names(units: Sequence[UnitFacts]) -> dict[str, Any] | None:
    """Whether set answers name the problem's nodes, and whether they follow the trace's own rationale: over
    candidates whose answer parsed to a node set, the names written and the share that are nodes of the source
    graph, the share of answers naming only its nodes and of answers naming a node or node set of the query
    (the treatment as its own adjustment set; a path's nodes do not count); over those whose rationale states a
    lookup, the share whose answer is exactly the nodes the lookups list, the query's nodes left out
    (:func:`lookup_names`: what the rule rationale then answers), and the valid answers among those that do and
    those that do not. None when no answer is a set. A policy that copies can still look up the wrong edges; one
    that writes names the graph lacks, or an answer its own lookup does not give, fails before the rule."""
    names = in_graph = answers = only_graph = query = 0
    follows = {True: [0, 0], False: [0, 0]}  # answer = the lookup's nodes? -> [candidates, valid answers]
    for u in units:
        problem = u.grading_problem
        if problem is None or problem.graph is None:
            continue
        fam = get_family(problem.task)
        # the query's named nodes and node sets (treatment, outcome, x, y), not a path's nodes: a blocking
        # set's answer is the path's interior by design
        ends = tuple(k for k in fam.query_keys if fam.query_types[k] in ("node", "set"))
        nodes, asked = set(problem.graph.nodes), fam.query_nodes(fam.normalize_query(problem), ends)
        for i, ans in enumerate(u.answers):
            if not isinstance(ans, frozenset):
                continue
            answers += 1
            names += len(ans)
            in_graph += len(ans & nodes)
            only_graph += int(ans <= nodes)
            query += int(bool(ans & asked))
            listed = lookup_names(u.texts[i]) if i < len(u.texts) else None
            if listed is not None:
                tally = follows[ans == listed - asked]
                tally[0] += 1
                tally[1] += int(i < len(u.correct) and bool(u.correct[i]))
    if not answers:
        return None
    looked = follows[True][0] + follows[False][0]
    return {"answers": answers, "names": names, "in_graph": share(in_graph, names),
            "only_graph_nodes": share(only_graph, answers), "names_a_query_node": share(query, answers),
            "with_lookup": looked, "follows_lookup": share(follows[True][0], looked),
            "valid": {key: {"candidates": n, "valid": share(v, n)}
                      for key, (n, v) in (("follows", follows[True]), ("departs", follows[False]))}}


def report_pool(units: Sequence[UnitFacts], *, shuffles: int, draws: int, seed: int) -> dict[str, Any]:
    """Everything :mod:`policy_report` says about one pool (JSON-ready)."""
    agree, cl = rule_agreement(units)
    graded = grade_heuristics(units)
    return {
        "stats": policy_stats(units, draws=draws, seed=seed),
        "baselines": versus_baselines(graded, draws=draws, seed=seed),
        "rule_agreement": mean_ci(agree, cl, draws=draws, seed=seed) if agree else {"n_units": 0},
        "shuffled": shuffled_control(units, shuffles=shuffles, seed=seed, draws=draws),
        "tasks": sorted({u.grading_problem.task for u in units if u.grading_problem is not None}),
        "per_task": per_group(graded, task_of, draws=draws, seed=seed),
        "per_encoding": per_group(graded, encoding_of, draws=draws, seed=seed),
        "per_size": per_group(graded, size_of, draws=draws, seed=seed),
        "rationale_lookups": rationale_lookups(units),
        "answer_names": answer_names(units),
    }


def _table(title: str, header: list[str], rule: str, rows: list[list[Any]]) -> list[str]:
    """A markdown table after a blank line and its title line: the header, the alignment ``rule``, one row per
    list of cells."""
    return ["", title, "", "| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(map(str, r)) + " |"
                                                                      for r in rows]


def markdown(reports: dict[str, dict[str, Any]], comparisons: dict[str, dict[str, Any]]) -> str:
    """The report as markdown tables (percentages, 95% clustered CIs in brackets)."""
    lines = ["| policy | candidates | parse | 6/6 | valid answers | CALVER pick | coverage | rule agreement |",
             "|---|---:|---|---|---|---|---|---|"]
    for name, r in reports.items():
        s = r["stats"]
        lines.append(f"| {name} | {s['n_candidates']} | {ci_text(s['parse_rate'])} | {ci_text(s['six_rate'])} | "
                     f"{ci_text(s['valid_rate'])} | {ci_text(s['calver'])} | {ci_text(s['coverage'])} | "
                     f"{ci_text(r['rule_agreement'])} |")
    lines += ["", "Per-bit pass rates (%):", "", "| policy | " + " | ".join(SLOTS) + " |",
              "|---|" + "---:|" * len(SLOTS)]
    for name, r in reports.items():
        rates = r["stats"]["bit_pass_rates"]
        lines.append(f"| {name} | " + " | ".join(f"{100 * rates[s]:.1f}" for s in SLOTS) + " |")
    for field, what, col in (("per_task", "task family", "task"),
                             ("per_encoding", "prompt graph encoding", "encoding"),
                             ("per_size", "graph size", "nodes")):
        lines += ["", f"Per {what} (%; the family rule's and a random subset's valid answers on the same problems):",
                  "", f"| policy | {col} | problems | GRAPH | 6/6 | valid answers | rule agreement | family rule | "
                  "random subset | rationale lookups exact |", "|---|---|---:|---|---|---|---|---|---|---|"]
        for name, r in reports.items():
            for group, t in r[field].items():
                lk = t.get("rationale_lookups")
                exact = f"{pct(lk['exact'])} of {lk['lookups']}" if lk else "–"
                lines.append(f"| {name} | {group} | {t['n_units']} | {ci_text(t['graph'])} | {ci_text(t['six_rate'])} "
                             f"| {ci_text(t['valid_rate'])} | {ci_text(t['rule_agreement'])} | "
                             f"{ci_text(t['family_rule'])} | {ci_text(t['random_subset'])} | {exact} |")
    looked = {n: r["rationale_lookups"] for n, r in reports.items() if r.get("rationale_lookups")}
    if looked:
        lines += ["", "Rationale lookups (`Edges into X: ...` against the source graph; % of lookups, of listed "
                  "edges, of the node's edges; the copy or the lookup: exact among candidates that earned the "
                  "GRAPH bit, and against the graph the trace's own GRAPH slot states):", "",
                  "| policy | lookups | exact | exact, GRAPH bit earned | exact vs own GRAPH slot | listed edges right "
                  "| node's edges listed | listed edges in the graph | none listed, the node has edges "
                  "| scans | scans listing every edge | scanned edges in the graph | scan marks right | "
                  "marks right, \"no\" everywhere |", "|---|" + "---:|" * 13]
        for name, lk in looked.items():
            scan = (f"{lk['scans']} | {pct(lk['scans_complete'])} | {pct(lk['scanned_in_graph'])} | "
                    f"{pct(lk['marks_right'])} | {pct(lk['always_no'])}" if lk["scans"] else "0 | – | – | – | –")
            split = " | ".join(f"{pct(lk[k]['exact'])} of {lk[k]['lookups']}" if lk[k]["lookups"] else "–"
                               for k in ("graph_bit", "own_graph"))
            lines.append(f"| {name} | {lk['lookups']} | {pct(lk['exact'])} | {split} | {pct(lk['precision'])} | "
                         f"{pct(lk['recall'])} | {pct(lk['in_graph'])} | {pct(lk['empty'])} | {scan} |")
        cell = lambda t: f"{pct(t['valid'])} of {t['candidates']}" if t["candidates"] else "–"  # noqa: E731
        lines += _table("Lookups and answers (candidates whose rationale states a lookup; valid answers, %):",
                        ["policy", "candidates", "every lookup exact", "valid, every lookup exact",
                         "valid, a lookup wrong"], "|---|---:|---:|---:|---:|",
                        [[name, a["candidates"] + w["candidates"], a["candidates"], cell(a), cell(w)]
                         for name, lk in looked.items()
                         for a, w in [(lk["answers"]["all_exact"], lk["answers"]["some_wrong"])]])
    named = {n: r["answer_names"] for n, r in reports.items() if r.get("answer_names")}
    if named:
        valid = lambda t: f"{pct(t['valid'])} of {t['candidates']}" if t["candidates"] else "–"  # noqa: E731
        lines += _table("Set answers: their names, and the trace's own lookup (% of names, of answers; answers "
                        "whose rationale states a lookup, and whether the answer is the nodes it lists):",
                        ["policy", "set answers", "names in the graph", "answers naming only graph nodes",
                         "answers naming a query node", "with a lookup", "answer = the lookup's nodes",
                         "valid, answer = lookup", "valid, answer departs"], "|---|" + "---:|" * 8,
                        [[name, a["answers"], pct(a["in_graph"]), pct(a["only_graph_nodes"]),
                          pct(a["names_a_query_node"]), a["with_lookup"], pct(a["follows_lookup"]),
                          valid(a["valid"]["follows"]), valid(a["valid"]["departs"])] for name, a in named.items()])
    lines += _table("Answer-free heuristics on the same problems, and the policy's valid-answer rate minus each "
                    "(paired by problem):",
                    ["policy", "heuristic", "heuristic valid", "policy − heuristic", "problems"],
                    "|---|---|---|---|---:|",
                    [[name, h, ci_text(b["baseline"]), ci_text(b["policy_minus_baseline"], True),
                      b["baseline"]["n_units"]]
                     for name, r in reports.items() for h, b in r["baselines"].items() if b.get("n_units") != 0])
    lines += ["", "Shuffled-problem control (candidates graded against another problem of their family):", "",
              "| policy | valid own | valid shuffled | own − shuffled | 6/6 own | 6/6 shuffled |",
              "|---|---|---|---|---|---|"]
    for name, r in reports.items():
        sh = r["shuffled"]
        if "error" in sh:
            lines.append(f"| {name} | {sh['error']} | | | | |")
            continue
        v, six = sh["valid_rate"], sh["six_rate"]
        lines.append(f"| {name} | {ci_text(v['own'])} | {ci_text(v['shuffled'])} | "
                     f"{ci_text(v['own_minus_shuffled'], True)} | {ci_text(six['own'])} | {ci_text(six['shuffled'])} |")
    if comparisons:
        lines += ["", "Paired differences over shared units (b − a, percentage points):", "",
                  "| a → b | units | 6/6 | valid answers | CALVER pick | coverage |", "|---|---:|---|---|---|---|"]
        for pair, c in comparisons.items():
            lines.append(f"| {pair} | {c['n_units']} | {ci_text(c['six_rate'], True)} | "
                         f"{ci_text(c['valid_rate'], True)} | {ci_text(c['calver'], True)} | "
                         f"{ci_text(c['coverage'], True)} |")
    return "\n".join(lines) + "\n"


@dataclass
class PolicyReportConfig:
    """``calver policy-report --pool NAME=DIR [...] [--compare A:B ...] [--out DIR]``: a policy's rates beside the
    answer-free heuristics, its rule agreement and the shuffled-problem control; paired stage comparisons."""

    pool: list[str] = cfg_field(help="NAME=DIR, repeatable: a pool directory (calver sample) and its name")
    compare: list[str] = cfg_field(help="A:B, repeatable: the paired differences B − A over the units both hold",
                                   default_factory=list)
    out: str | None = cfg_field(None, help="write report.md and report.json here (default: print only)")
    shuffles: int = cfg_field(3, help="derangements of the shuffled-problem control")
    draws: int = cfg_field(DECOMPOSITION_DRAWS, help="bootstrap draws of the clustered CIs")
    seed: int = cfg_field(0, help="bootstrap and shuffle seed")

    def __post_init__(self) -> None:
        if not self.pool:
            raise ConfigError("field 'pool' is required: pass --pool NAME=DIR")
        pools = self.pools
        for item in self.compare:
            a, sep, b = item.partition(":")
            if not sep or a not in pools or b not in pools:
                raise ConfigError(f"field 'compare' takes A:B with A and B among the pools {sorted(pools)}, "
                                  f"got {item!r}")
        for name in ("shuffles", "draws"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 100_000:
                raise ConfigError(f"field {name!r} must be a whole number in 1..100000, got {v!r}")


    @property
    def pools(self) -> dict[str, str]:
        """``pool`` as name -> directory (a malformed or repeated name raises ConfigError)."""
        out: dict[str, str] = {}
        for item in self.pool:
            name, sep, path = item.partition("=")
            if not sep or not name or not path:
                raise ConfigError(f"field 'pool' takes NAME=DIR, got {item!r}")
            if name in out:
                raise ConfigError(f"field 'pool' names {name!r} twice")
            out[name] = path
        return out


def run_report(cfg: PolicyReportConfig) -> tuple[dict[str, Any], str]:
    """The JSON-ready report and its markdown."""
    from calver.evaluation.results import to_json
    from calver.evaluation.units import load_units

    units = {name: load_units(path) for name, path in cfg.pools.items()}
    reports = {name: report_pool(us, shuffles=cfg.shuffles, draws=cfg.draws, seed=cfg.seed)
               for name, us in units.items()}
    comparisons = {}
    for item in cfg.compare:
        a, _, b = item.partition(":")
        comparisons[f"{a} → {b}"] = compare_policies(units[a], units[b], draws=cfg.draws, seed=cfg.seed)
    data = to_json({"pools": cfg.pools, "reports": reports, "comparisons": comparisons})
    return data, markdown(reports, comparisons)


def _cli(args) -> int:
    cfg = parse_command("policy-report", PolicyReportConfig, args)
    if cfg is None:
        return 2
    try:
        data, md = run_report(cfg)
    except (ValueError, OSError, KeyError) as e:
        print(f"calver policy-report: error: {e}", file=sys.stderr)
        return 2
    print(md)
    if cfg.out:
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(md)
        (out / "report.json").write_text(json.dumps(data, indent=2, default=str))
    return 0


def add_commands(subparsers) -> None:
    add_command(subparsers, "policy-report", (PolicyReportConfig,),
                help="a policy's rates beside answer-free heuristics, rule agreement and the shuffled control",
                description=PolicyReportConfig.__doc__).set_defaults(func=_cli)


__all__ = ["PolicyReportConfig", "grade_heuristics", "report_pool", "rule_agreement", "run_report",
           "versus_baselines"]
