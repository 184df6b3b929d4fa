"""``calver sample`` and ``calver select`` (registered on the top-level CLI via ``add_commands``)."""

from __future__ import annotations

import argparse
import sys


def add_commands(sub) -> None:
    p = sub.add_parser(
        "sample",
        help="sample a resumable K-candidate pool from a YAML config",
        description="Sample K candidates per (problem, seed) unit into a pool directory (resumable; frozen at the end). "
        "See configs/sample/*.yaml and docs/pools.md.",
    )
    p.add_argument("--config", required=True, help="sample config YAML (fields: see calver.infer.sample_config)")
    p.add_argument("--out", help="override the config's pool directory")
    p.add_argument("--model", help="override the config's model path")
    p.add_argument("--adapter", help="override the config's adapter path")
    p.add_argument("--problems", help="override the config's problems source")
    p.add_argument("--backend", choices=("auto", "vllm", "hf"), help="override the config's backend")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override any config field (value parsed as YAML)")
    p.set_defaults(func=_sample)

    s = sub.add_parser(
        "select",
        help="run selectors over a pool (behind the label firewall)",
        description="Write selections/<name>[@k].jsonl for each selector. Neural selectors given no model "
        "re-select from the scores stored in the pool.",
    )
    s.add_argument("--pool", required=True, help="pool directory")
    s.add_argument("--selectors", default="first,plurality,medoid,structure,calver,extract_solve",
                   help="comma-separated selector names (or 'all' / 'non-neural')")
    s.add_argument("--k", help="K-prefix(es), comma-separated (e.g. 1,2,4,8); default: the full pool")
    s.add_argument("--policy", help="policy model for 'confidence' (default: the pool manifest's model + adapter)")
    s.add_argument("--judge-model", help="model for the LLM judge")
    s.add_argument("--reward-model", help="HF sequence-classification reward model for reward_model / reward_model_trace")
    s.add_argument("--prm", help="distilled PRM directory")
    s.add_argument("--backend", default="auto", choices=("auto", "vllm", "hf"), help="sampler backend for confidence/judge")
    s.add_argument("--audit", action="store_true", help="also write the label-reading calver_best / calver_worst audits")
    s.add_argument("--report", action="store_true", help="print accuracy per selection (labels reattached after selection)")
    s.set_defaults(func=_select)


def _sample(args) -> int:
    from calver.infer.sample import cmd_sample

    return cmd_sample(args)


def _names(spec: str) -> list[str]:
    from calver.infer.selectors import NON_NEURAL, SELECTORS

    out: list[str] = []
    for n in (x.strip() for x in spec.split(",") if x.strip()):
        if n == "all":
            out += list(SELECTORS)
        elif n == "non-neural":
            out += list(NON_NEURAL)
        elif n not in SELECTORS:
            raise SystemExit(f"calver select: unknown selector {n!r}; known: {', '.join(SELECTORS)}")
        else:
            out.append(n)
    return list(dict.fromkeys(out))


def _build(names: list[str], args, pool):
    from calver.infer.selectors import build_selector

    sels, samplers = [], {}

    def sampler_for(model: str, adapter: str | None):
        if (model, adapter) not in samplers:
            from calver.infer.sampler import make_sampler

            samplers[(model, adapter)] = make_sampler(model, adapter, backend=args.backend)
        return samplers[(model, adapter)]

    for n in names:
        if n == "confidence" and (args.policy or "confidence" not in pool.selection_names()):
            m = pool.manifest()
            model = args.policy or (m.get("model") or {}).get("path")
            adapter = None if args.policy else (m.get("adapter") or {}).get("path")
            if model:
                sels.append(build_selector(n, sampler=sampler_for(model, adapter)))
                continue
        if n == "judge" and args.judge_model:
            sels.append(build_selector(n, sampler=sampler_for(args.judge_model, None)))
        elif n in ("reward_model", "reward_model_trace") and args.reward_model:
            sels.append(build_selector(n, model_path=args.reward_model))
        elif n == "prm" and args.prm:
            sels.append(build_selector(n, model_path=args.prm))
        else:
            sels.append(build_selector(n))
    return sels, samplers


def _select(args) -> int:
    from calver.infer.firewall import FirewallError
    from calver.infer.pool import Pool, PoolError
    from calver.infer.select import accuracy, calver_audit, run_selection, selection_name
    from calver.infer.selectors import SelectorError, build_selector

    pool = Pool(args.pool)
    names = _names(args.selectors)
    ks: list[int | None] = [int(x) for x in args.k.split(",")] if args.k else [None]
    try:
        pool.manifest()
        if not pool.frozen:
            _log(f"warning: {pool.root} is not frozen; selections on a pool still being sampled are not final")
        sels, samplers = _build(names, args, pool)
        try:
            # Full-K first so that neural scores computed here are stored before any prefix reuses them.
            if any(k is not None for k in ks) and any(getattr(s, "neural", False) and s.has_model() for s in sels):
                run_selection(pool, [s for s in sels if s.neural and s.has_model()], None, log=_log)
                sels = [build_selector(s.name) if s.neural else s for s in sels]
            for k in ks:
                run_selection(pool, sels, k, log=_log)
                if args.audit:
                    for tie in ("best", "worst"):
                        calver_audit(pool, tie, k)
        finally:
            for smp in samplers.values():
                smp.close()
        if args.report:
            for k in ks:
                for n in [s.name for s in sels] + (["calver_best", "calver_worst"] if args.audit else []):
                    name = selection_name(n, k)
                    print(f"{name}\t{accuracy(pool, name, k):.4f}")
    except (PoolError, SelectorError, FirewallError, ValueError) as e:
        print(f"calver select: error: {e}", file=sys.stderr)
        return 2
    return 0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:  # `python -m calver.infer.cli`
    ap = argparse.ArgumentParser(prog="calver")
    add_commands(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
