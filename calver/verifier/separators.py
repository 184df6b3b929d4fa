"""Exact minimal / maximal separators in linear time (masks, as in :mod:`calver.verifier.primitives`).

Both tests run in the graph G' where separation is tested (G without the outgoing directed edges of
``no_out``), and rest on two facts:

* van der Zander, Liśkiewicz & Textor (2019): for I ⊆ R, some separator Z with I ⊆ Z ⊆ R exists iff
  R ∩ An(X ∪ Y ∪ I) is one. It holds for m-separation in ADMGs (see the next fact: the augmented
  graph of a larger ancestral set contains the one of a smaller set).
* Richardson (2003): Z m-separates X and Y iff Z separates them in the augmented graph of the
  ancestral set A = An(X ∪ Y ∪ Z): a – b when a collider path (every inner node a collider) joins
  them in G'[A] (for a DAG, the moral graph). A path of that graph with inner nodes outside Z is a
  walk of G'[A] whose non-colliders avoid Z and whose colliders are free: :func:`_augmented_reach`.

**Minimal.** If Z ⊄ A₀ = An(X ∪ Y), Z ∩ A₀ is a smaller separator (the lemma, R = Z, I = ∅). Else the
augmented graph is that of A₀ for Z and every subset of Z, and a separator inside Z ∖ {v} exists iff
Z ∖ {v} separates, i.e. iff v lacks a neighbour in X's or in Y's component of the augmented graph
minus Z (a path X … Y avoiding Z ∖ {v} passes v, entering from X's side and leaving to Y's). Two
searches decide every v.

**Maximal.** A = An(X ∪ Y ∪ Z). If R ∩ A ≠ Z it is a larger separator (the lemma, I = Z). Else a
larger one exists iff some v ∈ R ∖ A has C_v = R ∩ An(A ∪ {v}) separating. When no node outside A ∪ R
is an ancestor of R ∖ A (true for separation and back-door sets), C_v = Z ∪ N_v with
N_v = An(v) ∖ A, so its augmented graph minus C_v is a graph on A ∖ Z whose edges only grow with N_v:
if C_v separates, so does C_r for every r ∈ N_v, in particular for a *root* r (every parent in A;
N_r = {r}). For a root, Z ∪ {r} separates unless collider paths through r join X's side to Y's, i.e.
unless both searches of the minimal test (now over A) enter r through an arrowhead. Two searches
decide every root.
"""

from __future__ import annotations

from calver.verifier.budget import WorkBudget
from calver.verifier.graph import CausalGraph
from calver.verifier.paths import bits, closure
from calver.verifier.primitives import _connected, _require_acyclic


def _an(g: CausalGraph, seed: int, no_out: int) -> int:
    return closure(g.parents_mask, seed, no_out) | seed  # an out-edge of no_out is gone


def _augmented_reach(g: CausalGraph, start: int, anc: int, zm: int, no_out: int) -> tuple[int, int]:
    """(nodes of the ancestral set ``anc`` reached from ``start``, nodes outside ``anc`` entered
    through an arrowhead) by walks of G'[anc] whose non-colliders avoid ``zm`` (colliders free).
    A reached node of Z is an end of such a walk; it continues only as a collider."""
    pm, cm, sm = g.parents_mask, g.children_mask, g.siblings_mask
    keep, notz = ~no_out, ~zm
    up, down, entered = start, 0, 0  # visited: arrived with a tail mark / with an arrowhead
    fu, fd = start & notz, 0
    while fu or fd:
        nu = nd = 0
        m = fu  # entered through a tail, not in Z: a non-collider, any edge out
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
            if low & keep:
                nd |= cm[i]
        m = fd & notz & keep  # entered through an arrowhead, out through a tail: a non-collider
        while m:
            low = m & -m
            m ^= low
            nd |= cm[low.bit_length() - 1]
        m = fd  # out through an arrowhead: a collider, free inside anc
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
        entered |= nd & ~anc
        nu &= keep & anc & ~up  # a parent of an anc node is in anc (unless its edge is gone)
        nd &= anc & ~down
        up |= nu
        down |= nd
        fu, fd = nu & notz, nd
    return up | down, entered


def smaller_separator(g: CausalGraph, xm: int, ym: int, zm: int, no_out: int = 0) -> int | None:
    """A separating proper subset of the separator ``zm`` (mask), or None when ``zm`` is minimal.
    Linear: see the module docstring."""
    _require_acyclic(g, "d-/m-separation")
    a0 = _an(g, xm | ym, no_out)
    if zm & ~a0:
        return zm & a0
    from_x, _ = _augmented_reach(g, xm, a0, zm, no_out)
    from_y, _ = _augmented_reach(g, ym, a0, zm, no_out)
    lone = zm & ~(from_x & from_y)
    return zm & ~(lone & -lone) if lone else None


def larger_separator(g: CausalGraph, xm: int, ym: int, zm: int, rm: int, no_out: int = 0,
                     budget: WorkBudget | None = None) -> int | None:
    """A separating proper superset (within ``rm``) of the separator ``zm``, or None when ``zm`` is
    maximal. Linear (see the module docstring) unless a node outside A ∪ R is an ancestor of
    R ∖ A; then one test per candidate v ∈ R ∖ A, charged to ``budget``."""
    _require_acyclic(g, "d-/m-separation")
    base = _an(g, xm | ym | zm, no_out)
    cand = rm & base
    if cand != zm and not _connected(g, xm, ym, cand, no_out):
        return cand
    outside = rm & ~base
    if not outside:
        return None
    pm = g.parents_mask
    if closure(pm, outside, no_out) & ~base & ~rm:
        return _larger_by_search(g, xm, ym, zm, rm, no_out, base, budget or WorkBudget(what="the maximality check"))
    _, in_x = _augmented_reach(g, xm, base, zm, no_out)
    _, in_y = _augmented_reach(g, ym, base, zm, no_out)
    keep = ~no_out
    for i in bits(outside & ~(in_x & in_y)):
        if not pm[i] & keep & ~base:  # a root: Z ∪ {i} separates
            cand = zm | 1 << i
            if not _connected(g, xm, ym, cand, no_out):
                return cand
    return None


def _larger_by_search(g, xm, ym, zm, rm, no_out, base, budget: WorkBudget) -> int | None:
    cost = 32 + len(g.nodes) + len(g.directed) + len(g.bidirected)  # one closure and one Bayes-ball
    for i in bits(rm & ~base):
        budget.spend(cost)
        cand = rm & _an(g, xm | ym | zm | (1 << i), no_out)
        if not _connected(g, xm, ym, cand, no_out):
            return cand
    return None
