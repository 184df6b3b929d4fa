"""Small deterministic problem sets and pools for the refinement / router / judge-audit experiments
and their tests: :func:`level_problems`, :func:`demo_problems`, and :func:`sample_pool`, which writes
problems and samples a pool through ``calver sample``'s own code path (``run_sample``), reusing an
existing complete pool with the same manifest.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from calver.verifier import Problem


def level_problems(task: str, n_sources: int, seed: int = 0, levels: Sequence[int] = (1, 2, 3),
                   all_levels: bool = True, **gen: Any) -> list[Problem]:
    """Constructed-mode problems of ``task`` rendered at each level
    (:func:`calver.data_gen.text_levels.constructed_problems`, round-trip filtered); ``all_levels``
    keeps only sources admitted at every level. Ids end in ``-L<level>``; source ids are shared."""
    from calver.data_gen.generators import GenConfig, generate
    from calver.data_gen.text_levels import constructed_problems

    base = generate(task, n_sources, GenConfig(seed=seed, **gen))
    by_level = {lv: constructed_problems(base, lv, random.Random(f"{seed}:{lv}"))[0] for lv in levels}
    keep = set.intersection(*({p.source_id for p in ps} for ps in by_level.values())) if all_levels else None
    return [p for lv in levels for p in by_level[lv] if keep is None or p.source_id in keep]


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

    sup = generate(task, n_supplied, GenConfig(seed=seed + 1000)) if n_supplied else []
    return sup + level_problems(task, n_sources, seed=seed, levels=levels)


__all__ = ["demo_problems", "level_problems", "sample_pool"]
