"""Random binary-SCM problems for ``ate_threshold``.

``generate_ate(idx, seed, n_nodes=6)`` draws (with the string-keyed per-item rng ``item_rng``) a DAG with a
treatment X, an outcome Y after it, several confounders of X and Y (so that many backdoor sets
are valid and the empty set usually is not), optional mediators and post-treatment nodes,
CPTs with two-decimal probabilities in [0.05, 0.95] (positive P), a threshold τ near the true
ATE and a tolerance ε. The prompt text shows the edges (arrow text) and the CPT lines; ``meta["ate"]``
is the true effect (the breakdown fields: :mod:`calver.data_gen.meta`).
"""

from __future__ import annotations

from random import Random

from calver.data_gen.generators import item_rng
from calver.data_gen.meta import class_size
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.problem import Problem
from calver.verifier.scm import BinarySCM, render_cpts, true_ate

_OTHER_NAMES = "ABCDEFGHJKLMNPQRSTUVW"


def random_scm(rng: Random, n_nodes: int = 6, max_parents: int = 3, edge_p: float = 0.45) -> tuple[BinarySCM, str, str]:
    """A random binary SCM with treatment ``X`` and outcome ``Y`` (``n_nodes`` ≥ 2 variables)."""
    if n_nodes < 2:
        raise ValueError("an ATE problem needs at least 2 variables")
    others = list(_OTHER_NAMES[: n_nodes - 2])
    # Topological order: pre-treatment others, X, then the rest, Y last among the first block.
    n_pre = rng.randint(min(1, len(others)), len(others)) if others else 0
    order = others[:n_pre] + ["X"] + others[n_pre:] + ["Y"]
    if rng.random() < 0.5 and n_pre < len(others):  # sometimes a node after Y (a pure descendant)
        order.remove(others[-1])
        order.append(others[-1])
    pos = {v: i for i, v in enumerate(order)}
    parents: dict[str, list[str]] = {v: [] for v in order}
    for v in order:
        earlier = order[: pos[v]]
        rng.shuffle(earlier)
        for u in earlier:
            if len(parents[v]) < max_parents and rng.random() < edge_p:
                parents[v].append(u)
    pre = others[:n_pre]
    # Confound X and Y through at least one pre-treatment node when there is one.
    if pre:
        c = rng.choice(pre)
        for v in ("X", "Y"):
            if c not in parents[v]:
                if len(parents[v]) >= max_parents:
                    parents[v].pop(0)
                parents[v].append(c)
    if pos["Y"] > pos["X"] and "X" not in parents["Y"] and rng.random() < 0.7:
        if len(parents["Y"]) >= max_parents:
            parents["Y"].pop(0)
        parents["Y"].append("X")
    p1 = {}
    for v in order:
        k = len(parents[v])
        p1[v] = [round(rng.uniform(0.05, 0.95), 2) for _ in range(2 ** k)]
    return BinarySCM.build({v: sorted(parents[v], key=pos.get) for v in order}, p1), "X", "Y"


def generate_ate(idx: int, seed: int = 0, n_nodes: int = 6, epsilon: float = 0.01,
                 threshold: float | None = None, margin: tuple[float, float] = (0.0, 0.12),
                 allow_within_epsilon: bool = False) -> Problem:
    """One ``ate_threshold`` problem; τ = ATE ± U(margin) rounded to 2 decimals unless given.

    Unless ``allow_within_epsilon``, the drawn τ keeps |ATE − τ| > ε (the draw starts past ε plus the
    rounding slack): inside the margin an estimate within ε of the truth could fall on either side of
    τ, so the item would test the tolerance, not the decision."""
    rng = item_rng("ate_threshold/scm", seed, idx)  # string-keyed: (seed, idx) pairs never share an rng
    scm, x, y = random_scm(rng, n_nodes)
    g: CausalGraph = scm.graph()
    ate = true_ate(scm, x, y)
    if threshold is None:
        lo, hi = margin
        if not allow_within_epsilon:
            lo = max(lo, epsilon + 0.0051)  # τ is rounded to 2 decimals: up to 0.005 of slack
            if lo >= hi:
                raise ValueError(f"margin {margin} leaves no threshold farther than ε = {epsilon:g} from the ATE")
        threshold = round(ate + rng.choice((-1, 1)) * rng.uniform(lo, hi), 2)
    cpt_lines = scm.to_lines()
    text = (
        "All variables are binary (0 or 1). The causal graph is a DAG with edges: "
        f"{g.to_text()}.\nThe conditional probability tables are:\n" + render_cpts(scm) + "\n"
        f"Question: is the average treatment effect of {x} on {y}, "
        f"P({y}=1 | do({x}=1)) - P({y}=1 | do({x}=0)), greater than {threshold:g}? "
        f"Report the effect to within {epsilon:g} and answer yes or no."
    )
    p = Problem(
        task="ate_threshold",
        query={"treatment": x, "outcome": y, "threshold": threshold},
        graph=g,
        text=text,
        mode="supplied",
        graph_class=GraphClass.DAG,
        data={"cpts": cpt_lines, "epsilon": epsilon},
        id=f"ate-{n_nodes}-{seed}-{idx}",
        meta={"source": "ate", "encoding": "arrows", "ate": ate, "generator": "calver.data_gen.ate", "seed": seed,
              "idx": idx},
    )
    n_valid = class_size(p)  # the family's (strategy) class: the valid backdoor sets
    if n_valid is not None:
        p.meta["n_valid"] = n_valid
    return p


def canonical_trace(problem: Problem, adjustment=None) -> str:
    """The family's canonical trace (a smallest valid backdoor set unless ``adjustment`` given)."""
    return problem.family.canonical_trace(problem, adjustment)
