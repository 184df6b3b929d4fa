"""bnlearn networks, offline: read the ``.bif.gz`` files shipped inside the installed ``pgmpy`` wheel.

* :func:`load_network` parses a network with a small BIF reader of its own (no pgmpy import; the
  largest networks parse in well under a second) and caches the structure and CPTs as JSON under
  ``$CALVER_CACHE_DIR/bnlearn`` (default ``~/.cache/calver/bnlearn``); the cache is keyed by the
  SHA-256 of the packaged file, so an upgraded wheel re-parses. No pickle.
* :func:`treatment_outcome_pairs` picks nontrivial pairs (X an ancestor of Y, an open backdoor
  path, at least ``min_valid`` valid backdoor sets on the ancestral subgraph of {X, Y}): seeded random
  draws, then the pairs whose ancestral subgraph fits ``max_nodes`` (:func:`fitting_pairs`; large
  networks such as andes), then, on a network with no confounded pair (cancer, earthquake), pairs
  without an open backdoor path (``meta["backdoor_open"] = False``).
* :func:`bnlearn_problems` builds supplied-graph :class:`Problem`s for ``backdoor_set`` (any /
  minimal / maximal), ``frontdoor_set``, ``separation_set``, ``mediator`` and
  ``intervention_reachability``; the prompt graph is the query-relevant ancestral subgraph.
* :func:`binarized_cpts` / :func:`ate_problems`: ATE problems from the networks' real CPTs.

Each problem's ``source_id`` is its own, from network + query (:func:`calver.data_gen.meta.query_source_id`,
e.g. ``bnlearn-asia-backdoor_set-smoke-dysp-any``); ``meta`` holds ``source``, ``network``,
``encoding`` ("arrows"), ``n_valid`` (where cheap) and, for ATE problems, ``ate``.

Binarization (multi-valued variables handled explicitly): every variable v becomes
B(v) = 1 iff v takes its *first* BIF state (``yes``/``TRUE``/``LOW`` ...). On the ancestral
subgraph of {X, Y} (whose marginal is exactly the product of its own CPTs) we compute, by exact
variable elimination on the original multi-valued CPTs, P(v, pa(v)) and set the binary CPT to
P(B(v)=1 | B(pa(v))=c) under that joint (an empty coarsened parent cell falls back to P(B(v)=1)).
For networks whose variables are all binary this is the original network re-coded; otherwise it is
a new binary network on the same DAG whose CPTs are coarsenings of the real ones, and the ATE is
computed *on that binary network* (exact truncated factorization), so problem and label agree.
Binary CPTs: ``{node: {"parents": [...], "table": {"": p1} | {"0,1": p1, ...}}}``, ``p1`` =
P(node=1 | parents), keys the parents' 0/1 values in ``parents`` order joined by commas.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import random
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from calver.data_gen.meta import class_size, query_source_id
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.problem import Problem

__all__ = ["available_networks", "network_path", "load_network", "ancestral_subgraph", "treatment_outcome_pairs",
           "fitting_pairs",
           "bnlearn_problems", "binarized_cpts", "binary_ate", "to_scm_cpts", "ate_problems", "cache_dir",
           "BNLEARN_TASKS"]

CACHE_VERSION = 1
BNLEARN_TASKS = ("backdoor_set", "frontdoor_set", "separation_set", "mediator", "intervention_reachability", "ate")


def _models_dir():
    return resources.files("pgmpy").joinpath("utils", "example_models")


def available_networks() -> list[str]:
    """Names of the ``.bif.gz`` networks shipped in the installed pgmpy wheel."""
    try:
        return sorted(p.name[: -len(".bif.gz")] for p in _models_dir().iterdir() if p.name.endswith(".bif.gz"))
    except (ModuleNotFoundError, FileNotFoundError):
        return []


def network_path(name: str) -> Path:
    p = _models_dir().joinpath(f"{name}.bif.gz")
    if not p.is_file():
        raise FileNotFoundError(f"no packaged bnlearn network {name!r}; available: {', '.join(available_networks())}")
    return Path(str(p))


def cache_dir(path: str | Path | None = None) -> Path:
    if path is not None:
        return Path(path)
    root = os.environ.get("CALVER_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "calver") / "bnlearn"


# ---- BIF --------------------------------------------------------------------------------------
_VAR = re.compile(r"variable\s+(\S+)\s*\{[^}]*?discrete\s*\[\s*\d+\s*\]\s*\{([^}]*)\}", re.S)
_PROB = re.compile(r"probability\s*\(\s*([^)|]+?)\s*(?:\|\s*([^)]*?))?\s*\)\s*\{([^}]*)\}", re.S)
_ROW = re.compile(r"\(([^)]*)\)\s*([^;]*);|table\s+([^;]*);")


def _split(s: str) -> list[str]:
    return [t.strip() for t in s.split(",") if t.strip()]


def parse_bif(text: str) -> dict[str, Any]:
    """BIF text -> ``{"nodes", "states", "cpds": {v: {"parents", "table": {key: [p...]}}}}``."""
    states = {m.group(1): _split(m.group(2)) for m in _VAR.finditer(text)}
    cpds: dict[str, Any] = {}
    for m in _PROB.finditer(text):
        child, parents = m.group(1).strip(), _split(m.group(2) or "")
        table: dict[str, list[float]] = {}
        for r in _ROW.finditer(m.group(3)):
            if r.group(3) is not None:
                table[""] = [float(x) for x in _split(r.group(3))]
            else:
                table[",".join(_split(r.group(1)))] = [float(x) for x in _split(r.group(2))]
        cpds[child] = {"parents": parents, "table": table}
    missing = sorted(set(states) - set(cpds))
    if missing:
        raise ValueError(f"BIF has variables without a probability block: {missing[:5]}")
    return {"nodes": list(states), "states": states, "cpds": cpds}


def _load_raw(name: str, cache: str | Path | None) -> dict[str, Any]:
    src = network_path(name)
    blob = src.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    cfile = cache_dir(cache) / f"{name}.json"
    if cfile.is_file():
        try:
            data = json.loads(cfile.read_text(encoding="utf-8"))
            if data.get("version") == CACHE_VERSION and data.get("sha256") == digest:
                return data
        except (OSError, ValueError):
            pass
    data = parse_bif(gzip.decompress(blob).decode("utf-8", errors="replace"))
    data.update(version=CACHE_VERSION, sha256=digest, name=name)
    try:
        cfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = cfile.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(cfile)
    except OSError:
        pass  # a read-only cache is not an error
    return data


def load_network(name: str, cache: str | Path | None = None) -> tuple[CausalGraph, dict[str, Any]]:
    """``(graph, cpds)``; ``cpds[v] = {"parents": [...], "states": [...], "table": {"s1,s2": [p per state]}}``."""
    data = _cached(name, str(cache) if cache is not None else None)
    edges = [(p, v) for v, c in data["cpds"].items() for p in c["parents"]]
    g = CausalGraph.build(data["nodes"], edges, (), GraphClass.DAG)
    cpds = {v: {"parents": list(c["parents"]), "states": list(data["states"][v]), "table": dict(c["table"])}
            for v, c in data["cpds"].items()}
    return g, cpds


@lru_cache(maxsize=32)
def _cached(name: str, cache: str | None) -> dict[str, Any]:
    return _load_raw(name, cache)


# ---- structure helpers --------------------------------------------------------------------------
def ancestral_subgraph(g: CausalGraph, nodes: Iterable[str]) -> CausalGraph:
    """The subgraph induced by ``nodes`` and all their ancestors (closed under parents)."""
    from calver.verifier.primitives import ancestors

    keep = set(nodes)
    keep |= ancestors(g, keep)
    order = [n for n in g.nodes if n in keep]
    return CausalGraph.build(order, [e for e in g.directed if e[0] in keep and e[1] in keep],
                             [e for e in g.bidirected if e[0] in keep and e[1] in keep], g.kind)


def _backdoor_count(sub: CausalGraph, x: str, y: str, need: int) -> int:
    from calver.verifier.registry import get_family

    fam = get_family("backdoor_set")
    q = {"treatment": x, "outcome": y, "variant": "any"}
    return len(fam.validity_class(sub, q, limit=need))


def fitting_pairs(g: CausalGraph, max_nodes: int) -> list[tuple[str, str]]:
    """Every ``(X, Y)``, in graph order, with X a proper ancestor of Y that has parents and an ancestral
    subgraph of {X, Y} (= Y and its ancestors, X being one) of at most ``max_nodes`` nodes."""
    from calver.verifier.paths import ancestors

    out = []
    for y in g.nodes:
        anc = ancestors(g, [y])
        if len(anc) + 1 <= max_nodes:
            out += [(x, y) for x in g.nodes if x in anc and x != y and g.parents(x)]
    return out


def treatment_outcome_pairs(g: CausalGraph, rng: random.Random, n: int = 10, *, min_valid: int = 2,
                            max_nodes: int = 16, max_tries: int = 4000,
                            unconfounded_fallback: bool = True) -> list[tuple[str, str, CausalGraph]]:
    """Up to ``n`` distinct nontrivial ``(X, Y, ancestral subgraph)``: X is an ancestor of Y, X and
    Y are connected by an open backdoor path (not separated by ∅ once X's out-edges are cut), the
    ancestral subgraph of {X, Y} has at most ``max_nodes`` nodes and at least ``min_valid`` valid
    backdoor adjustment sets.

    Pairs are drawn at random (X, then a descendant Y) for ``max_tries`` draws. When that finds fewer
    than ``n``, the remaining :func:`fitting_pairs`, shuffled by a generator seeded from ``rng``'s state
    (``rng`` itself is left where the draws left it), are checked in turn: on a large network almost every
    Y has more than ``max_nodes`` ancestors (andes: 118 of its 9,658 ancestor-descendant pairs fit in 16
    nodes, 3 of them nontrivial), which random draws miss. A network with no confounded pair at all
    (cancer, earthquake: every backdoor path of X stops at X's parents) then, with
    ``unconfounded_fallback``, takes pairs without an open backdoor path (∅ is one of their >= ``min_valid``
    valid sets)."""
    from calver.verifier.primitives import descendants, is_separated

    out, seen = [], set()
    nodes = list(g.nodes)
    for _ in range(max_tries):
        if len(out) >= n:
            break
        x = rng.choice(nodes)
        desc = sorted(descendants(g, x))
        if not desc:
            continue
        y = rng.choice(desc)
        if (x, y) in seen:
            continue
        seen.add((x, y))
        sub = ancestral_subgraph(g, (x, y))
        if len(sub) > max_nodes or not g.parents(x):
            continue
        if is_separated(sub, [x], [y], [], remove_outgoing_of=[x]):
            continue
        if _backdoor_count(sub, x, y, min_valid) >= min_valid:
            out.append((x, y, sub))
    if len(out) >= n:
        return out
    fits = fitting_pairs(g, max_nodes)
    random.Random(hashlib.sha256(repr(rng.getstate()).encode()).hexdigest()).shuffle(fits)
    open_pairs = []
    for x, y in fits:
        if len(out) >= n:
            break
        sub = ancestral_subgraph(g, (x, y))
        if is_separated(sub, [x], [y], [], remove_outgoing_of=[x]):
            continue
        open_pairs.append((x, y))
        if (x, y) not in seen and _backdoor_count(sub, x, y, min_valid) >= min_valid:
            out.append((x, y, sub))
    if out or open_pairs or not unconfounded_fallback:
        return out
    for x, y in fits:
        if len(out) >= n:
            break
        sub = ancestral_subgraph(g, (x, y))
        if _backdoor_count(sub, x, y, min_valid) >= min_valid:
            out.append((x, y, sub))
    return out


# ---- supplied-graph problems ------------------------------------------------------------------------
def bnlearn_problems(name: str, task: str, n: int = 10, seed: int = 0, *, variant: str = "any",
                     max_nodes: int = 16, nontrivial: bool = True, cache: str | Path | None = None) -> list[Problem]:
    """Supplied-graph problems on bnlearn network ``name`` (the prompt graph is the ancestral subgraph
    of the query nodes). ``task`` in :data:`BNLEARN_TASKS`; ``variant`` for set/mediator tasks.
    ``nontrivial`` front-door items need an open backdoor path X <- ... -> Y; fully observed bnlearn
    DAGs rarely have one together with a front-door set (0-2 items per network), so pass False to
    also accept pairs without confounding."""
    if task == "ate":
        return ate_problems(name, n, seed, max_nodes=max_nodes, cache=cache)
    from calver.verifier.primitives import descendants, is_frontdoor_set, is_separated, mediators, reachable_after_do

    g, _ = load_network(name, cache)
    rng = random.Random(f"{name}:{task}:{variant}:{seed}")
    out: list[Problem] = []

    def add(query, sub, extra=None):
        p = Problem(task=task, query=query, graph=sub, mode="supplied", id=f"bnlearn-{name}-{task}-{seed}-{len(out)}",
                    source_id=query_source_id("bnlearn", name, task, query),
                    meta={"source": "bnlearn", "network": name, "encoding": "arrows", **(extra or {})})
        _add_n_valid(p)
        out.append(p)

    if task == "backdoor_set":
        for x, y, sub in treatment_outcome_pairs(g, rng, n, max_nodes=max_nodes):
            # an unconfounded pair (only on networks without a confounded one) is marked as such
            extra = {"backdoor_open": False} if is_separated(sub, [x], [y], [], remove_outgoing_of=[x]) else None
            add({"treatment": x, "outcome": y, "variant": variant}, sub, extra)
        return out
    pairs = [(x, y) for x in g.nodes for y in sorted(descendants(g, x))]
    rng.shuffle(pairs)
    seen_i: set[tuple] = set()
    for x, y in pairs:
        if len(out) >= n:
            break
        sub = ancestral_subgraph(g, (x, y))
        if len(sub) > max_nodes:
            continue
        if task == "frontdoor_set":
            meds = sorted(mediators(sub, x, y))  # a front-door set must intercept every directed path
            cands = [c for k in range(1, min(3, len(meds)) + 1) for c in itertools.combinations(meds, k)]
            if nontrivial and is_separated(sub, [x], [y], [], remove_outgoing_of=[x]):
                continue  # no open backdoor path: front-door adjustment would be beside the point
            if not any(is_frontdoor_set(sub, x, y, list(c)) for c in cands):
                continue
            add({"treatment": x, "outcome": y, "variant": variant}, sub)
        elif task == "separation_set":
            # x is an ancestor of y and not adjacent to it: dependent given {}, separated by pa(y)
            if sub.has_edge(x, y):
                continue
            add({"x": [x], "y": [y], "variant": variant}, sub)
        elif task == "mediator":
            one_hop = variant == "direct"
            if not mediators(sub, x, y, one_hop=one_hop):
                continue
            add({"treatment": x, "outcome": y, "variant": variant}, sub)
        elif task == "intervention_reachability":
            want = len(out) % 2 == 0  # alternate yes / no
            meds = sorted(mediators(sub, x, y))
            if not meds:
                continue
            for k in (1, 2):
                for do in itertools.combinations(meds, min(k, len(meds))):
                    truth = reachable_after_do(sub, list(do), x, y)
                    if truth == want and (x, y, do) not in seen_i:
                        seen_i.add((x, y, do))
                        add({"do": list(do), "source": x, "target": y}, sub, {"label": truth})
                        break
                else:
                    continue
                break
        else:
            raise ValueError(f"unknown bnlearn task {task!r}; expected one of {BNLEARN_TASKS}")
    return out


# ---- exact inference (variable elimination) ---------------------------------------------------------
def _factor(node: str, parents: list[str], table: dict[str, list[float]], states: dict[str, list[str]]):
    card = [len(states[p]) for p in parents] + [len(states[node])]
    arr = np.zeros(card)
    for combo in itertools.product(*[range(len(states[p])) for p in parents]):
        key = ",".join(states[p][i] for p, i in zip(parents, combo))
        arr[combo] = table[key]
    return (list(parents) + [node], arr)


def _multiply(f1, f2):
    v1, a1 = f1
    v2, a2 = f2
    allv = v1 + [v for v in v2 if v not in v1]
    letters = {v: chr(97 + i) if i < 26 else chr(65 + i - 26) for i, v in enumerate(allv)}
    expr = f"{''.join(letters[v] for v in v1)},{''.join(letters[v] for v in v2)}->{''.join(letters[v] for v in allv)}"
    return (allv, np.einsum(expr, a1, a2))


def _eliminate(factors, keep: list[str]):
    """Marginal over ``keep`` (in that order) of the product of ``factors`` (greedy min-size order)."""
    factors = list(factors)
    variables = {v for vs, _ in factors for v in vs} - set(keep)
    while variables:
        def cost(v):
            scope = set().union(*[set(vs) for vs, _ in factors if v in vs])
            return len(scope)
        v = min(sorted(variables), key=cost)
        variables.discard(v)
        touched = [f for f in factors if v in f[0]]
        factors = [f for f in factors if v not in f[0]]
        prod = touched[0]
        for f in touched[1:]:
            prod = _multiply(prod, f)
        vs, arr = prod
        factors.append(([u for u in vs if u != v], arr.sum(axis=vs.index(v))))
    prod = factors[0]
    for f in factors[1:]:
        prod = _multiply(prod, f)
    vs, arr = prod
    return np.transpose(arr, [vs.index(v) for v in keep])


def binarized_cpts(g: CausalGraph, cpds: dict[str, Any], nodes: Iterable[str]) -> dict[str, Any]:
    """Binary CPTs (see the module docstring) on the ancestral subgraph of ``nodes``."""
    sub = ancestral_subgraph(g, nodes)
    states = {v: cpds[v]["states"] for v in sub.nodes}
    factors = [_factor(v, cpds[v]["parents"], cpds[v]["table"], states) for v in sub.nodes]
    out: dict[str, Any] = {}
    for v in sub.nodes:
        pa = list(cpds[v]["parents"])
        joint = _eliminate(factors, pa + [v])  # P(pa, v)
        p_v1 = float(_eliminate(factors, [v])[0])
        table = {}
        for bits in itertools.product((0, 1), repeat=len(pa)):
            sel = joint
            for i, b in enumerate(bits):  # coarsen parent i: state 0 <-> 1, others <-> 0
                sl = [slice(None)] * sel.ndim
                sl[0] = slice(0, 1) if b else slice(1, None)
                sel = sel[tuple(sl)].sum(axis=0)
            tot = float(sel.sum())
            table[",".join(map(str, bits))] = float(sel[0] / tot) if tot > 1e-15 else p_v1
        out[v] = {"parents": pa, "table": table}
    return out


def binary_ate(cpts: dict[str, Any], x: str, y: str) -> float:
    """E[Y | do(X=1)] - E[Y | do(X=0)] on a binary network, by exact truncated factorization."""
    states = {v: ["1", "0"] for v in cpts}

    def fac(v, c, do=None):
        if v == x and do is not None:
            return ([v], np.array([1.0, 0.0]) if do == 1 else np.array([0.0, 1.0]))
        table = {}
        for bits in itertools.product((1, 0), repeat=len(c["parents"])):
            p1 = c["table"][",".join(map(str, bits))]
            table[",".join(map(str, bits))] = [p1, 1 - p1]
        return _factor(v, c["parents"], table, states)

    vals = []
    for do in (1, 0):
        factors = [fac(v, c, do) for v, c in cpts.items()]
        vals.append(float(_eliminate(factors, [y])[0]))
    return vals[0] - vals[1]


def to_scm_cpts(cpts: dict[str, Any]) -> dict[str, Any]:
    """Binary CPTs -> the ``calver.verifier.scm`` mapping form ``{v: {"parents", "p1"}}`` (``p1[i]`` for
    parent configuration ``i`` read as a binary number, first parent most significant)."""
    out = {}
    for v, c in cpts.items():
        k = len(c["parents"])
        p1 = [c["table"][",".join(str((i >> (k - 1 - j)) & 1) for j in range(k))] for i in range(2 ** k)]
        out[v] = {"parents": list(c["parents"]), "p1": p1}
    return out


def ate_problems(name: str, n: int = 10, seed: int = 0, *, max_nodes: int = 12, epsilon: float = 0.01,
                 cache: str | Path | None = None) -> list[Problem]:
    """``ate_threshold`` problems from real (binarized) CPTs: ``data = {"cpts": <scm mapping>, "epsilon"}``
    over the ancestral subgraph of {X, Y}; the threshold τ lies 2ε..min(0.25, |ATE|) away from the true ATE
    (computed by :func:`calver.verifier.scm.true_ate`, cross-checked against :func:`binary_ate`)."""
    from calver.verifier.primitives import is_separated
    from calver.verifier.scm import BinarySCM, render_cpts, true_ate

    g, cpds = load_network(name, cache)
    rng = random.Random(f"{name}:ate:{seed}")
    out = []
    for x, y, sub in treatment_outcome_pairs(g, rng, 4 * n, max_nodes=max_nodes, min_valid=1):
        if len(out) >= n:
            break
        cpts = binarized_cpts(g, cpds, (x, y))
        scm_map = to_scm_cpts(cpts)
        scm = BinarySCM.from_data(scm_map)
        ate = true_ate(scm, x, y)
        if abs(ate) < 4 * epsilon:
            continue
        gap = rng.uniform(2 * epsilon, max(2 * epsilon, min(0.25, abs(ate))))
        tau = round(ate - gap if rng.random() < 0.5 else ate + gap, 4)
        text = ("All variables are binary (1 = the variable's first state in the source network, 0 = any other "
                f"state). The causal graph is a DAG with edges: {sub.to_text()}.\nThe conditional probability "
                f"tables are:\n{render_cpts(scm)}\nQuestion: is the average treatment effect of {x} on {y}, "
                f"P({y}=1 | do({x}=1)) - P({y}=1 | do({x}=0)), greater than {tau:g}? Report the effect to within "
                f"{epsilon:g} and answer yes or no.")
        query = {"treatment": x, "outcome": y, "threshold": tau}
        p = Problem(task="ate_threshold", query=query, graph=sub, text=text, data={"cpts": scm_map, "epsilon": epsilon},
                    mode="supplied", id=f"bnlearn-{name}-ate-{seed}-{len(out)}",
                    source_id=query_source_id("bnlearn", name, "ate_threshold", query),
                    meta={"source": "bnlearn", "network": name, "encoding": "arrows", "ate": ate, "label": ate > tau,
                          "binarization": "1 = first BIF state; CPTs coarsened under the exact joint",
                          "states": {v: cpds[v]["states"] for v in sub.nodes}})
        if is_separated(sub, [x], [y], [], remove_outgoing_of=[x]):  # only on networks without a confounded pair
            p.meta["backdoor_open"] = False
        _add_n_valid(p)
        out.append(p)
    return out


def _add_n_valid(p: Problem) -> None:
    n_valid = class_size(p)  # None past ENUM_MAX_NODES nodes (a larger max_nodes)
    if n_valid is not None:
        p.meta["n_valid"] = n_valid
