"""Fast graph primitives for grading: d-/m-separation, back-door and front-door criteria,
mediators, directed reachability under intervention, cycle witnesses and valid-set enumeration.

All algorithms are bitmask based (bit ``i`` of an ``int`` is node ``g.nodes[i]``) and run on the
adjacency precomputed by :class:`~calver.verifier.graph.CausalGraph`; networkx is only the test
oracle. Node-set arguments take any iterable of node names, or a single name string meaning one
node; unknown names raise :class:`GraphError`.

Separation is Bayes-ball reachability over states (node, arrived-with-arrowhead?) with bitmask
frontiers. A walk leaves a node it entered with a tail mark freely unless the node is in Z; a
node entered with an arrowhead passes on through a tail (non-collider) if it is not in Z, and
back out through an arrowhead (collider) if it is in Z (the fast check, where a walk may bounce
off a descendant in Z) or in An(Z) ∪ Z (the witness search, which returns a simple path: in an
acyclic graph a shortest such walk never repeats a node). Bidirected edges carry
arrowheads at both ends, so the same machinery gives m-separation on ADMGs. Separation (and
everything built on it) requires an acyclic directed part and raises otherwise.
"""

from __future__ import annotations

import inspect
from collections import deque
from itertools import combinations
from typing import Callable, Iterable

from calver.verifier.graph import CausalGraph, GraphError
from calver.verifier.paths import (  # noqa: F401  (re-exported)
    Nodes,
    ancestors,
    ancestors_mask,
    bits,
    blocks_path,
    closure,
    descendants,
    descendants_mask,
    directed_path_exists,
    directed_path_indices,
    find_directed_cycle,
    find_directed_path,
    fmt_nodes,
    fmt_set,
    format_path,
    is_directed_cycle,
    is_path,
    node_mask,
    path_edges,
    reachable_after_do,
    single_node,
)

__all__ = [
    "ancestors", "descendants", "ancestors_mask", "descendants_mask",
    "is_separated", "is_d_separated", "is_m_separated", "open_path", "find_open_path",
    "backdoor_violation", "is_backdoor_set", "frontdoor_violation", "is_frontdoor_set", "FRONTDOOR_CRITERIA",
    "path_edges", "is_path", "blocks_path", "format_path",
    "find_directed_cycle", "is_directed_cycle",
    "directed_path_exists", "find_directed_path", "reachable_after_do",
    "is_mediator", "mediators",
    "enumerate_valid_sets", "minimal_sets", "maximal_sets", "is_minimal_valid", "is_maximal_valid",
]


# ---- separation --------------------------------------------------------------------------
def _require_acyclic(g: CausalGraph, what: str) -> None:
    if not g.acyclic:
        cycle = find_directed_cycle(g) or []
        shown = " -> ".join(cycle + cycle[:1])
        raise GraphError(f"{what} is only defined for acyclic graphs; this graph has the directed cycle {shown}")


def _sep_masks(g: CausalGraph, xs: Nodes, ys: Nodes, zs: Nodes) -> tuple[int, int, int]:
    _require_acyclic(g, "d-/m-separation")
    xm, ym, zm = node_mask(g, xs), node_mask(g, ys), node_mask(g, zs)
    if xm & ym:
        raise GraphError(f"X and Y must be disjoint; both contain {fmt_set(g, xm & ym)}")
    if zm & (xm | ym):
        raise GraphError(f"the conditioning set Z may not contain X or Y nodes; "
                         f"it contains {fmt_set(g, zm & (xm | ym))}")
    return xm, ym, zm


def _reach(g: CausalGraph, xm: int, zm: int, no_out: int = 0, stop: int = 0, states: bool = False):
    """Mask of the nodes outside X ∪ Z that are d-/m-connected to some node of ``xm`` given
    ``zm``, in the graph with the outgoing directed edges of ``no_out`` deleted; returns early
    (a partial mask) once a node of ``stop`` is reached. With ``states``: the masks (reached with a
    tail mark, reached with an arrowhead) instead. (Masks assumed valid.)

    Walk form of Bayes-ball: colliders pass only when in Z itself, because a collider with a
    descendant in Z is handled by the walk going down to that descendant and bouncing back up
    (walk connection with colliders in Z equals path connection with colliders in An(Z))."""
    pm, cm, sm = g.parents_mask, g.children_mask, g.siblings_mask
    keep = ~no_out
    notz = ~zm
    up, down = xm, 0  # visited: arrived with a tail mark / with an arrowhead
    fu, fd = xm & notz, 0
    while fu or fd:
        nu = nd = 0
        m = fu  # entered through a tail, not in Z: any edge out is a non-collider move
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
            if not low & no_out:
                nd |= cm[i]
        m = fd & notz & keep  # entered through an arrowhead, leave through a tail (non-collider)
        while m:
            low = m & -m
            m ^= low
            nd |= cm[low.bit_length() - 1]
        m = fd & zm  # collider in Z: leave through an arrowhead (bounce)
        while m:
            low = m & -m
            i = low.bit_length() - 1
            m ^= low
            nu |= pm[i]
            nd |= sm[i]
        nu &= keep & ~up
        nd &= ~down
        up |= nu
        down |= nd
        if (nu | nd) & stop:
            break
        fu = nu & notz
        fd = nd
    return (up, down) if states else (up | down) & ~(xm | zm)


