"""Small, independent helpers for verifier tests: random graphs, problems per family, trace edits."""

from __future__ import annotations

import random

# Trace perturbations are the evaluation package's audit functions (one implementation), re-exported.
from calver.infer.evaluation.audits import damage_witness, rename_nodes, replace_slot  # noqa: F401
from calver.verifier import CausalGraph, GraphClass, Problem, get_family


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


def sample_problem(task: str, rng: random.Random, tries: int = 200) -> tuple[Problem, list]:
    """A problem of ``task`` on a random graph whose validity class is non-empty."""
    fam = get_family(task)
    for _ in range(tries):
        n = rng.randint(4, 8)
        if task == "cycle_witness":
            g = random_cyclic(rng, n)
        elif rng.random() < 0.5 and GraphClass.ADMG in fam.graph_classes:
            g = random_admg(rng, n)
        else:
            g = random_dag(rng, n)
        nodes = list(g.nodes)
        a, b = rng.sample(nodes, 2)
        variant = rng.choice(fam.variants) if "variant" in fam.query_keys else None
        if task in ("backdoor_set", "frontdoor_set", "mediator"):
            query = {"treatment": a, "outcome": b}
        elif task == "backdoor_path":
            query = {"treatment": a, "outcome": b}
        elif task == "path":
            query = {"source": a, "target": b}
        elif task == "separation_set":
            query = {"x": [a], "y": [b]}
        elif task == "blocking_set":
            from calver.verifier.tasks.paths import typed_paths
            from calver.verifier.contract import format_path

            paths = typed_paths(g, a, b, limit=3)
            if not paths or len(paths[-1][0]) < 3:
                continue
            query = {"path": format_path(*paths[-1])}
        elif task == "cycle_witness":
            query = {}
        elif task == "intervention_reachability":
            query = {"do": [rng.choice(nodes)], "source": a, "target": b}
        else:
            raise ValueError(task)
        if variant is not None:
            query["variant"] = variant
        problem = Problem(task=task, graph=g, query=query, id=f"{task}-{rng.random():.6f}")
        valid = fam.validity_class(g, fam.normalize_query(problem))
        if valid and valid != [()]:
            return problem, valid
    raise RuntimeError(f"no problem with a non-empty validity class for {task}")


SET_TASKS = ("backdoor_set", "frontdoor_set", "separation_set", "blocking_set", "mediator")
GRAPH_TASKS = SET_TASKS + ("cycle_witness", "intervention_reachability", "path", "backdoor_path")


