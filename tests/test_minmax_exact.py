"""Exact minimal/maximal grading (audit A4), the front-door ``criterion`` readings, backdoor X = Y.

Oracles are independent of calver's primitives: networkx d-separation on the latent projection
(each ``a <-> b`` becomes ``L -> a, L -> b``) and textbook path enumeration; the minimal/maximal
truth is brute force over every subset of the candidates.
"""

from __future__ import annotations

import inspect
import json
import random
from itertools import combinations
from pathlib import Path

import networkx as nx
import pytest
from fixtures import latent_projection, random_admg, random_dag

from calver.verifier import CausalGraph, GraphClass, Problem, families, get_family, grade, parse_graph, score
from calver.verifier import primitives as P
from calver.verifier.family import TaskFamily
from calver.verifier.problem import ProblemError

REPRO = Path(__file__).parent / "data" / "repro"


# ---- oracles ------------------------------------------------------------------------------------
def _dsep(g, xs, ys, zs, no_out=()) -> bool:
    return nx.is_d_separator(latent_projection(g, no_out), set(xs), set(ys), set(zs))


def _dag(g: CausalGraph) -> nx.DiGraph:
    d = nx.DiGraph()
    d.add_nodes_from(g.nodes)
    d.add_edges_from(g.directed)
    return d


def _typed_paths(g: CausalGraph, s: str, t: str):
    """Every simple path s .. t of the mixed graph as (nodes, edge types read left to right)."""
    m = nx.MultiGraph()
    m.add_nodes_from(g.nodes)
    for a, b in g.directed:
        m.add_edge(a, b, tail=a)
    for a, b in g.bidirected:
        m.add_edge(a, b, tail=None)
    for epath in nx.all_simple_edge_paths(m, s, t):
        nodes, types = [s], []
        for u, v, k in epath:
            tail = m.edges[u, v, k]["tail"]
            types.append("<->" if tail is None else ("->" if tail == u else "<-"))
            nodes.append(v)
        yield nodes, types


def _blocked(dag: nx.DiGraph, nodes, types, z) -> bool:
    """Textbook: a non-collider in Z, or a collider with neither itself nor a descendant in Z."""
    for k in range(1, len(nodes) - 1):
        v = nodes[k]
        if types[k - 1] in ("->", "<->") and types[k] in ("<-", "<->"):
            if not ({v} | nx.descendants(dag, v)) & z:
                return True
        elif v in z:
            return True
    return False


def _backdoor_ok(g, x, y, z) -> bool:
    return not z & ({x, y} | nx.descendants(_dag(g), x)) and _dsep(g, {x}, {y}, z, no_out={x})


def _separation_ok(g, xs, ys, z) -> bool:
    return not z & (xs | ys) and _dsep(g, xs, ys, z)


def _frontdoor_i_ii(g, x, y, z) -> bool:
    if not z or z & {x, y}:
        return False
    dag = _dag(g)
    dag.remove_nodes_from(z)
    return not nx.has_path(dag, x, y) and _dsep(g, {x}, z, (), no_out={x})


def _frontdoor_set_ok(g, x, y, z) -> bool:
    return _frontdoor_i_ii(g, x, y, z) and _dsep(g, z, {y}, {x}, no_out=z)


def _frontdoor_member_ok(g, x, y, z) -> bool:
    """(iii) textbook, each member alone: every path z .. Y starting into z is blocked by {X} in G."""
    if not _frontdoor_i_ii(g, x, y, z):
        return False
    dag = _dag(g)
    return all(_blocked(dag, nodes, types, {x}) for m in z for nodes, types in _typed_paths(g, m, y)
               if types[0] in ("<-", "<->"))


def _blocking_ok(g, path, z) -> bool:
    nodes, types = path
    return not z & {nodes[0], nodes[-1]} and _blocked(_dag(g), nodes, types, z)


def _subsets(items):
    items = sorted(items)
    return [frozenset(c) for r in range(len(items) + 1) for c in combinations(items, r)]


# ---- random instances -------------------------------------------------------------------------
KINDS = ("backdoor", "separation", "frontdoor_set", "frontdoor_member", "blocking")


