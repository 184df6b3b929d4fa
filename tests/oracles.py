"""Independent oracles from the hostile verifier audit of 2026-12-01 (``tools/oracle.py`` and
``tools/kkoracle.py`` of its repro folder), merged and reformatted; the logic is the audit's, unchanged.
They use no calver code: a graph is a :class:`G` over plain ``(nodes, D, B)``, a K&K puzzle is plain
people and statement strings, and the ATE is exact rational arithmetic over the CPT text.

* Graphs: ``G(nodes, D, B)`` with ``D`` a set of directed pairs ``(a, b)`` and ``B`` bidirected pairs.
  Brute-force typed simple-path enumeration (:meth:`G.paths`), Pearl's back-door (:func:`backdoor`) and
  front-door (:func:`frontdoor`, both criteria) definitions, path blocking (:func:`blocks`),
  m-separation by paths (:func:`msep_paths`) and by networkx on the latent projection (:func:`msep_nx`),
  brute-force minimality / maximality over all subsets (:func:`minimal_ok`, :func:`maximal_ok`),
  mediators (:func:`mediators`), reachability after ``do`` (:func:`reach_after_do`) and directed cycles
  (:func:`is_cycle`).
* Knights and knaves: an own formula tokenizer / parser / evaluator (:func:`parse`, :func:`ev`) and a
  brute-force solver over every assignment (:func:`kk_solutions`).
* ATE: the CPTs as ``fractions.Fraction`` (:func:`cpt_from_problem`, which reads only ``p.data["cpts"]``)
  and the exact effect by truncated factorization (:func:`exact_ate`).

``tests/attack_battery.py`` decides "wrong" with these; ``benchmarks/attack_bench.py`` runs it at scale.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

import networkx as nx

from calver.verifier.logic import Atom, Bin, Not


# ---- typed graphs -------------------------------------------------------------------------------
class G:
    def __init__(self, nodes, D, B):
        self.nodes = list(nodes)
        self.D = set(D)
        self.B = set(frozenset(e) for e in B)
        self.ch = {v: set() for v in self.nodes}
        self.pa = {v: set() for v in self.nodes}
        self.sib = {v: set() for v in self.nodes}
        for a, b in self.D:
            self.ch[a].add(b)
            self.pa[b].add(a)
        for e in self.B:
            a, b = tuple(e)
            self.sib[a].add(b)
            self.sib[b].add(a)

    def de(self, v):
        """Proper descendants."""
        out, st = set(), [v]
        while st:
            u = st.pop()
            for c in self.ch[u]:
                if c not in out:
                    out.add(c)
                    st.append(c)
        return out

    def an(self, v):
        out, st = set(), [v]
        while st:
            u = st.pop()
            for c in self.pa[u]:
                if c not in out:
                    out.add(c)
                    st.append(c)
        return out

    def nbrs(self, v):
        for c in sorted(self.ch[v]):
            yield c, "->"
        for p in sorted(self.pa[v]):
            yield p, "<-"
        for s in sorted(self.sib[v]):
            yield s, "<->"

    def paths(self, s, t, first=None, maxlen=None):
        """All simple typed paths s..t: (nodes, types); first: allowed types of the first edge."""
        out = []

        def rec(nodes, types):
            v = nodes[-1]
            for w, ty in self.nbrs(v):
                if w in nodes:
                    continue
                if not types and first is not None and ty not in first:
                    continue
                if w == t:
                    out.append((nodes + [w], types + [ty]))
                    continue
                if maxlen is None or len(types) + 1 < maxlen:
                    rec(nodes + [w], types + [ty])

        rec([s], [])
        return out

    def directed_paths(self, s, t):
        return [p for p in self.paths(s, t) if all(x == "->" for x in p[1])]

    def without_out(self, S):
        return G(self.nodes, {(a, b) for a, b in self.D if a not in S}, [tuple(e) for e in self.B])

    def acyclic(self):
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from(self.D)
        return nx.is_directed_acyclic_graph(g)


def path_open(g, nodes, types, Z):
    for k in range(1, len(nodes) - 1):
        v = nodes[k]
        head_in = types[k - 1] in ("->", "<->")  # arrowhead at v from the left edge
        head_out = types[k] in ("<-", "<->")  # arrowhead at v from the right edge
        if head_in and head_out:
            if not (v in Z or (g.de(v) & Z)):
                return False
        else:
            if v in Z:
                return False
    return True


def msep_paths(g, X, Y, Z):
    for x in X:
        for y in Y:
            for nodes, types in g.paths(x, y):
                if path_open(g, nodes, types, Z):
                    return False
    return True


def msep_nx(g, X, Y, Z):
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes)
    h.add_edges_from(g.D)
    for i, e in enumerate(sorted(tuple(sorted(e)) for e in g.B)):
        u = f"__U{i}"
        h.add_edge(u, e[0])
        h.add_edge(u, e[1])
    return nx.is_d_separator(h, set(X), set(Y), set(Z))


def backdoor(g, x, y, Z):
    Z = set(Z)
    if x in Z or y in Z or (g.de(x) & Z):
        return False
    for nodes, types in g.paths(x, y, first=("<-", "<->")):
        if path_open(g, nodes, types, Z):
            return False
    return True


def frontdoor(g, x, y, Z, criterion="set"):
    Z = set(Z)
    if not Z or x in Z or y in Z:
        return False
    for nodes, _ in g.directed_paths(x, y):  # (i)
        if not (set(nodes[1:-1]) & Z):
            return False
    for z in Z:  # (ii)
        for nodes, types in g.paths(x, z, first=("<-", "<->")):
            if path_open(g, nodes, types, set()):
                return False
    if criterion == "per_member":  # (iii) textbook
        for z in Z:
            for nodes, types in g.paths(z, y, first=("<-", "<->")):
                if path_open(g, nodes, types, {x}):
                    return False
        return True
    h = g.without_out(Z)  # (iii) set reading, via networkx
    return msep_nx(h, Z, {y}, {x})


def blocks(g, nodes, types, Z):
    Z = set(Z)
    if nodes[0] in Z or nodes[-1] in Z:
        return False
    return not path_open(g, nodes, types, Z)


def subsets(pool):
    pool = sorted(pool)
    for r in range(len(pool) + 1):
        for c in itertools.combinations(pool, r):
            yield frozenset(c)


def minimal_ok(valid_fn, Z):
    return valid_fn(Z) and not any(valid_fn(S) for S in subsets(Z) if S != Z)


def maximal_ok(valid_fn, Z, cands):
    return valid_fn(Z) and not any(valid_fn(Z | S) for S in subsets(set(cands) - Z) if S)


def mediators(g, x, y, direct=False):
    if direct:
        return {m for m in g.nodes if m not in (x, y) and (x, m) in g.D and (m, y) in g.D}
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes)
    h.add_edges_from(g.D)
    a = h.copy()
    a.remove_node(y)
    from_x = nx.descendants(a, x)
    b = h.copy()
    b.remove_node(x)
    to_y = nx.ancestors(b, y)
    return (from_x & to_y) - {x, y}


def reach_after_do(g, do, s, t):
    h = nx.DiGraph()
    h.add_nodes_from(g.nodes)
    h.add_edges_from((a, b) for a, b in g.D if b not in do)
    return nx.has_path(h, s, t)


def is_cycle(g, seq):
    if not seq or len(set(seq)) != len(seq):
        return False
    return all((seq[i], seq[(i + 1) % len(seq)]) in g.D for i in range(len(seq)))


# ---- knights and knaves: an own formula parser and brute-force solver ----------------------------
TOK = re.compile(r"\s*(<->|<=>|->|=>|[()&|~!¬∧∨↔→]|[A-Za-z][A-Za-z0-9_]*)")
_ALIASES = {"<=>": "<->", "↔": "<->", "=>": "->", "→": "->", "&": "and", "∧": "and", "|": "or", "∨": "or",
            "~": "not", "!": "not", "¬": "not", "iff": "<->", "implies": "->"}
_LOWER_KEY = ("iff", "implies", "and", "or", "not", "true", "false", "knight", "knave")
_LOWER_DEFAULT = ("and", "or", "not", "true", "false", "knight", "knave")


def toks(s):
    out, i = [], 0
    s = s.strip()
    while i < len(s):
        m = TOK.match(s, i)
        if not m:
            raise ValueError(f"bad char at {i}: {s[i:i + 10]!r}")
        t = m.group(1)
        low = t.lower()
        t = _ALIASES.get(low if low in _LOWER_KEY else t, low if low in _LOWER_DEFAULT else t)
        out.append(t)
        i = m.end()
    return out


def parse(s):
    ts = toks(s)
    pos = [0]

    def peek():
        return ts[pos[0]] if pos[0] < len(ts) else None

    def eat(x=None):
        t = peek()
        if x is not None and t != x:
            raise ValueError(f"expected {x} got {t}")
        pos[0] += 1
        return t

    def iff():
        lhs = imp()
        while peek() == "<->":
            eat()
            rhs = imp()
            lhs = ("iff", lhs, rhs)
        return lhs

    def imp():
        lhs = dis()
        if peek() == "->":
            eat()
            return ("imp", lhs, imp())
        return lhs

    def dis():
        lhs = con()
        while peek() == "or":
            eat()
            lhs = ("or", lhs, con())
        return lhs

    def con():
        lhs = una()
        while peek() == "and":
            eat()
            lhs = ("and", lhs, una())
        return lhs

    def una():
        t = peek()
        if t == "not":
            eat()
            return ("not", una())
        if t == "(":
            eat()
            f = iff()
            eat(")")
            return f
        if t in ("true", "false"):
            eat()
            return ("const", t == "true")
        if t in ("knight", "knave"):
            eat()
            eat("(")
            name = eat()
            eat(")")
            return ("lit", name, t == "knight")
        raise ValueError(f"unexpected {t}")

    f = iff()
    if pos[0] != len(ts):
        raise ValueError("trailing")
    return f


def ev(f, v):
    k = f[0]
    if k == "lit":
        return v[f[1]] == f[2]
    if k == "const":
        return f[1]
    if k == "not":
        return not ev(f[1], v)
    a, b = ev(f[1], v), ev(f[2], v)
    return {"and": a and b, "or": a or b, "imp": (not a) or b, "iff": a == b}[k]


def kk_solutions(people, statements):
    fs = {s: [parse(x) for x in (said if isinstance(said, list) else [said])] for s, said in statements.items()}
    sols = []
    for bits in itertools.product((True, False), repeat=len(people)):
        v = dict(zip(people, bits))
        if all(all(ev(f, v) == v[s] for f in fl) for s, fl in fs.items()):
            sols.append(v)
    return sols


def kk_heads(f) -> list[str]:
    """Syntactic speakers of a calver formula ``lit(S) <-> φ`` / ``φ <-> lit(S)`` (the contract's
    attribution rule), walked here instead of through ``calver.verifier.logic.speakers``."""
    if not (isinstance(f, Bin) and f.op == "<->"):
        return []
    out = []
    for side in (f.left, f.right):
        while isinstance(side, Not):
            side = side.arg
        if isinstance(side, Atom) and side.name not in out:
            out.append(side.name)
    return out


# ---- ATE: exact rationals from the CPT text ------------------------------------------------------
CPT = re.compile(r"^\s*P\s*\(\s*(\w+)\s*=\s*1\s*(?:\|([^)]*))?\)\s*=\s*([0-9.eE+-]+)\s*$")


def cpt_from_problem(p):
    cp = p.data["cpts"]
    lines = cp.splitlines() if isinstance(cp, str) else list(cp) if isinstance(cp, list) else None
    tab = {}
    if lines is None:
        for v, spec in cp.items():
            ps = list(spec.get("parents") or [])
            for i, pr in enumerate(spec["p1"]):
                cfg = tuple((ps[j], (i >> (len(ps) - 1 - j)) & 1) for j in range(len(ps)))
                tab.setdefault(v, {})[frozenset(cfg)] = Fraction(str(pr))
        return tab
    for ln in lines:
        m = CPT.match(ln)
        v, cond, pr = m.group(1), m.group(2), m.group(3)
        cfg = frozenset() if not cond else frozenset(
            (a.strip().split("=")[0].strip(), int(a.strip().split("=")[1])) for a in cond.split(","))
        tab.setdefault(v, {})[cfg] = Fraction(pr)
    return tab


def exact_ate(p, x, y):
    tab = cpt_from_problem(p)
    nodes = sorted(tab)

    def pdo(xv):
        tot = Fraction(0)
        for bits in itertools.product((0, 1), repeat=len(nodes)):
            a = dict(zip(nodes, bits))
            if a[x] != xv:
                continue
            pr = Fraction(1)
            for v in nodes:
                if v == x:
                    continue
                cfg = next(c for c in tab[v] if all(a[k] == val for k, val in c))
                q = tab[v][cfg]
                pr *= q if a[v] else 1 - q
            if a[y]:
                tot += pr
        return tot

    return pdo(1) - pdo(0)
