"""Synthetic problem generators: one per registered task family, index-addressable and seeded.

``generate(task, n, cfg)`` returns ``n`` :class:`Problem` s; item ``idx`` is drawn from its own
``Random(f"calver-gen/{task}/{seed}/{idx}")`` and is the same whatever else is generated. Each
attempt draws a graph (with planted structure where a family needs it), proposes queries, and
enumerates the family's validity class; it retries deterministically (within the item's rng) up to
``cfg.max_attempts`` until the class is non-empty (and, with ``cfg.many_satisfier``, has at least
``cfg.min_valid`` members). Every problem carries its validity class in ``meta`` (a label: the
infer firewall strips ``meta`` before selection).

``canonical_trace(problem, style)`` writes a six-slot trace for a valid answer: by default drawn at random
(seeded by the problem id) from the class, so SFT data does not teach one canonical answer.

A family module registers its generator with :func:`register_generator` (a :class:`FamilySpec` for
the generic graph loop above, or its own item function); :data:`GENERATORS` is the one table.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterator

import calver
from calver.data_gen import graphs as G
from calver.data_gen.gen_config import ConfigError, GenConfig
from calver.data_gen.generators.families import (
    QUERIES_PER_GRAPH,
    SPECS,
    FamilySpec,
    choose_class,
    plain_graph,
    task_variants,
)
from calver.data_gen.names import node_names
from calver.data_gen.prompts import graph_line_order, problem_text, prompt_encoding, slot_graph
from calver.data_gen.trace_style import ANSWER_CHOICES, TraceStyle
from calver.verifier.budget import TooLargeToGrade
from calver.verifier.formats.common import RenderOrder
from calver.verifier.problem import Problem
from calver.verifier.registry import get_family

__all__ = [
    "GENERATORS", "SPECS", "FamilySpec", "ConfigError", "GenConfig", "available_tasks", "canonical_answer",
    "canonical_trace", "class_from_json", "class_to_json", "generate", "generate_item", "get_generator",
    "item_rng", "iter_generate", "plain_graph", "register_generator", "unregister_generator", "validity_class",
    "validity_objects", "resolve_tasks",
]

Generator = Callable[[int, GenConfig], "Problem | None"]


def item_rng(task: str, seed: int, idx: int) -> random.Random:
    """The rng of item ``idx``: independent of every other item (str seeds hash via SHA-512)."""
    return random.Random(f"calver-gen/{task}/{seed}/{idx}")


def validity_class(task: str, g: Any, query: dict[str, Any], limit: int | None = None) -> list[Any]:
    """The validity class of a normalized ``query`` on ``g``: the family's own enumeration
    (``family.validity_class``; node-set families test each subset with their boolean
    ``is_base_valid`` primitive, no feedback sentence built)."""
    return get_family(task).validity_class(g, query, limit=limit)


# ---- validity classes as JSON (each family's own object_to_json / object_from_json) ------------
def class_to_json(task: str, objs: list[Any]) -> list[Any]:
    """Validity-class members as JSON (``meta.validity_class``): sets sorted, tuples as lists."""
    fam = get_family(task)
    return [fam.object_to_json(o) for o in objs]


def class_from_json(task: str, items: list[Any]) -> list[Any]:
    """Validity-class members as the family's answer objects (inverse of :func:`class_to_json`):
    sets for set families, (nested) tuples for paths and cycles."""
    fam = get_family(task)
    return [fam.object_from_json(i) for i in items]


def validity_objects(problem: Problem) -> list[Any]:
    if "validity_class" not in problem.meta:
        raise ValueError(f"problem {problem.id!r} carries no validity_class in meta")
    return class_from_json(problem.task, problem.meta["validity_class"])


# ---- the generic item loop -----------------------------------------------------------------
def _generate_graph_item(task: str, spec: FamilySpec, idx: int, cfg: GenConfig) -> Problem | None:
    fam = get_family(task)
    rng = item_rng(task, cfg.seed, idx)
    variants = task_variants(task, cfg)
    # many_satisfier applies where a query may have several valid objects under some drawn variant
    applicable = fam.many_answers and not all(v in fam.single_answer_variants for v in variants)
    need = cfg.min_valid if (cfg.many_satisfier and applicable) else 1
    limit = cfg.max_class if fam.large_class else None
    for attempt in range(1, cfg.max_attempts + 1):
        n = rng.randint(*cfg.n_nodes)
        kind = choose_class(task, cfg, rng, spec.default_class)
        variant = rng.choice(variants)
        built = spec.build(rng, cfg, n, kind)
        if built is None:
            continue
        sk, planted_idx = built
        naming = draw(cfg.naming, rng)
        names = node_names(sk.n, naming, rng)
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
            encoding = draw(cfg.encoding, rng)
            pid = f"{task}-{cfg.seed}-{idx}"
            meta = {
                "source": "generated",
                "validity_class": class_to_json(task, objs),
                "n_valid": len(objs),
                "validity_class_truncated": truncated,
                "many_satisfier": (len(objs) >= cfg.min_valid) if applicable else None,
                "encoding": encoding,
                "naming": naming,
                "generator": generator_meta(task, idx, cfg, attempt),
            }
            return Problem(task=task, query=query, graph=g, text=styled_text(task, g, qn, encoding, cfg, rng, meta),
                           id=pid, source_id=pid, meta=meta)
    return None


def draw(options: tuple[str, ...], rng: random.Random) -> str:
    """One of a config's per-item options; a single option reads no randomness, so a config that names one
    generates what it did before the field became a list."""
    return options[0] if len(options) == 1 else rng.choice(options)


def styled_text(task: str, g, query, encoding: str, cfg: GenConfig, rng: random.Random, meta: dict) -> str:
    """The user text in a drawn wording, with or without its header (recorded in ``meta`` when drawn). The rng
    is read only where the config asks for a choice, so default configs generate what they always did."""
    from calver.data_gen.wordings import question

    text = get_family(task).question_text(query)
    if cfg.wording != ("calver",):
        wording = draw(cfg.wording, rng)
        text = question(task, g, query, text, wording)
        meta["wording"] = wording
    header = True
    if cfg.headerless > 0:
        header = rng.random() >= cfg.headerless
        meta["header"] = header
    order = None
    if cfg.shuffle_order > 0 and rng.random() < cfg.shuffle_order:
        order = RenderOrder(*(tuple(rng.sample(sorted(items), len(items)))
                              for items in (g.nodes, g.directed, g.bidirected)))
        meta["render_order"] = {"nodes": list(order.nodes), "directed": [list(e) for e in order.directed],
                                "bidirected": [list(e) for e in order.bidirected]}
    return problem_text(g, text, encoding, header=header, order=order)


def generator_meta(task: str, idx: int, cfg: GenConfig, attempt: int | None = None) -> dict[str, Any]:
    out = {"name": "calver.data_gen", "version": calver.__version__, "task": task, "seed": cfg.seed,
           "idx": idx, "config": cfg.to_dict()}
    if attempt is not None:
        out["attempt"] = attempt
    return out


# ---- the one generator registry --------------------------------------------------------------
GENERATORS: dict[str, Generator] = {}  # task -> item generator (register_generator fills it)


def _graph_generator(task: str, spec: FamilySpec) -> Generator:
    def gen(idx: int, cfg: GenConfig) -> Problem | None:
        return _generate_graph_item(task, spec, idx, cfg)

    gen.__name__ = f"generate_{task}"
    gen.__doc__ = f"Item ``idx`` of task {task!r} under ``cfg`` (None if every attempt failed)."
    return gen


def _item_generator(task: str, make: Callable[[int, GenConfig], "Problem | None"]) -> Generator:
    """``make``'s problems completed: id and source id, generator provenance, the validity class
    (enumerated by the family when ``make`` stored none) and the breakdown fields ``source``
    (default ``"generated"``) and ``encoding`` (read off the prompt when ``make`` set none)."""

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
                meta["validity_class"] = class_to_json(task, objs)
        if "validity_class" in meta:
            meta.setdefault("n_valid", len(meta["validity_class"]))
        if "generator" in meta and not isinstance(meta["generator"], dict):
            meta["generator_module"] = meta.pop("generator")
        meta.setdefault("generator", generator_meta(task, idx, cfg))
        meta.setdefault("source", "generated")
        if "encoding" not in meta:
            enc = prompt_encoding(p)
            if enc is not None:
                meta["encoding"] = enc
        p.meta = meta
        return p

    gen.__name__ = f"generate_{task}"
    return gen


def register_generator(task: str, source: "FamilySpec | Callable[[int, GenConfig], Problem | None]", *,
                       replace: bool = False) -> Generator:
    """Register the generator of ``task`` (a registered task family); returns it.

    ``source`` is a :class:`FamilySpec` (the generic graph loop: seeded graph draws, query proposals,
    the family's validity class, many_satisfier, the class cap) or a callable ``(idx, cfg) -> Problem
    | None`` whose problems get ids, provenance and the validity class filled in. A task registered
    twice is an error unless ``replace``."""
    if task in GENERATORS and not replace:
        raise ValueError(f"task {task!r} already has a generator (pass replace=True to swap it)")
    if isinstance(source, FamilySpec):
        gen = _graph_generator(task, source)
    elif callable(source):
        gen = _item_generator(task, source)
    else:
        raise TypeError(f"a generator is a FamilySpec or a callable (idx, cfg), not {type(source).__name__}")
    GENERATORS[task] = gen
    return gen


def unregister_generator(task: str) -> None:
    """Remove ``task``'s generator (tests that register a temporary family); KeyError if absent."""
    try:
        del GENERATORS[task]
    except KeyError:
        raise KeyError(f"no generator for task {task!r}") from None


def _ate(idx: int, cfg: GenConfig) -> Problem:
    from calver.data_gen.ate import generate_ate  # imported on first use: import calver.data_gen stays cheap

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


for _task, _spec in SPECS.items():
    register_generator(_task, _spec)
register_generator("ate_threshold", _ate)
register_generator("knights_knaves", _kk)


def available_tasks() -> list[str]:
    """Tasks with a registered generator."""
    return sorted(GENERATORS)


def resolve_tasks(tasks: tuple[str, ...] | list[str]) -> list[str]:
    """``tasks`` in order without repeats (``all``: every generator's task); ConfigError naming unknown ones."""
    avail = available_tasks()
    if "all" in tasks:
        return avail
    unknown = [t for t in tasks if t not in avail]
    if unknown:
        raise ConfigError(f"field 'tasks': no generator for {', '.join(unknown)}; available: {', '.join(avail)}")
    return list(dict.fromkeys(tasks))


def get_generator(task: str) -> Generator:
    try:
        return GENERATORS[task]
    except KeyError:
        raise KeyError(f"no generator for task {task!r}; available: {', '.join(sorted(GENERATORS))}") from None


def generate_item(task: str, idx: int, cfg: GenConfig) -> Problem | None:
    return get_generator(task)(idx, cfg)


def iter_generate(task: str, n: int, cfg: GenConfig, start: int = 0) -> Iterator[Problem]:
    """Items ``start, start+1, ...`` (skipping any whose attempts all failed) until ``n`` are out."""
    gen = get_generator(task)  # a graph generator raises ConfigError on a bad 'variants' at its first item
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


def canonical_answer(problem: Problem, answers: str = "random") -> Any:
    """A valid answer for the problem's canonical trace.

    ``answers="random"``: drawn (seeded by the problem id) from the validity class, so SFT data
    covers the class. ``"rule"``: the family's local rule (:meth:`TaskFamily.rule_object`, e.g. the
    treatment's parents) when it gives a valid answer, else the random draw: a rule is what a small
    policy can learn to apply from the prompt, a draw from the class is not.
    """
    if answers not in ANSWER_CHOICES:
        raise ValueError(f"answers must be one of {ANSWER_CHOICES}, got {answers!r}")
    if answers == "rule":
        obj = get_family(problem.task).rule_object(problem)
        if obj is not None:
            return obj
    objs = validity_objects(problem)
    if not objs:
        raise ValueError(f"problem {problem.id!r} has an empty validity class")
    return random.Random(f"calver-trace/{problem.id}").choice(objs)


def canonical_trace(problem: Problem, style: TraceStyle = TraceStyle()) -> str:
    """A six-slot trace that scores 6 by construction, for a valid answer, written in ``style``
    (:class:`~calver.data_gen.trace_style.TraceStyle`: its answers, witness cap, rationale and GRAPH slot)."""
    from calver.data_gen.rationales import rule_rationale, with_rationale

    obj = canonical_answer(problem, style.answers)
    # the GRAPH slot copies the graph as the prompt lists it (a matrix row by row; None: sorted, as always)
    shown = slot_graph(problem, style.graph_slot)
    trace = get_family(problem.task).canonical_trace(problem, obj, witnesses=style.witnesses,
                                                     order=graph_line_order(problem), graph_text=shown)
    if style.rationale == "none":
        return trace
    return with_rationale(trace, rule_rationale(problem, obj, style.rationale,
                                                cue_first=style.graph_slot == "cue_first"))