def _instance(kind: str, rng: random.Random):
    """(task, query, oracle(z) -> bool, candidate pool) on a random DAG/ADMG of 3..9 nodes."""
    for _ in range(50):
        n = rng.randint(3, 9)
        g = random_admg(rng, n, p=rng.uniform(0.2, 0.5), pb=rng.uniform(0.05, 0.3)) if rng.random() < 0.5 \
            else random_dag(rng, n, p=rng.uniform(0.2, 0.55))
        a, b = rng.sample(list(g.nodes), 2)
        rest = frozenset(g.nodes) - {a, b}
        if kind == "backdoor":
            return g, "backdoor_set", {"treatment": a, "outcome": b}, lambda z: _backdoor_ok(g, a, b, z), rest
        if kind == "separation":
            return g, "separation_set", {"x": [a], "y": [b]}, lambda z: _separation_ok(g, {a}, {b}, z), rest
        if kind.startswith("frontdoor"):
            crit = "set" if kind == "frontdoor_set" else "per_member"
            ok = _frontdoor_set_ok if crit == "set" else _frontdoor_member_ok
            return (g, "frontdoor_set", {"treatment": a, "outcome": b, "criterion": crit},
                    lambda z: ok(g, a, b, z), rest)
        paths = [p for p in _typed_paths(g, a, b) if len(p[0]) >= 3]
        if paths:
            path = rng.choice(paths)
            return (g, "blocking_set", {"path": {"nodes": path[0], "types": path[1]}},
                    lambda z: _blocking_ok(g, path, z), rest)
    raise AssertionError("no instance")


@pytest.mark.parametrize("kind", KINDS)
def test_minimal_maximal_match_bruteforce(kind):
    """700 random graphs per family: the family's minimal/maximal verdict on every subset equals
    brute force over all subsets; every witness it names is valid and a proper subset/superset."""
    rng = random.Random(f"minmax/{kind}")
    seen = {("minimal", True): 0, ("minimal", False): 0, ("maximal", True): 0, ("maximal", False): 0}
    for _ in range(700):
        g, task, query, oracle, rest = _instance(kind, rng)
        fam = get_family(task)
        q = fam.normalize_query(Problem(task=task, graph=g, query=query))
        valid = {z for z in _subsets(rest) if oracle(z)}
        for z in _subsets(rest):
            for variant in ("minimal", "maximal"):
                qv = dict(q, variant=variant)
                truth = z in valid and not any((s < z) if variant == "minimal" else (z < s) for s in valid)
                assert fam.predicate(g, qv, z).ok == truth, (kind, variant, g.to_text(), query, sorted(z))
                if z in valid:
                    seen[variant, truth] += 1
                    find = fam._proper_subset_valid if variant == "minimal" else fam._proper_superset_valid
                    w = find(g, qv, z)
                    assert (w is None) == truth
                    assert w is None or (w in valid and (w < z if variant == "minimal" else z < w))
    assert min(seen.values()) >= 100, seen  # both verdicts are exercised for both variants


# ---- separators with 15-22 candidates -----------------------------------------------------------
def _big_separator_instance(rng: random.Random):
    """A sparse random core plus "poison" nodes (X <-> P, children of core nodes, which open
    colliders when conditioned on, and parents of core nodes) until 15..22 candidates remain."""
    while True:
        n0 = rng.randint(7, 10)
        core = random_admg(rng, n0, p=0.3, pb=0.15) if rng.random() < 0.5 else random_dag(rng, n0, p=0.3)
        x, y = rng.sample(list(core.nodes), 2)
        directed, bi = set(core.directed), set(core.bidirected)
        nodes = list(core.nodes)
        for i in range(rng.randint(8, 14)):
            p, c = f"P{i}", rng.choice(list(core.nodes))
            kind = rng.choice(("bi_x", "child", "child", "parent"))
            if kind == "bi_x":
                bi.add((p, x))
            elif kind == "child":
                directed.add((c, p))
            else:
                directed.add((p, c))
            nodes.append(p)
        g = CausalGraph.build(nodes, sorted(directed), sorted(bi), GraphClass.ADMG if bi else GraphClass.DAG)
        task = rng.choice(("backdoor_set", "separation_set"))
        query = {"treatment": x, "outcome": y} if task == "backdoor_set" else {"x": [x], "y": [y]}
        fam = get_family(task)
        q = fam.normalize_query(Problem(task=task, graph=g, query=query))
        cands = frozenset(fam.candidates(g, q))
        if 15 <= len(cands) <= 22:
            return g, fam, q, cands


def _brute_exists(fam, g, q, z, cands, variant, budget=1 << 18):
    """Brute force: is some proper subset (minimal) / superset within cands (maximal) valid?
    None when it would take more than ``budget`` tests."""
    free = sorted(z) if variant == "minimal" else sorted(cands - z)
    if 2 ** len(free) > budget:
        return None
    for r in range(len(free) + 1):
        for c in combinations(free, r):
            s = (z - frozenset(c)) if variant == "minimal" else (z | frozenset(c))
            if s != z and fam.is_base_valid(g, q, s):
                return True
    return False