def _connected(g: CausalGraph, xm: int, ym: int, zm: int, no_out: int = 0) -> bool:
    """Is some node of ``ym`` d-/m-connected to ``xm`` given ``zm``, in the graph with the
    outgoing directed edges of ``no_out`` deleted? (Masks assumed valid; see :func:`_reach`.)"""
    if not xm or not ym:
        return False
    return bool(_reach(g, xm, zm, no_out, ym) & ym)


def _open_walk(g: CausalGraph, xm: int, ym: int, zm: int, no_out: int = 0) -> tuple[list[int], list[str]] | None:
    """Shortest d-/m-connecting path from ``xm`` to ``ym`` given ``zm`` as (indices, edge types),
    or None. Breadth-first over (node, arrowhead?) states; in an acyclic graph a shortest
    connecting walk never repeats a node (any repeat could be short-cut), so it is a path."""
    if not xm or not ym:
        return None
    pm, cm, sm = g.parents_mask, g.children_mask, g.siblings_mask
    anz = closure(pm, zm, no_out) | zm
    keep = ~no_out
    prev: dict[int, tuple[int, str]] = {}
    seen = [xm, 0]
    queue = deque(2 * i for i in bits(xm & ~zm))
    while queue:
        s = queue.popleft()
        i, d = s >> 1, s & 1
        low = 1 << i
        ch = 0 if low & no_out else cm[i]
        moves: list[tuple[int, int, str]] = []
        if d == 0:
            moves = [(pm[i] & keep, 0, "<-"), (ch, 1, "->"), (sm[i], 1, "<->")]
        else:
            if not low & zm:
                moves.append((ch, 1, "->"))
            if low & anz:
                moves += [(pm[i] & keep, 0, "<-"), (sm[i], 1, "<->")]
        for mask, nd, et in moves:
            new = mask & ~seen[nd]
            seen[nd] |= new
            for j in bits(new):
                st = 2 * j + nd
                prev[st] = (s, et)
                if ym >> j & 1:
                    nodes, types = [j], []
                    while st in prev:
                        st, e = prev[st]
                        types.append(e)
                        nodes.append(st >> 1)
                    nodes.reverse()
                    types.reverse()
                    if len(set(nodes)) != len(nodes):  # pragma: no cover - impossible when acyclic
                        raise RuntimeError("internal error: connecting walk repeats a node")
                    return nodes, types
                if nd == 1 or not (1 << j) & zm:
                    queue.append(st)
    return None


def is_separated(g: CausalGraph, xs: Nodes, ys: Nodes, zs: Nodes = (), *, remove_outgoing_of: Nodes = None) -> bool:
    """d-separation (DAG) / m-separation (ADMG) of X and Y given Z, optionally in the graph with
    the outgoing directed edges of ``remove_outgoing_of`` deleted. X, Y disjoint; Z disjoint from
    both; empty X or Y is trivially separated. Cyclic graphs raise :class:`GraphError`."""
    xm, ym, zm = _sep_masks(g, xs, ys, zs)
    return not _connected(g, xm, ym, zm, node_mask(g, remove_outgoing_of))


is_d_separated = is_separated
is_m_separated = is_separated


def find_open_path(
    g: CausalGraph, xs: Nodes, ys: Nodes, zs: Nodes = (), remove_outgoing_of: Nodes = None
) -> tuple[list[str], list[str]] | None:
    """A shortest open (d-/m-connecting) path from X to Y given Z as ``(nodes, edge_types)``
    (types read left to right: ``'->'``, ``'<-'``, ``'<->'``), or None if separated."""
    xm, ym, zm = _sep_masks(g, xs, ys, zs)
    w = _open_walk(g, xm, ym, zm, node_mask(g, remove_outgoing_of))
    return None if w is None else ([g.nodes[i] for i in w[0]], w[1])


