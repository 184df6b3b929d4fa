"""Hand-built frozen pools from canonical traces (tests, demos, benchmark fixtures).

A pool spec is a list of units ``(problem, seed, objects)``; each object becomes the family's
canonical six-slot trace for it (score 6 when valid). ``claim_valid(trace)`` rewrites an invalid
trace's RESULT to ``valid``, the typical LLM error (it still scores below 6).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from calver.evaluation.audits import replace_slot
from calver.infer.pool import Pool
from calver.verifier import Problem, get_family, parse_graph

# The supplement's worked example: {U} and {U, P} are valid backdoor sets for X -> Y; {} leaves
# X <- U -> Y open; {M} is a descendant of X.
EXAMPLE_GRAPH = "P -> U, U -> X, U -> Y, X -> M, M -> Y"


def backdoor_problem(pid: str = "bd", source_id: str | None = None, graph: str = EXAMPLE_GRAPH,
                     treatment: str = "X", outcome: str = "Y") -> Problem:
    return Problem(task="backdoor_set", query={"treatment": treatment, "outcome": outcome, "variant": "any"},
                   graph=parse_graph(graph), id=pid, source_id=source_id or pid)


def trace_for(problem: Problem, obj: Any, claim: bool = False) -> str:
    """The canonical trace for ``obj``; ``claim`` makes an invalid one declare itself valid."""
    text = get_family(problem.task).canonical_trace(problem, obj)
    return claim_valid(text) if claim else text


def claim_valid(trace: str) -> str:
    return replace_slot(trace, "RESULT", "valid")


def build_pool(root: str, units: Sequence[tuple[Problem, int, Sequence[Any]]], *,
               selections: dict[str, Iterable[dict[str, Any]]] | None = None, freeze: bool = True,
               raw_texts: bool = False) -> Pool:
    """Write a pool: ``units`` are (problem, seed, objects-or-texts) in order; duplicates allowed."""
    pool = Pool(root)
    pool.write_manifest({"kind": "synthetic", "K": max((len(o) for _, _, o in units), default=0)})
    problems: dict[str, Problem] = {}
    for p, _, _ in units:
        problems.setdefault(p.id, p)
    pool.write_problems(problems.values())
    rows = []
    for p, seed, objs in units:
        for i, obj in enumerate(objs):
            text = obj if raw_texts else trace_for(p, obj)
            rows.append({"problem_id": p.id, "source_id": p.source_id or p.id, "seed": seed, "candidate_index": i,
                         "text": text, "finish_reason": "stop", "num_tokens": len(text.split()), "mean_logprob": -1.0})
    pool.append_candidates(rows)
    if freeze:
        pool.freeze()
    for name, sel in (selections or {}).items():
        pool.write_selection(name, sel)
    return pool
