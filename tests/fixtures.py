"""The tests' one fixtures module: problems from the project's own seeded generators
(``calver.data_gen`` with small ``GenConfig`` s), synthetic K-candidate pools built from them, and small
independent random-graph builders that oracle tests need (graphs no generator planted anything in).

Trace perturbations (``replace_slot``, ``rename_nodes`` ...) are the evaluation package's audit functions:
import them from ``calver.evaluation.audits``, there is one implementation.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from calver.data_gen import GenConfig, generate_item
from calver.data_gen.generators import iter_generate, validity_objects
from calver.infer.pool import Pool
from calver.verifier import CausalGraph, GraphClass, Problem, get_family, grade

SET_TASKS = ("backdoor_set", "frontdoor_set", "separation_set", "blocking_set", "mediator")
GRAPH_TASKS = SET_TASKS + ("cycle_witness", "intervention_reachability", "path", "backdoor_path")


# ---- independent random graphs (oracle tests) ---------------------------------------------------
def random_dag(rng: random.Random, n: int, p: float = 0.35, prefix: str = "V") -> CausalGraph:
    names = [f"{prefix}{i}" for i in range(n)]
    rng.shuffle(names)
    edges = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return CausalGraph.build(names, edges, (), GraphClass.DAG)


def random_admg(rng: random.Random, n: int, p: float = 0.3, pb: float = 0.15) -> CausalGraph:
    dag = random_dag(rng, n, p)
    nodes = list(dag.nodes)
    bi = [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :] if rng.random() < pb]
    return CausalGraph.build(nodes, dag.directed, bi, GraphClass.ADMG)


def random_cyclic(rng: random.Random, n: int, p: float = 0.25) -> CausalGraph:
    nodes = [f"V{i}" for i in range(n)]
    edges = {(a, b) for a in nodes for b in nodes if a != b and rng.random() < p}
    cyc = rng.sample(nodes, rng.randint(2, min(4, n)))
    edges |= {(cyc[i], cyc[(i + 1) % len(cyc)]) for i in range(len(cyc))}
    return CausalGraph.build(nodes, edges, (), GraphClass.DIRECTED)


# ---- generated problems ------------------------------------------------------------------------
def small_config(seed: int, **changes: Any) -> GenConfig:
    """A small generator config: 4-8 nodes, DAGs and ADMGs mixed (directed graphs for cycle_witness)."""
    base = {"seed": seed, "n_nodes": (4, 8), "density": 0.35, "latent": 0.15}
    return GenConfig(**{**base, **changes})


def _classes(task: str) -> tuple[str, ...]:
    allowed = [c.value for c in get_family(task).graph_classes]
    mixed = tuple(c for c in ("DAG", "ADMG") if c in allowed)
    return mixed or tuple(allowed)


def sample_problem(task: str, rng: random.Random, tries: int = 200) -> tuple[Problem, list]:
    """A generated problem of ``task`` (item and seed drawn from ``rng``) whose validity class is
    non-empty and not just "none", with that class as answer objects."""
    for _ in range(tries):
        cfg = small_config(rng.randrange(1 << 30), graph_class=_classes(task))
        problem = generate_item(task, rng.randrange(1 << 20), cfg)
        if problem is None:
            continue
        valid = validity_objects(problem)
        if valid and valid != [()]:
            return problem, valid
    raise RuntimeError(f"no problem with a non-empty validity class for {task}")


# ---- synthetic K-candidate pools (selectors, firewall, sampling) -------------------------------
POOL_TASKS = ("backdoor_set", "separation_set", "mediator", "frontdoor_set")


def _damage(trace: str, rng: random.Random) -> str:
    lines = trace.splitlines()
    kind = rng.randrange(3)
    if kind == 0:
        del lines[rng.randrange(len(lines))]
    elif kind == 1:
        lines[0] = lines[0].replace("->", "<-", 1)
    else:
        lines[-1] = "ANSWER: {??}"
    return "\n".join(lines)


def _invalid_sets(problem: Problem, rng: random.Random) -> list[frozenset[str]]:
    q = problem.query
    ends = set(q.get("x", [])) | set(q.get("y", [])) | {q.get("treatment"), q.get("outcome")}
    cand = [n for n in problem.graph.nodes if n not in ends]
    out: list[frozenset[str]] = []
    for _ in range(20):
        s = frozenset(rng.sample(cand, rng.randint(0, min(3, len(cand)))))
        if s not in out and not grade(problem, s):
            out.append(s)
    return out


def pool_problems(n: int, seed: int = 0) -> list[tuple[Problem, list, list]]:
    """``n`` find-one-valid problems (round-robin over :data:`POOL_TASKS`, variant ``any``, at least two
    valid answers) with (valid members, invalid sets); problems with no invalid set are passed over."""
    rng = random.Random(f"fixtures/pool/{seed}")
    cfg = small_config(seed, n_nodes=(6, 9), latent=0.0, variants=("any",), many_satisfier=True)
    per_task = {t: iter_generate(t, 1 << 20, cfg) for t in POOL_TASKS}  # lazy: items as they are needed
    out = []
    while len(out) < n:
        task = POOL_TASKS[len(out) % len(POOL_TASKS)]
        p = next(per_task[task])
        invalid = _invalid_sets(p, rng)
        if invalid:
            out.append((p, validity_objects(p), invalid))
    return out


def synthetic_units(n_units: int = 24, k: int = 8, seed: int = 0, n_seeds: int = 1):
    """``[(problem, seed, texts)]``: per unit, canonical traces of several distinct valid answers (a
    fragmented vote), one repeated invalid "spoiler", other invalid answers and damaged traces."""
    rng = random.Random(f"fixtures/units/{seed}")
    out = []
    for p, valid, invalid in pool_problems(max(1, -(-n_units // n_seeds)), seed):
        fam = get_family(p.task)
        for s in range(n_seeds):
            texts = []
            spoiler = rng.choice(invalid)
            for _ in range(k):
                r = rng.random()
                if r < 0.45:
                    texts.append(fam.canonical_trace(p, rng.choice(valid)))
                elif r < 0.75:
                    texts.append(fam.canonical_trace(p, spoiler))
                elif r < 0.9:
                    texts.append(fam.canonical_trace(p, rng.choice(invalid)))
                else:
                    texts.append(_damage(fam.canonical_trace(p, rng.choice(valid)), rng))
            out.append((p, s, texts))
    return out[:n_units]


def write_pool(root: str | Path, units, k: int) -> Pool:
    """A pool directory (manifest, problems, candidates) holding ``units``; not frozen."""
    pool = Pool(root)
    probs = {p.id: p for p, _, _ in units}
    pool.write_manifest({"schema": "calver-pool/1", "sampling": {"k": k}, "seeds": sorted({s for _, s, _ in units}),
                         "model": {"id": "synthetic"}, "selector_context": {}})
    pool.write_problems(probs.values())
    pool.append_candidates(
        {"problem_id": p.id, "source_id": p.source_id, "seed": s, "candidate_index": i, "text": t,
         "finish_reason": "stop", "num_tokens": len(t.split()), "mean_logprob": -1.0}
        for p, s, texts in units for i, t in enumerate(texts)
    )
    return pool


def latent_projection(g: CausalGraph, no_out=()):
    """A networkx DiGraph of ``g`` with each bidirected edge as a latent parent ``L[a,b]`` of both ends, and
    the out-edges of ``no_out`` removed (the oracle graph for d-/m-separation via ``nx.is_d_separator``)."""
    import networkx as nx

    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    d.add_edges_from(e for e in g.directed if e[0] not in no_out)
    for a, b in g.bidirected:
        d.add_edges_from([(f"L[{a},{b}]", a), (f"L[{a},{b}]", b)])
    return d