def open_path(g: CausalGraph, x: Nodes, y: Nodes, zs: Nodes = (), remove_outgoing_of: Nodes = None) -> list[str] | None:
    """Node list of a shortest open path from X to Y given Z (see :func:`find_open_path`)."""
    p = find_open_path(g, x, y, zs, remove_outgoing_of)
    return None if p is None else p[0]


# ---- back-door and front-door criteria ------------------------------------------------------
def _treatment_outcome(g: CausalGraph, x: Nodes, y: Nodes, criterion: str) -> tuple[int, int]:
    _require_acyclic(g, f"the {criterion} criterion")
    xm, ym = node_mask(g, x), node_mask(g, y)
    if not xm or not ym:
        raise GraphError(f"the {criterion} criterion needs a non-empty treatment and outcome")
    if xm & ym:
        raise GraphError(f"treatment and outcome overlap in {fmt_set(g, xm & ym)}")
    return xm, ym


def _given(g: CausalGraph, zm: int) -> str:
    return f"Z = {fmt_set(g, zm)}" if zm else "the empty set"


def _walk_text(g: CausalGraph, w: tuple[list[int], list[str]]) -> str:
    return format_path([g.nodes[i] for i in w[0]], w[1])


def backdoor_violation(g: CausalGraph, x: Nodes, y: Nodes, zs: Nodes) -> str | None:
    """None if Z satisfies the back-door criterion relative to (X, Y), else a one-sentence
    reason usable as feedback. Criterion: Z ∩ ({X, Y} ∪ De(X)) = ∅ and X ⊥ Y | Z in the graph
    with X's outgoing directed edges removed (bidirected edges kept, so it holds for ADMGs)."""
    xm, ym = _treatment_outcome(g, x, y, "back-door")
    zm = node_mask(g, zs)
    if zm & xm:
        return f"Z contains the treatment {fmt_nodes(g, zm & xm)}"
    if zm & ym:
        return f"Z contains the outcome {fmt_nodes(g, zm & ym)}"
    bad = zm & descendants_mask(g, xm)
    if bad:
        m = min(g.names(bad))
        p = directed_path_indices(g, xm, 1 << g.index(m))
        assert p is not None
        shown = " -> ".join(g.nodes[i] for i in p)
        return f"Z contains {m}, a descendant of treatment {g.nodes[p[0]]} ({shown})"
    w = _open_walk(g, xm, ym, zm, xm)
    if w is not None:
        return f"backdoor path {_walk_text(g, w)} is open given {_given(g, zm)}"
    return None


def is_backdoor_set(g: CausalGraph, x: Nodes, y: Nodes, zs: Nodes) -> bool:
    """Whether Z satisfies the back-door criterion (see :func:`backdoor_violation`)."""
    xm, ym = _treatment_outcome(g, x, y, "back-door")
    zm = node_mask(g, zs)
    if zm & (xm | ym) or zm & descendants_mask(g, xm):
        return False
    return not _connected(g, xm, ym, zm, xm)


FRONTDOOR_CRITERIA = ("set", "per_member")


def _iii_starts(zm: int, criterion: str) -> list[int]:
    """Condition (iii) tests s ⊥ Y | X without s's out-edges for each s returned."""
    if criterion not in FRONTDOOR_CRITERIA:
        raise ValueError(f"front-door criterion must be one of {FRONTDOOR_CRITERIA}, got {criterion!r}")
    return [zm] if criterion == "set" else [1 << i for i in bits(zm)]


def _iii_violator(g: CausalGraph, xm: int, ym: int, zm: int, criterion: str) -> int:
    """A start of :func:`_iii_starts` that (iii) fails for, or 0. Per member, one walk search from Y
    in G first decides every member it reaches only through an arrowhead (its first arrival used
    none of its out-edges: it fails) or not at all (it passes); the rest cost a search each."""
    starts = _iii_starts(zm, criterion)
    if criterion == "set":
        return next((s for s in starts if _connected(g, s, ym, xm, s)), 0)
    up, down = _reach(g, ym, xm, states=True)
    hit = zm & down & ~up
    if hit:
        return hit & -hit
    return next((s for s in starts if s & up and _connected(g, s, ym, xm, s)), 0)