def test_separators_with_many_candidates_match_bruteforce():
    rng = random.Random("minmax/big")
    checked = {"minimal": [0, 0], "maximal": [0, 0]}
    for _ in range(60):
        g, fam, q, cands = _big_separator_instance(rng)
        x, y = ((q["treatment"], q["outcome"]) if fam.name == "backdoor_set"
                else (next(iter(q["x"])), next(iter(q["y"]))))
        start = frozenset(cands & P.ancestors(g, [x, y]))  # R ∩ An(X ∪ Y): valid iff any set is
        if not fam.is_base_valid(g, q, start):
            continue
        for variant in ("maximal", "minimal"):
            qv = dict(q, variant=variant)
            find = fam._proper_superset_valid if variant == "maximal" else fam._proper_subset_valid
            z, chain = start, []
            while z is not None:  # walk to a maximal/minimal set by the family's witnesses
                chain.append(z)
                z = find(g, qv, z)
            last = chain[-1]
            tests = chain + [last - {n} for n in sorted(last)[:3]] + [last | {n} for n in sorted(cands - last)[:3]]
            for z in tests:
                if not fam.is_base_valid(g, q, z):
                    assert not fam.predicate(g, qv, z).ok
                    continue
                brute = _brute_exists(fam, g, q, z, cands, variant)
                if brute is None:
                    continue
                w = find(g, qv, z)
                assert (w is not None) == brute, (fam.name, variant, g.to_text(), q, sorted(z))
                assert fam.predicate(g, qv, z).ok == (not brute)
                checked[variant][brute] += 1
                if w is not None:  # the witness is valid by the networkx oracle
                    ok = _backdoor_ok(g, x, y, w) if fam.name == "backdoor_set" else _separation_ok(g, {x}, {y}, w)
                    assert ok and (w < z if variant == "minimal" else z < w)
    assert all(min(v) >= 20 for v in checked.values()), checked


# ---- front door ---------------------------------------------------------------------------------
def _problem(task, edges, kind=None, **query):
    return Problem(task=task, graph=parse_graph(edges, kind=kind), query=query)


def test_audit_fd_maximal_repro_grades_exactly():
    # the audit's case: 15 "poison" nodes V0 <-> Pi push the candidates past the old limit
    p = Problem.from_dict(json.loads((REPRO / "fd_maximal_problem.json").read_text()))
    assert not grade(p, {"V4"}) and grade(p, {"V2", "V3", "V4"})
    assert not grade(p, {"V2", "V4"}) and not grade(p, {"V3", "V4"})
    trace = p.family.canonical_trace(p, {"V4"}).replace("RESULT: invalid", "RESULT: valid")
    s = score(trace, p)
    assert s.bits[2] == 0 and "not maximal: {V2, V3, V4}" in s.reasons["STRATEGY"]


def _gadgets(k: int) -> str:
    """The audit's core (X=V0, Y=V1, {V4} valid) plus k pairs Ai, Bi that are only addable together."""
    edges = ["V0 -> V5", "V1 <-> V5", "V4 <-> V5"]
    for i in range(k):
        edges += [f"A{i} -> V1", f"A{i} -> B{i}", f"B{i} -> V1", f"A{i} <-> B{i}"]
    return ", ".join(edges)


def test_frontdoor_maximal_is_exact_with_many_candidates():
    """Nine pairs (18 candidates past the pruning) that are addable only together: {V4} is not
    maximal and the witness is the whole pruned pool."""
    p = _problem("frontdoor_set", _gadgets(9), "ADMG", treatment="V0", outcome="V1", variant="maximal")
    everything = frozenset({"V4"} | {f"{c}{i}" for c in "AB" for i in range(9)})
    assert not grade(p, {"V4"}) and not grade(p, {"V4", "A0"}) and grade(p, everything)
    q = p.family.normalize_query(p)
    assert p.family._proper_superset_valid(p.graph, q, frozenset({"V4"})) == everything


def test_frontdoor_minimal_is_exact_with_many_free_members():
    """Z = the gadget pairs: only whole pairs can be dropped, so no one-removal is valid; the exact
    check (one search per member, no subset enumeration) finds a valid proper subset whatever the
    number of pairs (the old exhaustive search failed closed past 8)."""
    pairs = lambda k: {f"{c}{i}" for c in "AB" for i in range(k)}  # noqa: E731
    for k in (8, 9, 40):
        p = _problem("frontdoor_set", _gadgets(k), "ADMG", treatment="V0", outcome="V1", variant="minimal")
        assert grade(p, {"A0", "B0"}) and not grade(p, pairs(k))
        q = p.family.normalize_query(p)
        w = p.family._proper_subset_valid(p.graph, q, frozenset(pairs(k)))
        assert w < pairs(k) and p.family.is_base_valid(p.graph, q, w)
        trace = p.family.canonical_trace(p, pairs(k)).replace("RESULT: invalid", "RESULT: valid")
        assert "valid but not minimal" in score(trace, p).reasons["STRATEGY"]


