"""``calver refine``, ``calver audit-judges`` and ``calver route`` (registered via ``add_commands``).

Also :func:`sample_pool`: write problems and sample a small pool through ``calver sample``'s own
code path (``run_sample``), reusing an existing complete pool with the same manifest.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence


def add_commands(sub) -> None:
    r = sub.add_parser(
        "refine",
        help="verifier-guided refinement vs token-matched best-of-K on a pool",
        description="For units whose pool has no max-score candidate, feed slot-level verifier feedback back to the "
        "policy for up to T rounds; compare with best-of-K' CALVER at the same sampled-token budget. Writes "
        "refine.json, refine_units.jsonl and refine.md under --out.",
    )
    r.add_argument("--pool", required=True, help="pool directory (round 0)")
    r.add_argument("--model", help="policy model (default: the pool manifest's model)")
    r.add_argument("--adapter", help="policy adapter (default: the pool manifest's adapter)")
    r.add_argument("--config", help="refine config YAML (see configs/refine/refine.yaml)")
    r.add_argument("--rounds", type=int, help="T, revision rounds at most")
    r.add_argument("--revisions", type=int, help="samples per revision round")
    r.add_argument("--k", type=int, help="K-prefix of the pool used as round 0")
    r.add_argument("--max-tokens", type=int, help="override the pool's max_tokens")
    r.add_argument("--no-baseline", action="store_true", help="skip the token-matched best-of-K' baseline")
    r.add_argument("--backend", default="auto", choices=("auto", "vllm", "hf"))
    r.add_argument("--out", required=True, help="output directory")
    r.set_defaults(func=_refine)

    a = sub.add_parser(
        "audit-judges",
        help="acceptance of deterministic corruptions by the verifier, a PRM and an LLM judge",
        description="From max-score traces (the pool's and/or canonical ones), make clean / answer-swap / consistent-swap / "
        "strategy-only / edge-deletion / truncation variants and report acceptance rates and deltas vs clean per scorer.",
    )
    a.add_argument("--pool", required=True, help="pool directory")
    a.add_argument("--prm", help="distilled PRM directory (calver train prm) or an HF sequence-classification model")
    a.add_argument("--prm-threshold", type=float, default=5.5, help="PRM accept threshold (predicted verifier total)")
    a.add_argument("--judge-model", help="LLM judge model (through the shared sampler)")
    a.add_argument("--judge-threshold", type=float, default=0.5, help="judge accept threshold on its [0, 1] score")
    a.add_argument("--judge-max-tokens", type=int, default=16)
    a.add_argument("--max-sources", type=int, help="audit only the first N source traces")
    a.add_argument("--sources", default="pool,canonical", help="comma-separated: pool (max-score correct candidates), canonical")
    a.add_argument("--backend", default="auto", choices=("auto", "vllm", "hf"))
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--draws", type=int, default=2000, help="bootstrap draws")
    a.add_argument("--out", required=True, help="output directory")
    a.set_defaults(func=_audit)

    o = sub.add_parser(
        "route",
        help="extract-or-verify router: threshold on graph agreement chosen on a dev split",
        description="Route each unit to consensus-graph extraction + exact solving (high agreement) or CALVER (low); the "
        "threshold is chosen on --pool (dev) and evaluated on --test-pool, or on a seeded by-source split of one pool.",
    )
    o.add_argument("--pool", required=True, help="development pool (or the single pool to split)")
    o.add_argument("--test-pool", help="test pool (default: split --pool by source_id)")
    o.add_argument("--dev-frac", type=float, default=0.5)
    o.add_argument("--split-seed", type=int, default=0)
    o.add_argument("--k", type=int, help="K-prefix")
    o.add_argument("--draws", type=int, default=2000, help="bootstrap draws")
    o.add_argument("--out", required=True, help="output directory")
    o.set_defaults(func=_route)


def _manifest_model(pool_dir: str) -> tuple[str | None, str | None]:
    from calver.infer.pool import Pool

    try:
        m = Pool(pool_dir).manifest()
    except Exception:  # noqa: BLE001
        return None, None
    model = m.get("model")
    model = model.get("path") if isinstance(model, dict) else model
    adapter = m.get("adapter")
    adapter = adapter.get("path") if isinstance(adapter, dict) else adapter
    return model, adapter


def _err(cmd: str, e: Exception) -> int:
    print(f"calver {cmd}: error: {e}", file=sys.stderr)
    return 2


def _refine(args) -> int:
    from calver.infer.refine.refine import load_refine_config, run_refine
    from calver.infer.sampler import make_sampler

    try:
        cfg = load_refine_config(args.config, rounds=args.rounds, revisions=args.revisions, k=args.k,
                                 max_tokens=args.max_tokens, baseline=False if args.no_baseline else None)
        model, adapter = _manifest_model(args.pool)
        model, adapter = args.model or model, args.adapter or adapter
        if not model:
            raise ValueError("no --model given and the pool manifest names none")
    except (ValueError, FileNotFoundError) as e:
        return _err("refine", e)
    with make_sampler(model, adapter, backend=args.backend) as sampler:
        res = run_refine(args.pool, sampler, cfg, args.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    from calver.infer.refine.refine import markdown

    print(markdown(res))
    return 0


def _audit(args) -> int:
    from calver.infer.refine.audit_judges import markdown, run_audit

    prm = judge = None
    if args.prm:
        from calver.infer.selectors import load_prm

        prm = load_prm(args.prm)
    if args.judge_model:
        from calver.infer.sampler import make_sampler

        judge = make_sampler(args.judge_model, backend=args.backend)
    try:
        res = run_audit(args.pool, prm=prm, prm_threshold=args.prm_threshold, judge_sampler=judge,
                        judge_threshold=args.judge_threshold, judge_max_tokens=args.judge_max_tokens,
                        max_sources=args.max_sources, sources=[s.strip() for s in args.sources.split(",") if s.strip()],
                        seed=args.seed, draws=args.draws, out=args.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if judge is not None:
            judge.close()
    print(markdown(res))
    return 0


def _route(args) -> int:
    from calver.infer.refine.router import markdown, run_route

    try:
        res = run_route(args.pool, args.test_pool, dev_frac=args.dev_frac, split_seed=args.split_seed, k=args.k,
                        draws=args.draws, out=args.out)
    except ValueError as e:
        return _err("route", e)
    print(markdown(res))
    return 0


# ---- small pools (tests, demos) -------------------------------------------------------------------
def sample_pool(problems: Sequence[Any], out: str | Path, model: str | Path, *, sampler=None, k: int = 4,
                max_tokens: int = 48, seeds: Sequence[int] = (0,), temperature: float = 0.8, backend: str = "hf",
                log=lambda m: None):
    """Write ``problems`` (labels = their meta) and sample a frozen K-candidate pool at ``out`` through
    ``calver sample``'s code path; an existing complete pool with the same manifest is reused as is."""
    from calver.infer.sample import run_sample
    from calver.infer.sample_config import SampleConfig

    out = Path(out)
    src = out.parent / f"{out.name}.problems.jsonl"
    src.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"problem": p.to_dict(), "labels": dict(p.meta)}, sort_keys=True, default=list) + "\n"
                   for p in problems)
    if not src.exists() or src.read_text() != text:
        src.write_text(text)
    cfg = SampleConfig(problems=str(src), out=str(out), model=str(model), k=k, seeds=list(seeds), max_tokens=max_tokens,
                       temperature=temperature, backend=backend, model_hash="none", batch_units=4)
    return run_sample(cfg, sampler=sampler, log=log)


def demo_problems(task: str = "backdoor_set", n_supplied: int = 1, n_sources: int = 2, seed: int = 7,
                  levels: Sequence[int] = (1, 2, 3)) -> list[Any]:
    """A small deterministic mix: ``n_supplied`` supplied-graph problems and ``n_sources`` sources
    rendered as constructed-mode L1/L2/L3 problems (the tiny-model pools of the tests)."""
    from calver.data_gen.generators import GenConfig, generate
    from calver.infer.refine.router import level_problems

    sup = generate(task, n_supplied, GenConfig(seed=seed + 1000)) if n_supplied else []
    return sup + level_problems(task, n_sources, seed=seed, levels=levels)


__all__ = ["add_commands", "demo_problems", "sample_pool"]