def frontdoor_violation(g: CausalGraph, x: Nodes, y: Nodes, zs: Nodes, criterion: str = "set") -> str | None:
    """None if Z satisfies Pearl's front-door criterion relative to (X, Y), else a reason:
    (i) Z intercepts every directed path from X to Y; (ii) every back-door path from X to Z is
    blocked by ∅ (X ⊥ Z in the graph without X's outgoing edges); (iii) back-door paths from Z to
    Y are blocked by X. ``criterion`` reads (iii): ``set`` (default): Z ⊥ Y | X in the graph
    without the outgoing edges of every member of Z (only paths leaving Z at their first node
    count); ``per_member``: each z ∈ Z alone, z ⊥ Y | X in the graph without z's outgoing edges,
    which is "every back-door path z ... Y in G is blocked by X" (a collider that is an ancestor
    of X only through z reroutes to an open path through z's parents). Z must be non-empty and
    exclude X and Y. Bidirected edges count as back-door paths (ADMGs)."""
    _iii_starts(0, criterion)
    xm, ym = _treatment_outcome(g, x, y, "front-door")
    zm = node_mask(g, zs)
    if not zm:
        return "Z is empty; the front-door criterion needs at least one mediator"
    if zm & xm:
        return f"Z contains the treatment {fmt_nodes(g, zm & xm)}"
    if zm & ym:
        return f"Z contains the outcome {fmt_nodes(g, zm & ym)}"
    p = directed_path_indices(g, xm, ym, blocked=zm)
    if p is not None:
        shown = " -> ".join(g.nodes[i] for i in p)
        return f"directed path {shown} from treatment to outcome does not pass through Z"
    w = _open_walk(g, xm, zm, 0, xm)
    if w is not None:
        return (f"backdoor path {_walk_text(g, w)} from treatment {g.nodes[w[0][0]]} to "
                f"{g.nodes[w[0][-1]]} in Z is open (given nothing)")
    bad = _iii_violator(g, xm, ym, zm, criterion)  # the witness search runs once, not per member
    w = _open_walk(g, bad, ym, xm, bad) if bad else None
    if w is not None:
        return (f"backdoor path {_walk_text(g, w)} from {g.nodes[w[0][0]]} in Z to outcome "
                f"{g.nodes[w[0][-1]]} is not blocked by the treatment {fmt_nodes(g, xm)}")
    return None


def is_frontdoor_set(g: CausalGraph, x: Nodes, y: Nodes, zs: Nodes, criterion: str = "set") -> bool:
    """Whether Z satisfies the front-door criterion (see :func:`frontdoor_violation`)."""
    _iii_starts(0, criterion)
    xm, ym = _treatment_outcome(g, x, y, "front-door")
    zm = node_mask(g, zs)
    if not zm or zm & (xm | ym):
        return False
    if directed_path_indices(g, xm, ym, blocked=zm) is not None:
        return False
    return not _connected(g, xm, zm, 0, xm) and not _iii_violator(g, xm, ym, zm, criterion)


# ---- mediators ---------------------------------------------------------------------------
def _mediator_mask(g: CausalGraph, ix: int, iy: int, one_hop: bool) -> int:
    if ix == iy:
        raise GraphError(f"treatment and outcome are the same node {g.nodes[ix]!r}")
    bx, by = 1 << ix, 1 << iy
    if one_hop:
        m = g.children_mask[ix] & g.parents_mask[iy]
    else:
        m = closure(g.children_mask, bx, by) & closure(g.parents_mask, by, bx)
    return m & ~(bx | by)


def is_mediator(g: CausalGraph, x: str, y: str, m: str, one_hop: bool = False) -> bool:
    """Whether ``m`` is a mediator of x on y (see :func:`mediators`); with ``one_hop`` whether
    ``m`` is not x or y and both edges x -> m and m -> y exist."""
    ix, iy, im = single_node(g, x, "x"), single_node(g, y, "y"), single_node(g, m, "m")
    return bool(_mediator_mask(g, ix, iy, one_hop) >> im & 1)


def mediators(g: CausalGraph, x: str, y: str, one_hop: bool = False) -> frozenset[str]:
    """The mediators of x on y: nodes m not in {x, y} on a directed *walk* x -> ... -> m -> ... -> y
    that visits x only at its start and y only at its end; equivalently m is reachable from x in
    G - {y} and y is reachable from m in G - {x}. On a DAG this is "m lies on a directed path from
    x to y"; on a cyclic graph a feedback loop through m counts (it carries x's effect to y), and
    the walk reading is used because deciding whether m lies on a *simple* directed x-y path is
    NP-complete in directed graphs. ``one_hop``: only m with edges x -> m and m -> y."""
    return g.names(_mediator_mask(g, single_node(g, x, "x"), single_node(g, y, "y"), one_hop))