def test_frontdoor_minimal_forced_members_are_exact():
    """17 parallel mediators: each is the only one on its directed path, so the whole set is
    minimal (pruning forces every member; no 2^17 search)."""
    edges = ", ".join(f"X -> M{i}, M{i} -> Y" for i in range(17))
    p = _problem("frontdoor_set", edges, treatment="X", outcome="Y", variant="minimal")
    ms = {f"M{i}" for i in range(17)}
    assert grade(p, ms) and not grade(p, ms - {"M0"})


WORKED = "V0 -> V2, V2 -> V1, V2 -> V3"  # the audit's smallest case where the readings differ


@pytest.mark.parametrize("criterion,valid", [("set", True), ("per_member", False)])
def test_frontdoor_criterion_worked_example(criterion, valid):
    p = _problem("frontdoor_set", WORKED, treatment="V0", outcome="V3", criterion=criterion)
    assert grade(p, {"V1", "V2"}) == valid
    assert grade(p, {"V2"})  # valid under both readings
    if not valid:
        reason = p.family.predicate(p.graph, p.family.normalize_query(p), frozenset({"V1", "V2"})).reason
        assert "V1 <- V2 -> V3" in reason


def test_frontdoor_per_member_matches_path_enumeration():
    rng = random.Random("fd/per_member")
    n_diff = 0
    for _ in range(400):
        n = rng.randint(3, 8)
        g = random_admg(rng, n, p=rng.uniform(0.2, 0.5)) if rng.random() < 0.6 else random_dag(rng, n, p=0.45)
        x, y = rng.sample(list(g.nodes), 2)
        for z in _subsets(set(g.nodes) - {x, y}):
            if not z:
                continue
            want = _frontdoor_member_ok(g, x, y, z)
            assert P.is_frontdoor_set(g, x, y, z, criterion="per_member") == want, (g.to_text(), x, y, sorted(z))
            assert (P.frontdoor_violation(g, x, y, z, criterion="per_member") is None) == want
            n_diff += want != P.is_frontdoor_set(g, x, y, z)
    assert n_diff > 0  # the readings do differ on some of these graphs


def test_frontdoor_criterion_query_slot_is_optional_at_the_default():
    fam = get_family("frontdoor_set")
    p_set = _problem("frontdoor_set", WORKED, treatment="V0", outcome="V3")
    p_mem = _problem("frontdoor_set", WORKED, treatment="V0", outcome="V3", criterion="per_member")
    assert fam.normalize_query(p_set)["criterion"] == "set"
    t_set, t_mem = fam.canonical_trace(p_set, {"V2"}), fam.canonical_trace(p_mem, {"V2"})
    assert "criterion" not in t_set and "criterion=per_member" in t_mem
    assert score(t_set, p_set).total == 6 and score(t_mem, p_mem).total == 6
    assert score(t_set.replace("variant=any", "variant=any; criterion=set"), p_set).total == 6
    omitted = score(t_set, p_mem)  # a per_member problem needs the QUERY slot to say so
    assert omitted.bits[1] == 0 and "criterion" in omitted.reasons["QUERY"]
    assert score(t_mem, p_set).bits[1] == 0
    with pytest.raises(ProblemError, match="criterion"):
        fam.normalize_query(_problem("frontdoor_set", WORKED, treatment="V0", outcome="V3", criterion="pairs"))


def test_clear_frontdoor_items_use_the_per_member_reading():
    from calver.data_gen.clear import map_question

    task, query = map_question("Find one valid front-door adjustment set for treatment X1 and outcome Y1.")
    assert task == "frontdoor_set" and query["criterion"] == "per_member"
    assert "criterion" not in map_question("Find one valid backdoor adjustment set from X1 to Y1.")[1]


# ---- load-time refusals, signatures -------------------------------------------------------------
@pytest.mark.parametrize("task", ["backdoor_set", "frontdoor_set"])
def test_treatment_equal_outcome_is_refused_at_load(task):
    p = _problem(task, "X -> Y", treatment="X", outcome="X")
    with pytest.raises(ProblemError, match="must differ"):
        p.family.normalize_query(p)
    with pytest.raises(ProblemError):
        score("ANSWER: {}", p)


def test_every_validity_class_accepts_limit():
    assert "limit" in inspect.signature(TaskFamily.validity_class).parameters
    for name, fam in families().items():
        assert "limit" in inspect.signature(fam.validity_class).parameters, name
    fam = get_family("backdoor_set")
    g = parse_graph("A -> X, A -> Y, X -> Y, B -> Y")
    q = fam.normalize_query(Problem(task="backdoor_set", graph=g, query={"treatment": "X", "outcome": "Y"}))
    assert fam.validity_class(g, q, limit=1) == [frozenset({"A"})]
    assert fam.validity_class(g, q) == [frozenset({"A"}), frozenset({"A", "B"})]
