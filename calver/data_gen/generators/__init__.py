"""Synthetic problem generators: one per registered task family, index-addressable and seeded.

``generate(task, n, cfg)`` returns ``n`` :class:`Problem` s; item ``idx`` is drawn from its own
``Random(f"calver-gen/{task}/{seed}/{idx}")`` and is the same whatever else is generated. Each
attempt draws a graph (with planted structure where a family needs it), proposes queries, and
enumerates the family's validity class; it retries deterministically (within the item's rng) up to
``cfg.max_attempts`` until the class is non-empty (and, with ``cfg.many_satisfier``, has at least
``cfg.min_valid`` members). Every problem carries its validity class in ``meta`` (a label: the
infer firewall strips ``meta`` before selection).

``canonical_trace(problem)`` writes a six-slot trace for a valid answer drawn at random (seeded by
the problem id) from the class, so SFT data does not teach one canonical answer.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any, Callable, Iterator

import calver
from calver.data_gen import graphs as G
from calver.data_gen.gen_config import ConfigError, GenConfig
from calver.data_gen.generators.families import (
    QUERIES_PER_GRAPH,
    SINGLE_ANSWER_VARIANTS,
    SPECS,
    FamilySpec,
    choose_class,
    task_variants,
)
from calver.data_gen.names import node_names
from calver.data_gen.prompts import problem_text
from calver.verifier.problem import Problem
from calver.verifier.registry import get_family
from calver.verifier.tasks.paths import TooLargeToGrade

__all__ = [
    "GENERATORS", "SPECS", "FamilySpec", "ConfigError", "GenConfig", "available_tasks", "canonical_answer",
    "canonical_trace", "class_from_json", "class_to_json", "generate", "generate_item", "get_generator",
    "item_rng", "iter_generate", "validity_class", "validity_objects",
]

Generator = Callable[[int, GenConfig], "Problem | None"]


def item_rng(task: str, seed: int, idx: int) -> random.Random:
    """The rng of item ``idx``: independent of every other item (str seeds hash via SHA-512)."""
    return random.Random(f"calver-gen/{task}/{seed}/{idx}")


def validity_class(task: str, g: Any, query: dict[str, Any], limit: int | None = None) -> list[Any]:
    """The validity class of a normalized ``query`` on ``g``: the family's own enumeration
    (``family.validity_class``; node-set families test each subset with their boolean
    ``is_base_valid`` primitive, no feedback sentence built)."""
    fam = get_family(task)
    return fam.validity_class(g, query, limit=limit) if limit is not None else fam.validity_class(g, query)


# ---- validity classes as JSON --------------------------------------------------------------
def class_to_json(objs: list[Any]) -> list[Any]:
    out = []
    for o in objs:
        if isinstance(o, (set, frozenset)):
            out.append(sorted(o))
        elif isinstance(o, tuple):
            out.append([list(v) if isinstance(v, tuple) else v for v in o])
        else:
            out.append(o)
    return out


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x


def class_from_json(task: str, items: list[Any]) -> list[Any]:
    """Validity-class members as the family's answer objects (inverse of :func:`class_to_json`):
    sets for set families, (nested) tuples for paths and cycles."""
    kind = get_family(task).answer_type
    if kind == "set":
        return [frozenset(i) for i in items]
    if kind == "path":
        return [_tuplify(i) for i in items]
    return list(items)


def validity_objects(problem: Problem) -> list[Any]:
    if "validity_class" not in problem.meta:
        raise ValueError(f"problem {problem.id!r} carries no validity_class in meta")
    return class_from_json(problem.task, problem.meta["validity_class"])


# ---- the generic item loop -----------------------------------------------------------------
def _generate_graph_item(task: str, idx: int, cfg: GenConfig) -> Problem | None:
    spec = SPECS[task]
    fam = get_family(task)
    rng = item_rng(task, cfg.seed, idx)
    variants = task_variants(task, cfg)
    applicable = fam.answer_type in ("set", "path") and not all((task, v) in SINGLE_ANSWER_VARIANTS for v in variants)
    need = cfg.min_valid if (cfg.many_satisfier and applicable) else 1
    limit = cfg.max_class if fam.answer_type == "path" else None  # path/cycle classes can explode
    for attempt in range(1, cfg.max_attempts + 1):
        n = rng.randint(*cfg.n_nodes)
        kind = choose_class(task, cfg, rng)
        variant = rng.choice(variants)
        built = spec.build(rng, cfg, n, kind)
        if built is None:
            continue
        sk, planted_idx = built
        names = node_names(sk.n, cfg.naming, rng)
        g = G.label(sk, names)
        planted = {k: names[v] for k, v in planted_idx.items()}
        for q_i, query in enumerate(spec.propose(rng, g, planted, variant, cfg)):
            if q_i >= QUERIES_PER_GRAPH:
                break
            probe = Problem(task=task, query=query, graph=g)
            qn = fam.normalize_query(probe)
            try:
                objs = validity_class(task, g, qn, limit=limit + 1 if limit else None)
            except TooLargeToGrade:  # a longest-path class past the exact search's work limit
                continue
            truncated = bool(limit and len(objs) > limit)
            objs = objs[:limit] if truncated else objs
            if len(objs) < need:
                continue
            encoding = cfg.encoding[0] if len(cfg.encoding) == 1 else rng.choice(cfg.encoding)
            pid = f"{task}-{cfg.seed}-{idx}"
            meta = {
                "validity_class": class_to_json(objs),
                "n_valid": len(objs),
                "validity_class_truncated": truncated,
                "many_satisfier": (len(objs) >= cfg.min_valid) if applicable else None,
                "encoding": encoding,
                "naming": cfg.naming,
                "generator": generator_meta(task, idx, cfg, attempt),
            }
            return Problem(task=task, query=query, graph=g, text=problem_text(g, fam.question_text(qn), encoding),
                           id=pid, source_id=pid, meta=meta)
    return None


def generator_meta(task: str, idx: int, cfg: GenConfig, attempt: int | None = None) -> dict[str, Any]:
    out = {"name": "calver.data_gen", "version": calver.__version__, "task": task, "seed": cfg.seed,
           "idx": idx, "config": cfg.to_dict()}
    if attempt is not None:
        out["attempt"] = attempt
    return out


def _graph_generator(task: str) -> Generator:
    def gen(idx: int, cfg: GenConfig) -> Problem | None:
        return _generate_graph_item(task, idx, cfg)

    gen.__name__ = f"generate_{task}"
    gen.__doc__ = f"Item ``idx`` of task {task!r} under ``cfg`` (None if every attempt failed)."
    return gen


GENERATORS: dict[str, Generator] = {task: _graph_generator(task) for task in SPECS}


# ---- families generated elsewhere (imported lazily) -----------------------------------------
def _wrap_external(task: str, make: Callable[[int, GenConfig], Problem]) -> Generator:
    def gen(idx: int, cfg: GenConfig) -> Problem | None:
        p = make(idx, cfg)
        if p is None:
            return None
        fam = get_family(task)
        if not p.id:
            p.id = f"{task}-{cfg.seed}-{idx}"
        if not p.source_id:
            p.source_id = p.id
        meta = dict(p.meta)
        if "validity_class" not in meta:
            try:
                g = fam.verification_object(p)
                objs = fam.validity_class(g, fam.normalize_query(p))
            except NotImplementedError:
                objs = None
            if objs is not None:
                meta["validity_class"] = class_to_json(objs)
        if "validity_class" in meta:
            meta.setdefault("n_valid", len(meta["validity_class"]))
        if "generator" in meta and not isinstance(meta["generator"], dict):
            meta["generator_module"] = meta.pop("generator")
        meta.setdefault("generator", generator_meta(task, idx, cfg))
        p.meta = meta
        return p

    gen.__name__ = f"generate_{task}"
    return gen


def _ate(idx: int, cfg: GenConfig) -> Problem:
    from calver.data_gen.ate import generate_ate

    opts = dict(cfg.extra.get("ate_threshold", {}))
    opts.setdefault("n_nodes", item_rng("ate_threshold", cfg.seed, idx).randint(*cfg.n_nodes))
    return generate_ate(idx, cfg.seed, **opts)


def _kk(idx: int, cfg: GenConfig) -> Problem:
    from calver.data_gen.knights import generate_kk

    opts = dict(cfg.extra.get("knights_knaves", {}))
    n_people = opts.pop("n_people", None)
    if n_people is None:
        n_people = item_rng("knights_knaves", cfg.seed, idx).randint(2, 4)
    return generate_kk(n_people, idx, cfg.seed, **opts)


EXTERNAL: dict[str, tuple[str, Callable[[int, GenConfig], Problem]]] = {
    "ate_threshold": ("calver.data_gen.ate", _ate),
    "knights_knaves": ("calver.data_gen.knights", _kk),
}


def _load_external() -> None:
    from calver.verifier.registry import families

    registered = families()
    for task, (module, make) in EXTERNAL.items():
        if task in GENERATORS or task not in registered:
            continue
        try:
            if importlib.util.find_spec(module) is None:
                continue
        except ImportError:
            continue
        GENERATORS[task] = _wrap_external(task, make)


def available_tasks() -> list[str]:
    """Tasks with a generator: the built-in graph families plus ATE / K&K when they are present."""
    _load_external()
    return sorted(GENERATORS)


def get_generator(task: str) -> Generator:
    _load_external()
    try:
        return GENERATORS[task]
    except KeyError:
        raise KeyError(f"no generator for task {task!r}; available: {', '.join(sorted(GENERATORS))}") from None


def generate_item(task: str, idx: int, cfg: GenConfig) -> Problem | None:
    return get_generator(task)(idx, cfg)


def iter_generate(task: str, n: int, cfg: GenConfig, start: int = 0) -> Iterator[Problem]:
    """Items ``start, start+1, ...`` (skipping any whose attempts all failed) until ``n`` are out."""
    gen = get_generator(task)
    if task in SPECS:
        task_variants(task, cfg)  # fail fast on a bad 'variants'
    made, idx, misses = 0, start, 0
    while made < n:
        p = gen(idx, cfg)
        idx += 1
        if p is None:
            misses += 1
            if misses > max(20, n // 2):
                raise RuntimeError(f"{task}: {misses} items failed all {cfg.max_attempts} attempts; relax the "
                                   "config (more nodes, higher density, no many_satisfier) or raise max_attempts")
            continue
        made += 1
        yield p


def generate(task: str, n: int, cfg: GenConfig, start: int = 0) -> list[Problem]:
    """``n`` problems of ``task`` (ids ``{task}-{seed}-{idx}``)."""
    return list(iter_generate(task, n, cfg, start))


# ---- canonical traces ----------------------------------------------------------------------
def canonical_answer(problem: Problem) -> Any:
    """A valid answer drawn (seeded by the problem id) from the problem's validity class."""
    objs = validity_objects(problem)
    if not objs:
        raise ValueError(f"problem {problem.id!r} has an empty validity class")
    return random.Random(f"calver-trace/{problem.id}").choice(objs)


def canonical_trace(problem: Problem) -> str:
    """A six-slot trace that scores 6 by construction, for a randomly chosen valid answer."""
    return get_family(problem.task).canonical_trace(problem, canonical_answer(problem))
