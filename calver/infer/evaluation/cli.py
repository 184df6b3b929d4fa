"""``calver eval``: evaluate selectors on a frozen pool and write the report."""

from __future__ import annotations

import argparse
import sys

from calver.infer.evaluation.bootstrap import DECOMPOSITION_DRAWS, HEADLINE_DRAWS
from calver.infer.evaluation.scaling import K_GRID


def add_commands(subparsers) -> None:
    p = subparsers.add_parser(
        "eval",
        help="compare selectors on a frozen pool: accuracy, paired clustered-bootstrap gains, audits",
        description="Evaluate selectors on one frozen pool and write report.md, results.json and PNG figures. "
        "Correctness is the task predicate on the source graph; intervals are clustered by source problem.",
    )
    p.add_argument("--pool", required=True, help="pool directory (manifest.json, problems.jsonl, candidates.jsonl)")
    p.add_argument("--selectors", nargs="+", default=None,
                   help="selectors to compare: stored selections/<name>.jsonl and/or built-ins first, plurality, "
                        "calver (default: built-ins plus every stored selection)")
    p.add_argument("--out", required=True, help="report directory")
    p.add_argument("--draws", type=int, default=HEADLINE_DRAWS, help="bootstrap draws for headline intervals")
    p.add_argument("--decomp-draws", type=int, default=DECOMPOSITION_DRAWS, help="bootstrap draws for decompositions")
    p.add_argument("--seed", type=int, default=0, help="bootstrap / audit RNG seed")
    p.add_argument("--k", type=int, nargs="+", default=list(K_GRID), help="K-prefix grid")
    p.add_argument("--threshold", type=float, default=6, help="score threshold for calibration")
    p.add_argument("--no-audits", action="store_true", help="skip the renaming / swap / damage audits")
    p.add_argument("--no-ladder", action="store_true", help="skip the graph-corruption ladder")
    p.add_argument("--audit-limit", type=int, default=None, help="audit at most this many candidates")
    p.add_argument("--ladder-frac", type=float, default=0.1, help="edge fraction for delete/add/reverse rungs")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.add_argument("--wandb", action="store_true", help="also log the tables to wandb")
    p.add_argument("--wandb-mode", default="offline", choices=("offline", "online", "disabled"))
    p.add_argument("--wandb-project", default="calver")
    p.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    from calver.infer.evaluation.evaluate import evaluate
    from calver.infer.evaluation.report import ci_text, log_wandb, write_report
    from calver.infer.pool import PoolError

    try:
        res = evaluate(
            args.pool, args.selectors, draws=args.draws, decomp_draws=args.decomp_draws, seed=args.seed, ks=args.k,
            threshold=args.threshold, audits=not args.no_audits, ladder=not args.no_ladder,
            audit_limit=args.audit_limit, ladder_frac=args.ladder_frac,
        )
    except (PoolError, KeyError, ValueError) as e:
        print(f"calver eval: {e}", file=sys.stderr)
        return 2
    paths = write_report(res, args.out, figures=not args.no_figures)
    for name, r in res["accuracy"].items():
        print(f"{name:>16}: {ci_text(r)}")
    for name, r in res["paired"].items():
        print(f"{res['target']} - {name}: {ci_text(r, True)} pp")
    if args.wandb:
        note = log_wandb(res, project=args.wandb_project, mode=args.wandb_mode, out_dir=args.out)
        if note:
            print(f"calver eval: {note}", file=sys.stderr)
    print(f"wrote {paths['report']}")
    return 0
