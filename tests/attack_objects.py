"""The attack battery's objects (``tests/attack_battery.py``): what the oracles of ``tests/oracles.py`` say of
an answer object, the object written as a slot's text, and wrong objects to attack with, each confirmed
wrong by :func:`correct` (no calver predicate decides it)."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction
from typing import Any

import networkx as nx
from oracles import (
    G,
    backdoor,
    blocks,
    exact_ate,
    frontdoor,
    is_cycle,
    kk_solutions,
    mediators,
    msep_nx,
    reach_after_do,
    subsets,
)

from calver.verifier import Problem

SET_TASKS = ("backdoor_set", "separation_set", "frontdoor_set", "blocking_set")


# ---- the oracle's verdict on an object (the audit's own Python values) --------------------------
def og(p: Problem) -> G:
    g = p.graph
    return G(g.nodes, g.directed, [tuple(e) for e in g.bidirected])


def correct(p: Problem, obj: Any) -> bool:
    """Is ``obj`` a right answer to ``p``? Sets are frozensets of names, paths ``(nodes, types or None)``,
    cycles a node tuple (``()``: none), decisions a bool, K&K a ``{person: is_knight}`` dict."""
    t = p.task
    q = p.query
    g = og(p) if p.graph is not None else None
    V = g.nodes if g else []
    if t in SET_TASKS:
        if t == "backdoor_set":
            def f(Z):
                return backdoor(g, q["treatment"], q["outcome"], Z)
        elif t == "separation_set":
            def f(Z):
                return not (Z & (set(q["x"]) | set(q["y"]))) and msep_nx(g, set(q["x"]), set(q["y"]), Z)
        elif t == "frontdoor_set":
            def f(Z):
                return frontdoor(g, q["treatment"], q["outcome"], Z, q.get("criterion", "set"))
        else:
            nodes, types = p.family.normalize_query(p)["path"]

            def f(Z):
                return blocks(g, list(nodes), list(types), Z)
        Z = frozenset(obj)
        if not Z <= set(V):
            return False
        var = q.get("variant", "any")
        if not f(Z):
            return False
        if var == "minimal":
            return not any(f(S) for S in subsets(Z) if S != Z)
        if var == "maximal":
            return not any(f(Z | S) for S in subsets(set(V) - Z) if S)
        return True
    if t == "mediator":
        true = mediators(g, q["treatment"], q["outcome"], direct=q.get("variant") == "direct")
        Z = frozenset(obj)
        return Z == true if q.get("variant") == "all" else (len(Z) == 1 and next(iter(Z)) in true)
    if t in ("path", "backdoor_path"):
        a, b = (q["source"], q["target"]) if t == "path" else (q["treatment"], q["outcome"])
        allp = g.paths(a, b, first=("<-", "<->") if t == "backdoor_path" else None)
        nodes, types = obj
        if not nodes:
            return not allp
        m = [ty for ns, ty in allp if tuple(ns) == tuple(nodes) and (types is None or tuple(ty) == tuple(types))]
        if not m:
            return False
        L = len(nodes) - 1
        var = q.get("variant", "any")
        if var == "shortest":
            return L == min(len(ty) for _, ty in allp)
        if var == "longest":
            return L == max(len(ty) for _, ty in allp)
        return True
    if t == "cycle_witness":
        return g.acyclic() if not obj else is_cycle(g, list(obj))
    if t == "intervention_reachability":
        return obj == reach_after_do(g, set(q["do"]), q["source"], q["target"])
    if t == "ate_threshold":
        return obj == (exact_ate(p, q["treatment"], q["outcome"]) > Fraction(str(q["threshold"])))
    if t == "knights_knaves":
        sols = kk_solutions(p.data["people"], p.data["statements"])
        return len(sols) == 1 and obj == sols[0]
    raise KeyError(t)


# ---- answer text and wrong objects --------------------------------------------------------------
def fmt_set(Z) -> str:
    return "{" + ", ".join(sorted(Z)) + "}"


def fmt_path(obj) -> str:
    nodes, types = obj
    if not nodes:
        return "none"
    if types is None:
        return ", ".join(nodes)
    out = [nodes[0]]
    for ty, v in zip(types, nodes[1:]):
        out += [ty, v]
    return " ".join(out)


def fmt(p: Problem, obj) -> str:
    t = p.task
    if t in ("path", "backdoor_path"):
        return fmt_path(obj)
    if t == "cycle_witness":
        return " -> ".join(list(obj) + list(obj[:1])) if obj else "none"
    if t in ("intervention_reachability", "ate_threshold"):
        return "yes" if obj else "no"
    if t == "knights_knaves":
        return ", ".join(f"{k}={'knight' if v else 'knave'}" for k, v in obj.items())
    return fmt_set(obj)


def wrong_objects(p: Problem, rng: random.Random, k: int = 3) -> list:
    """Up to ``k`` objects the oracle rejects (both decisions' wrong one for yes/no tasks)."""
    t = p.task
    q = p.query
    g = og(p) if p.graph is not None else None
    V = g.nodes if g else []
    out: list = []
    if t in SET_TASKS + ("mediator",):
        if len(V) <= 8:
            cands = [frozenset(s) for s in subsets(V)]
        else:
            cands = [frozenset(rng.sample(V, rng.randint(0, 3))) for _ in range(60)]
        rng.shuffle(cands)
        for Z in cands:
            if not correct(p, Z):
                out.append(Z)
            if len(out) >= k:
                break
    elif t in ("path", "backdoor_path"):
        a, b = (q["source"], q["target"]) if t == "path" else (q["treatment"], q["outcome"])
        allp = g.paths(a, b)
        cands = ([((), None)] + [(tuple(n), tuple(ty)) for n, ty in allp]
                 + [((a, b), ("->",)), ((a, b), ("<-",)), ((a, b), ("<->",))])
        rng.shuffle(cands)
        out = [c for c in cands if not correct(p, c)][:k]
    elif t == "cycle_witness":
        h = nx.DiGraph()
        h.add_nodes_from(V)
        h.add_edges_from(g.D)
        cands = ([()] + [tuple(c)[::-1] for c in itertools.islice(nx.simple_cycles(h), 5)]
                 + [tuple(rng.sample(V, 3)) for _ in range(5)])
        out = [c for c in cands if not correct(p, c)][:k]
    elif t in ("intervention_reachability", "ate_threshold"):
        out = [b for b in (True, False) if not correct(p, b)]
    elif t == "knights_knaves":
        sol = kk_solutions(p.data["people"], p.data["statements"])[0]
        for person in list(sol)[:k]:
            w = dict(sol)
            w[person] = not w[person]
            out.append(w)
    return out
