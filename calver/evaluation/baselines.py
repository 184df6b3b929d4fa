"""Answer-free baselines: how often an answer that reads no trace, and no label, is valid.

A policy's valid-answer rate means little without them: on set families a random subset of the candidate
nodes is often valid, and "all candidates" more often still (the training-value review measured 56% and
88% on the demo's held-out problems). :func:`answer_free_baselines` grades each heuristic's answer on every
problem's source, with a clustered CI (by ``source_id``):

- ``random_subset``: each candidate node (``TaskFamily.candidates``: the nodes a set answer may hold) kept
  with probability 1/2, seeded per problem;
- ``all_candidates`` and ``empty_set``;
- ``family_rule``: the family's local rule (``TaskFamily.rule_objects``, e.g. the treatment's parents) applied
  to the problem's graph, its first proposal taken as is (never checked against the answer).

The set heuristics apply to set-answer families only, the family rule to families that have one
(:func:`applies`); a problem where a heuristic proposes nothing counts as not valid for it (``n_units``
says how many problems each was graded on). ``calver baselines --problems FILE`` prints the table.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from calver.config import ConfigError, add_command, cfg_field, parse_command
from calver.evaluation.bootstrap import HEADLINE_DRAWS, mean_ci
from calver.evaluation.grading import is_correct
from calver.verifier import Problem, get_family

HEURISTICS = ("random_subset", "all_candidates", "empty_set", "family_rule")


def heuristic_answers(problem: Problem) -> dict[str, Any]:
    """Every heuristic that applies to ``problem`` and its answer (None: it proposes nothing). The set
    heuristics apply where the family's answers are node sets (``TaskFamily.set_candidates``), the family
    rule where it has one (``TaskFamily.has_rule``)."""
    fam = get_family(problem.task)
    g = fam.verification_object(problem)
    if g is None:
        return {}
    query = fam.normalize_query(problem)
    out: dict[str, Any] = {}
    cands = fam.set_candidates(g, query)
    if cands is not None:
        rng = random.Random(f"calver-baseline/{problem.id}")
        # sorted: the same subset however the problem's graph lists its nodes (a JSON round trip may reorder)
        out["random_subset"] = frozenset(c for c in sorted(cands) if rng.random() < 0.5)
        out["all_candidates"] = frozenset(cands)
        out["empty_set"] = frozenset()
    if fam.has_rule:
        out["family_rule"] = next(iter(fam.rule_objects(g, query)), None)
    return out


def heuristic_answer(problem: Problem, name: str) -> Any | None:
    """The answer heuristic ``name`` gives for ``problem`` (None: it does not apply, or proposes nothing)."""
    if name not in HEURISTICS:
        raise ValueError(f"heuristic must be one of {HEURISTICS}, got {name!r}")
    return heuristic_answers(problem).get(name)


def applies(name: str, problem: Problem) -> bool:
    """Whether heuristic ``name`` is defined for ``problem`` (see :func:`heuristic_answers`)."""
    return name in heuristic_answers(problem)


def answer_free_baselines(problems: Sequence[Problem], *, draws: int = HEADLINE_DRAWS,
                          seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per heuristic: the valid-answer rate over the problems it applies to (a clustered CI), or an empty
    result when it applies to none. Each problem's graph and query are read once for all heuristics."""
    values: dict[str, list[float]] = {name: [] for name in HEURISTICS}
    clusters: dict[str, list[str]] = {name: [] for name in HEURISTICS}
    for p in problems:
        for name, ans in heuristic_answers(p).items():
            values[name].append(float(ans is not None and is_correct(p, ans)))
            clusters[name].append(p.source_id or p.id)
    return {name: mean_ci(values[name], clusters[name], draws=draws, seed=seed) if values[name] else {"n_units": 0}
            for name in HEURISTICS}


@dataclass
class BaselinesConfig:
    """``calver baselines --problems FILE``: the valid-answer rate of answer-free heuristics on a problem
    set (graded on each problem's source; reads its labels, like ``calver eval``)."""

    problems: str = cfg_field(help="a problems.jsonl (or a `calver gen`/`calver data` folder)")
    draws: int = cfg_field(HEADLINE_DRAWS, help="bootstrap draws of the clustered CIs")
    seed: int = cfg_field(0, help="bootstrap seed")

    def __post_init__(self) -> None:
        if not self.problems:
            raise ConfigError("field 'problems' is required: pass --problems FILE")
        if not isinstance(self.draws, int) or not 1 <= self.draws <= 100_000:
            raise ConfigError(f"field 'draws' must be a whole number in 1..100000, got {self.draws!r}")


def _cli(args) -> int:
    from calver.infer.sample import load_problem_rows

    cfg = parse_command("baselines", BaselinesConfig, args)
    if cfg is None:
        return 2
    try:
        problems = [Problem.from_dict(r["problem"]) for r in load_problem_rows(cfg.problems)]
        res = answer_free_baselines(problems, draws=cfg.draws, seed=cfg.seed)
    except (ValueError, OSError, KeyError) as e:
        print(f"calver baselines: error: {e}", file=sys.stderr)
        return 2
    print(f"{len(problems)} problems ({cfg.problems})\n")
    print("| heuristic | valid answers | 95% CI | problems |")
    print("|---|---:|---|---:|")
    for name, r in res.items():
        if not r.get("n_units"):
            print(f"| {name} | – | – | 0 |")
            continue
        print(f"| {name} | {100 * r['estimate']:.1f}% | [{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}] | "
              f"{r['n_units']} |")
    return 0


def add_commands(subparsers) -> None:
    add_command(subparsers, "baselines", (BaselinesConfig,), help="valid-answer rates of answer-free heuristics "
                "(random subset, all candidates, empty set, the family rule) on a problem set",
                description=BaselinesConfig.__doc__).set_defaults(func=_cli)


__all__ = ["HEURISTICS", "BaselinesConfig", "answer_free_baselines", "applies", "heuristic_answer",
           "heuristic_answers"]
