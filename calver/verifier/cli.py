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
               (a key the family does not read is refused)
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


def _fail(msg: str) -> int:
    """One line on stderr (the message is flattened and capped: it may quote hostile input), exit 2."""
    line = " ".join(str(msg).split())
    print(f"calver verify: {line[:500]}", file=sys.stderr)
    return 2


def load_problem(path: str):
    """Read, parse and validate a problem file; raises ``ProblemError`` (naming the field or the file
    defect) for anything malformed, so the CLI never prints a traceback for a bad problem."""
    from calver.verifier import Problem, ProblemError, get_family

    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProblemError(f"file: not UTF-8 (byte {e.start})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProblemError(f"file: not JSON: {e}") from None
    except RecursionError:
        raise ProblemError("file: JSON nested too deeply") from None
    except ValueError:  # CPython refuses integer literals over sys.get_int_max_str_digits() digits
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise ProblemError(f"file: an integer has more than {limit} digits") from None
    try:
        problem = Problem.from_dict(d)
    except ProblemError:
        raise
    except RecursionError:
        raise ProblemError("file: JSON nested too deeply") from None
    except (TypeError, ValueError, KeyError, AttributeError) as e:  # a shape from_dict does not name
        raise ProblemError(f"malformed problem ({type(e).__name__}: {e})") from None
    try:
        family = get_family(problem.task)
    except KeyError as e:
        raise ProblemError(f"field 'task': {e.args[0]}") from None
    try:
        family.normalize_query(problem)  # the family's load-time validation (query, data, graph)
        family.verification_object(problem)
    except ProblemError:
        raise
    except (TypeError, ValueError, KeyError, RecursionError) as e:  # a family that does not name the field
        raise ProblemError(f"task {problem.task!r}: malformed problem ({type(e).__name__}: {e})") from None
    return problem, family


def run_verify(args) -> int:
    from calver.verifier import ProblemError, grade, score

    try:
        problem, family = load_problem(args.problem)
    except OSError as e:
        return _fail(f"bad problem file {args.problem}: {e.strerror or e}")
    except ProblemError as e:
        return _fail(f"bad problem: {e}")
    try:
        trace = sys.stdin.read() if args.trace == "-" else open(args.trace, encoding="utf-8", errors="replace").read()
    except OSError as e:
        return _fail(f"cannot read trace {args.trace}: {e.strerror or e}")
    try:
        result = score(trace, problem)
        out = result.to_dict()
        if args.grade:
            if family.verification_object(problem) is None:
                raise ProblemError("field 'graph': --grade needs the problem's source graph")
            out["correct"] = bool(result.answer is not None and grade(problem, result.answer))
    except ProblemError as e:
        return _fail(f"bad problem: {e}")
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0
