"""Per-family structure for the synthetic generator: how each family draws its graph (planting
structure where it needs it) and proposes queries with a nontrivial validity class.

``build(rng, cfg, n, kind) -> (Skeleton, planted)`` draws an integer-node graph (``planted`` maps
roles such as ``x``/``y`` to node indices); ``propose(rng, g, planted, variant, cfg)`` yields
candidate queries on the named graph, best first.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Iterator

from calver.data_gen import graphs as G
from calver.data_gen.gen_config import ConfigError, GenConfig
from calver.verifier.contract import format_path
from calver.verifier.graph import CausalGraph
from calver.verifier.registry import get_family

QUERIES_PER_GRAPH = 4  # queries tried on one drawn graph before drawing another


def choose_class(task: str, cfg: GenConfig, rng: random.Random, default: str | None = None) -> str:
    """The graph class of one attempt: one of ``cfg.graph_class`` the family takes, else ``default``
    (the spec's), else ADMG when latents are asked for and DAG otherwise."""
    allowed = [c.value for c in get_family(task).graph_classes]
    if cfg.graph_class is None:
        return default or ("ADMG" if cfg.latent > 0 else "DAG")
    usable = [c for c in cfg.graph_class if c in allowed]
    if not usable:
        raise ConfigError(f"field 'graph_class': task {task!r} takes {allowed}, got {list(cfg.graph_class)}")
    return usable[0] if len(usable) == 1 else rng.choice(usable)


def task_variants(task: str, cfg: GenConfig) -> tuple[str, ...]:
    fam = get_family(task)
    if cfg.variants is not None:
        usable = tuple(v for v in cfg.variants if v in fam.variants)
        if not usable:
            raise ConfigError(f"field 'variants': task {task!r} has variants {list(fam.variants)}, "
                              f"got {list(cfg.variants)}")
        return usable
    out = tuple(fam.variants)
    if cfg.many_satisfier:
        out = tuple(v for v in out if v not in fam.single_answer_variants) or out
    return out


def plain_graph(rng: random.Random, cfg: GenConfig, n: int, kind: str) -> tuple[G.Skeleton, dict]:
    """``build`` for a family that needs no planted structure: a random graph of class ``kind``."""
    return G.random_skeleton(rng, n, cfg.density, kind, cfg.latent), {}


def _frontdoor(rng, cfg, n, kind) -> tuple[G.Skeleton, dict] | None:
    """Plant X -> M.. -> Y (a chain or parallel mediators) with X <-> Y (ADMG) or an observed
    confounder U -> X, U -> Y (DAG); no direct X -> Y edge."""
    if n < (4 if kind == "DAG" else 3):
        return None  # no room for U, X, M, Y: the attempt fails
    sk = G.random_dag(rng, n, cfg.density)
    k = rng.randint(1, min(3, n - (3 if kind == "DAG" else 2)))
    pos = sorted(rng.sample(range(n), k + (3 if kind == "DAG" else 2)))
    if kind == "DAG":
        u, x, ms, y = pos[0], pos[1], pos[2:-1], pos[-1]
        sk.directed |= {(u, x), (u, y)}
    else:
        x, ms, y = pos[0], pos[1:-1], pos[-1]
    sk.directed.discard((x, y))
    if rng.random() < 0.5:
        chain = [x, *ms, y]
        sk.directed |= set(zip(chain, chain[1:]))
    else:
        sk.directed |= {(x, m) for m in ms} | {(m, y) for m in ms}
    if kind == "ADMG":
        sk.add_bidirected(x, y)
        forbid = {(min(a, b), max(a, b)) for m in ms for a, b in ((x, m), (m, y))}
        G.add_latents(rng, sk, cfg.latent, forbid=forbid)
    return sk, {"x": x, "y": y}


def _mediator(rng, cfg, n, kind) -> tuple[G.Skeleton, dict]:
    """Plant 1-3 mediators between X and Y (one-hop X -> M -> Y, or a chain)."""
    sk = G.random_skeleton(rng, n, cfg.density, kind, cfg.latent)
    k = rng.randint(1, min(3, n - 2))
    pos = sorted(rng.sample(range(n), k + 2))
    x, ms, y = pos[0], pos[1:-1], pos[-1]
    if rng.random() < 0.7:
        sk.directed |= {(x, m) for m in ms} | {(m, y) for m in ms}
    else:
        chain = [x, *ms, y]
        sk.directed |= set(zip(chain, chain[1:]))
    return sk, {"x": x, "y": y}


def _cycle(rng, cfg, n, kind) -> tuple[G.Skeleton, dict]:
    sk = G.random_dag(rng, n, cfg.density)
    G.plant_cycles(rng, sk, rng.randint(1, 3))
    return sk, {}


# ---- query proposals ----------------------------------------------------------------------
def _shuffled(rng: random.Random, items: list) -> list:
    items = list(items)
    rng.shuffle(items)
    return items


def _q_backdoor(rng, g: CausalGraph, planted, variant, cfg) -> Iterator[dict]:
    from calver.verifier.primitives import descendants, is_separated

    for x in _shuffled(rng, g.nodes):
        de = descendants(g, x)
        ys = [y for y in sorted(de) if y != x]
        if not ys or len(g) - 1 - len(de) > cfg.max_candidates:
            continue
        y = rng.choice(ys)
        if not is_separated(g, {x}, {y}, (), remove_outgoing_of={x}):  # a backdoor path exists
            yield {"treatment": x, "outcome": y, "variant": variant}


def _q_frontdoor(rng, g, planted, variant, cfg) -> Iterator[dict]:
    if len(g) - 2 <= cfg.max_candidates:
        yield {"treatment": planted["x"], "outcome": planted["y"], "variant": variant}


def _adjacent(g: CausalGraph, a: str, b: str) -> bool:
    return g.has_edge(a, b) or g.has_edge(b, a) or g.has_edge(a, b, "<->")


def _q_separation(rng, g, planted, variant, cfg) -> Iterator[dict]:
    """Non-adjacent pairs; pairs d-/m-connected given nothing first (tested lazily)."""
    from calver.verifier.primitives import is_separated

    if len(g) - 2 > cfg.max_candidates:
        return
    pairs = _shuffled(rng, [(a, b) for i, a in enumerate(g.nodes) for b in g.nodes[i + 1:] if not _adjacent(g, a, b)])
    deferred = []
    for a, b in pairs:
        if is_separated(g, {a}, {b}, ()):
            deferred.append((a, b))
            continue
        yield _sep_query(rng, a, b, variant)
    for a, b in deferred:
        yield _sep_query(rng, a, b, variant)


def _sep_query(rng, a: str, b: str, variant: str) -> dict:
    if rng.random() < 0.5:
        a, b = b, a
    return {"x": [a], "y": [b], "variant": variant}


def _neighbours(g: CausalGraph, node: str) -> list[tuple[str, str]]:
    return ([(c, "->") for c in sorted(g.children(node))] + [(p, "<-") for p in sorted(g.parents(node))]
            + [(s, "<->") for s in sorted(g.siblings(node))])


def _q_blocking(rng, g, planted, variant, cfg) -> Iterator[dict]:
    if len(g) - 2 > cfg.max_candidates:
        return
    for _ in range(3 * QUERIES_PER_GRAPH):
        nodes, types = [rng.choice(g.nodes)], []
        target = rng.randint(2, 4)
        while len(types) < target:
            options = [(nb, t) for nb, t in _neighbours(g, nodes[-1]) if nb not in nodes]
            if not options:
                break
            nb, t = rng.choice(options)
            nodes.append(nb)
            types.append(t)
        if len(nodes) >= 3:
            yield {"path": format_path(nodes, types), "variant": variant}


def _q_cycle(rng, g, planted, variant, cfg) -> Iterator[dict]:
    yield {"variant": variant}


def _q_mediator(rng, g, planted, variant, cfg) -> Iterator[dict]:
    yield {"treatment": planted["x"], "outcome": planted["y"], "variant": variant}


def _q_intervention(rng, g, planted, variant, cfg) -> Iterator[dict]:
    """Balanced yes/no: the wanted decision is drawn first, then (do, source, target) is searched
    among pairs where source reaches target before the intervention (so 'no' is never trivial)."""
    from calver.verifier.primitives import descendants, mediators, reachable_after_do

    want = rng.random() < 0.5
    pairs = [(s, t) for s in g.nodes for t in sorted(descendants(g, s)) if t != s]
    for s, t in _shuffled(rng, pairs)[: 4 * QUERIES_PER_GRAPH]:
        on_path = sorted(mediators(g, s, t)) if g.acyclic else sorted(n for n in g.nodes if n not in (s, t))
        others = [n for n in g.nodes if n not in (s, t)]
        pool = on_path if on_path and (not want or rng.random() < 0.7) else others
        if not pool:
            continue
        for _ in range(3):
            do = sorted(rng.sample(pool, min(len(pool), rng.randint(1, 2))))
            if reachable_after_do(g, do, s, t) == want:
                yield {"do": do, "source": s, "target": t}
                break


def _q_path(rng, g, planted, variant, cfg) -> Iterator[dict]:
    """Distinct, preferably non-adjacent, pairs joined by some path of the skeleton."""
    from calver.verifier.tasks.paths import shortest_path_length

    pairs = [(a, b) for a in g.nodes for b in g.nodes if a != b]
    pairs = _shuffled(rng, pairs)
    pairs.sort(key=lambda p: _adjacent(g, *p))  # non-adjacent first (stable: still shuffled)
    for a, b in pairs[: 3 * QUERIES_PER_GRAPH]:
        if shortest_path_length(g, a, b) is not None:
            yield {"source": a, "target": b, "variant": variant}


def _q_backdoor_path(rng, g, planted, variant, cfg) -> Iterator[dict]:
    """Treatments with an arrowhead into them; outcomes (descendants first) reached by a backdoor path."""
    from calver.verifier.primitives import descendants
    from calver.verifier.tasks.paths import shortest_path_length

    xs = _shuffled(rng, [x for x in g.nodes if g.parents(x) or g.siblings(x)])
    for x in xs[:QUERIES_PER_GRAPH]:
        de = descendants(g, x)
        ys = _shuffled(rng, [y for y in g.nodes if y != x])
        ys.sort(key=lambda y: y not in de)
        for y in ys[:3]:
            if shortest_path_length(g, x, y, backdoor=True) is not None:
                yield {"treatment": x, "outcome": y, "variant": variant}
                break


@dataclass(frozen=True)
class FamilySpec:
    """How the generic graph generator draws one family's items: ``build`` and ``propose`` as in the
    module doc; ``default_class``: the graph class when the config names none (None: ADMG with
    latents, else DAG)."""

    build: Callable[..., tuple[G.Skeleton, dict] | None]
    propose: Callable[..., Iterator[dict]]
    default_class: str | None = None


# The built-in graph families (registered by calver.data_gen.generators).
SPECS: dict[str, FamilySpec] = {
    "backdoor_set": FamilySpec(plain_graph, _q_backdoor),
    "frontdoor_set": FamilySpec(_frontdoor, _q_frontdoor, default_class="ADMG"),
    "separation_set": FamilySpec(plain_graph, _q_separation),
    "blocking_set": FamilySpec(plain_graph, _q_blocking),
    "cycle_witness": FamilySpec(_cycle, _q_cycle, default_class="directed"),
    "mediator": FamilySpec(_mediator, _q_mediator),
    "intervention_reachability": FamilySpec(plain_graph, _q_intervention),
    "path": FamilySpec(plain_graph, _q_path),
    "backdoor_path": FamilySpec(plain_graph, _q_backdoor_path),
}
