"""``calver verify PROBLEM.json TRACE.txt``: print bits, total and reasons as JSON."""

from __future__ import annotations

import argparse
import json
import sys

PROBLEM_FORMAT = """\
PROBLEM.json is one JSON object:
  task         registered task family, e.g. backdoor_set, separation_set, frontdoor_set,
               blocking_set, cycle_witness, mediator, intervention_reachability, ate_threshold,
               knights_knaves (see docs/trace-contract.md)
  query        the family's query, e.g. {"treatment": "X", "outcome": "Y", "variant": "minimal"}
  graph        the graph, as text in any supported encoding (arrows "A -> B, B <-> C", CLEAR's
               sentence, DOT, GraphML, adjacency matrix, "A causes B." prose) or a JSON
               edge list / parents map
  graph_format optional: arrows | json | matrix | graphml | dot | prose (default: detected)
  graph_class  optional: DAG | ADMG | directed (default: declared by the text, else inferred)
  mode         supplied (default: score on the given graph) | constructed (score on each trace's
               own GRAPH slot; "graph" is then only the grading label)
  text         optional prompt text; variables: the prompt's variables (constructed mode)
  data         family payload (ATE: CPTs, threshold, epsilon; K&K: people, statements)
  id, source_id, meta   optional bookkeeping

Example:
  {"task": "backdoor_set", "graph": "Z -> X, Z -> Y, X -> Y", "graph_class": "DAG",
   "query": {"treatment": "X", "outcome": "Y"}}
"""


def add_commands(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="score a six-slot trace against a problem",
        description="Score TRACE.txt against PROBLEM.json and print bits, total and reasons as JSON.",
        epilog=PROBLEM_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("problem", help="problem JSON file (format below)")
    p.add_argument("trace", help="trace text file ('-' for stdin)")
    p.add_argument("--grade", action="store_true", help="also grade the ANSWER on the problem's source graph")
    p.set_defaults(func=run_verify)


def run_verify(args) -> int:
    from calver.verifier import Problem, ProblemError, grade, score

    try:
        with open(args.problem, encoding="utf-8") as fh:
            problem = Problem.from_dict(json.load(fh))
    except (OSError, json.JSONDecodeError, ProblemError) as e:
        print(f"calver verify: bad problem file {args.problem}: {e}", file=sys.stderr)
        return 2
    try:
        trace = sys.stdin.read() if args.trace == "-" else open(args.trace, encoding="utf-8", errors="replace").read()
    except OSError as e:
        print(f"calver verify: cannot read trace {args.trace}: {e}", file=sys.stderr)
        return 2
    try:
        result = score(trace, problem)
    except ProblemError as e:
        print(f"calver verify: bad problem: {e}", file=sys.stderr)
        return 2
    out = result.to_dict()
    if args.grade:
        out["correct"] = bool(result.answer is not None and grade(problem, result.answer))
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0