def mediator_walk(g: CausalGraph, x: str, y: str, m: str) -> list[str] | None:
    """A witness for :func:`mediators`: a shortest directed path x -> ... -> m in G - {y} joined to
    a shortest directed path m -> ... -> y in G - {x} (a walk; a simple path on a DAG), or None if
    ``m`` is not a mediator."""
    if m in (x, y):
        return None
    head = find_directed_path(g, x, m, removed_incoming=y)
    tail = find_directed_path(g, m, y, removed_incoming=x)
    return head + tail[1:] if head and tail else None


# ---- validity-class enumeration -----------------------------------------------------------
Predicate = Callable[..., bool]


def _adapt(predicate: Predicate) -> Callable[[CausalGraph, frozenset[str]], bool]:
    """Predicates are called ``predicate(g, Z)``; one-argument callables get ``predicate(Z)``."""
    try:
        params = [p for p in inspect.signature(predicate).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        varargs = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(predicate).parameters.values())
    except (TypeError, ValueError):
        return predicate
    if len(params) == 1 and not varargs:
        return lambda _g, z: bool(predicate(z))
    return lambda g, z: bool(predicate(g, z))


def _set_key(s: frozenset[str]) -> tuple[int, tuple[str, ...]]:
    return (len(s), tuple(sorted(s)))


def enumerate_valid_sets(
    g: CausalGraph, candidates: Nodes, predicate: Predicate, *, max_size: int | None = None, limit: int | None = None
) -> list[frozenset[str]]:
    """All subsets Z of ``candidates`` with ``predicate(g, Z)`` true, by brute force, ordered by
    size then by sorted names; ``max_size`` bounds |Z|, ``limit`` stops after that many hits.
    Cost is up to 2^|candidates| predicate calls."""
    call = _adapt(predicate)
    pool = sorted(g.names(node_mask(g, candidates)))
    top = len(pool) if max_size is None else min(max_size, len(pool))
    out: list[frozenset[str]] = []
    for k in range(top + 1):
        for combo in combinations(pool, k):
            z = frozenset(combo)
            if call(g, z):
                out.append(z)
                if limit is not None and len(out) >= limit:
                    return out
    return out


def minimal_sets(sets: Iterable[Iterable[str]]) -> list[frozenset[str]]:
    """Inclusion-minimal members of a family of sets, ordered by size then names."""
    family = sorted({frozenset(s) for s in sets}, key=_set_key)
    kept: list[frozenset[str]] = []
    for s in family:
        if not any(t < s for t in kept):
            kept.append(s)
    return kept


def maximal_sets(sets: Iterable[Iterable[str]]) -> list[frozenset[str]]:
    """Inclusion-maximal members of a family of sets, ordered by size then names."""
    family = sorted({frozenset(s) for s in sets}, key=_set_key, reverse=True)
    kept: list[frozenset[str]] = []
    for s in family:
        if not any(s < t for t in kept):
            kept.append(s)
    return sorted(kept, key=_set_key)


def is_minimal_valid(g: CausalGraph, zs: Nodes, predicate: Predicate, *, max_exhaustive: int = 12) -> bool:
    """Z is valid and no proper subset of Z is valid. Every proper subset is checked (valid
    families such as back-door sets are not closed under supersets, e.g. M-bias, so single-
    element removal alone is not a sound test for arbitrary predicates); |Z| > ``max_exhaustive``
    raises :class:`GraphError` rather than giving an unchecked answer."""
    call = _adapt(predicate)
    z = sorted(g.names(node_mask(g, zs)))
    if len(z) > max_exhaustive:
        raise GraphError(f"minimality check of a {len(z)}-node set exceeds the exhaustive limit {max_exhaustive}")
    if not call(g, frozenset(z)):
        return False
    return not any(call(g, frozenset(c)) for k in range(len(z) - 1, -1, -1) for c in combinations(z, k))


def is_maximal_valid(
    g: CausalGraph, zs: Nodes, predicate: Predicate, candidates: Nodes, *, max_exhaustive: int = 12
) -> bool:
    """Z is valid and no proper superset of Z within ``Z ∪ candidates`` is valid (all supersets
    are checked; more than ``max_exhaustive`` extra candidates raises :class:`GraphError`)."""
    call = _adapt(predicate)
    zm = node_mask(g, zs)
    z = g.names(zm)
    extra = sorted(g.names(node_mask(g, candidates) & ~zm))
    if len(extra) > max_exhaustive:
        raise GraphError(f"maximality check over {len(extra)} extra candidates exceeds the exhaustive limit "
                         f"{max_exhaustive}")
    if not call(g, z):
        return False
    return not any(call(g, z | frozenset(c)) for k in range(1, len(extra) + 1) for c in combinations(extra, k))
