"""Low-level bitmask graph primitives: node-set coercion, ancestor/descendant closures, directed
reachability, directed cycles, and checks on explicitly given paths.

Everything here works on the integer bitmasks precomputed by :class:`CausalGraph` (bit ``i`` is
node ``g.nodes[i]``); networkx is never used. :mod:`calver.verifier.primitives` re-exports the
public names, so import from there.
"""

from __future__ import annotations

from typing import Iterable, Sequence, Union

from calver.verifier.graph import CausalGraph, GraphError

Nodes = Union[str, Iterable[str], None]  # a node name, or any iterable of names
EDGE_TYPES = ("->", "<-", "<->")


# ---- coercion and bit helpers ------------------------------------------------------------
def node_mask(g: CausalGraph, nodes: Nodes) -> int:
    """Bitmask of a node collection. A plain string is one node; ``None`` is the empty set.
    Unknown names raise :class:`GraphError`."""
    if nodes is None:
        return 0
    if isinstance(nodes, str):
        return 1 << g.index(nodes)
    m = 0
    for n in nodes:
        if not isinstance(n, str):
            raise GraphError(f"node names must be strings, got {n!r}")
        m |= 1 << g.index(n)
    return m


def single_node(g: CausalGraph, node: Nodes, role: str = "node") -> int:
    """Index of a single node given as a name or a one-element collection."""
    if isinstance(node, str):
        return g.index(node)
    m = node_mask(g, node)
    if m == 0 or m & (m - 1):
        raise GraphError(f"{role} must be exactly one node, got {sorted(g.names(m))}")
    return m.bit_length() - 1


def bits(m: int) -> list[int]:
    """Indices of the set bits of ``m``, lowest first."""
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


def union_of(masks: Sequence[int], m: int) -> int:
    """OR of ``masks[i]`` over the set bits ``i`` of ``m``."""
    acc = 0
    while m:
        low = m & -m
        acc |= masks[low.bit_length() - 1]
        m ^= low
    return acc


def fmt_set(g: CausalGraph, m: int) -> str:
    return "{" + ", ".join(sorted(g.names(m))) + "}"


def fmt_nodes(g: CausalGraph, m: int) -> str:
    """``A`` for one node, ``{A, B}`` for several."""
    names = sorted(g.names(m))
    return names[0] if len(names) == 1 else "{" + ", ".join(names) + "}"


def format_path(nodes: Sequence[str], types: Sequence[str]) -> str:
    """``["X", "C", "Y"], ["<-", "->"]`` -> ``"X <- C -> Y"``."""
    parts = [nodes[0]]
    for t, n in zip(types, nodes[1:]):
        parts += [t, n]
    return " ".join(parts)


# ---- closures ----------------------------------------------------------------------------
def closure(adj: Sequence[int], start: int, blocked: int = 0) -> int:
    """Nodes reachable from ``start`` in one or more steps along ``adj``, never stepping onto
    ``blocked`` (start nodes are included only if reached again)."""
    result = 0
    frontier = start
    notb = ~blocked
    while frontier:
        new = 0
        m = frontier
        while m:
            low = m & -m
            new |= adj[low.bit_length() - 1]
            m ^= low
        new &= notb & ~result
        result |= new
        frontier = new
    return result


def ancestors_mask(g: CausalGraph, mask: int, include_self: bool = False) -> int:
    """Mask of proper ancestors of ``mask`` (members only if they reach a member, e.g. on a
    cycle); ``include_self`` adds the members themselves."""
    a = closure(g.parents_mask, mask)
    return a | mask if include_self else a


def descendants_mask(g: CausalGraph, mask: int, include_self: bool = False) -> int:
    """Mask of proper descendants of ``mask``; ``include_self`` adds the members."""
    d = closure(g.children_mask, mask)
    return d | mask if include_self else d


def ancestors(g: CausalGraph, nodes: Nodes) -> frozenset[str]:
    """Nodes with a directed path into some member of ``nodes``. A member is included only if it
    is an ancestor of another member (or of itself through a cycle)."""
    return g.names(closure(g.parents_mask, node_mask(g, nodes)))


def descendants(g: CausalGraph, nodes: Nodes) -> frozenset[str]:
    """Nodes reachable by a directed path from some member of ``nodes`` (members only if reached
    from a member)."""
    return g.names(closure(g.children_mask, node_mask(g, nodes)))


# ---- directed reachability ---------------------------------------------------------------
def directed_path_indices(g: CausalGraph, src: int, dst: int, blocked: int = 0) -> list[int] | None:
    """Shortest directed path (indices) from some node of mask ``src`` to some node of mask
    ``dst`` of length >= 1, never entering ``blocked``; None if there is none."""
    cm = g.children_mask
    prev: dict[int, int] = {}
    seen = 0
    frontier = bits(src)
    notb = ~blocked
    while frontier:
        nxt = []
        for i in frontier:
            new = cm[i] & notb & ~seen
            seen |= new
            while new:
                low = new & -new
                j = low.bit_length() - 1
                new ^= low
                prev[j] = i
                if low & dst:
                    path = [j]
                    k = i
                    while not (1 << k) & src:
                        path.append(k)
                        k = prev[k]
                    path.append(k)
                    return path[::-1]
                nxt.append(j)
        frontier = nxt
    return None


def _check_distinct(a: int, b: int, g: CausalGraph) -> None:
    if a == b:
        raise GraphError(
            f"source and target are the same node {g.nodes[a]!r}; a directed path needs two "
            "distinct endpoints (use find_directed_cycle for cycles)"
        )


def directed_path_exists(
    g: CausalGraph, a: str, b: str, removed_incoming: Nodes = ()
) -> bool:
    """Whether a directed path ``a -> ... -> b`` exists after deleting every edge *into* a node of
    ``removed_incoming``. ``a == b`` raises :class:`GraphError`."""
    ia, ib = single_node(g, a, "source"), single_node(g, b, "target")
    _check_distinct(ia, ib, g)
    r = node_mask(g, removed_incoming)
    target = 1 << ib
    if target & r:
        return False
    cm = g.children_mask
    seen = 0
    frontier = 1 << ia
    notb = ~r
    while frontier:
        new = 0
        m = frontier
        while m:
            low = m & -m
            new |= cm[low.bit_length() - 1]
            m ^= low
        new &= notb & ~seen
        if new & target:
            return True
        seen |= new
        frontier = new
    return False


def find_directed_path(
    g: CausalGraph, a: str, b: str, removed_incoming: Nodes = ()
) -> list[str] | None:
    """A shortest directed path ``a -> ... -> b`` (node names) in the graph with incoming edges of
    ``removed_incoming`` deleted, or None. ``a == b`` raises :class:`GraphError`."""
    ia, ib = single_node(g, a, "source"), single_node(g, b, "target")
    _check_distinct(ia, ib, g)
    p = directed_path_indices(g, 1 << ia, 1 << ib, node_mask(g, removed_incoming))
    return None if p is None else [g.nodes[i] for i in p]


def reachable_after_do(g: CausalGraph, do_nodes: Nodes, source: str, target: str) -> bool:
    """Whether ``target`` is reachable from ``source`` by a directed path in the mutilated graph
    where edges into ``do_nodes`` are cut. ``source == target`` raises :class:`GraphError`."""
    return directed_path_exists(g, source, target, removed_incoming=do_nodes)


# ---- directed cycles ---------------------------------------------------------------------
def find_directed_cycle(g: CausalGraph) -> list[str] | None:
    """A directed cycle as a node list without repetition (``[A]`` for a self-loop ``A -> A``;
    the closing edge runs from the last node to the first), or None if the graph is acyclic."""
    if g.acyclic:
        return None
    cm = g.children_mask
    n = len(g.nodes)
    gray = 0
    black = 0
    for s in range(n):
        if (black | gray) >> s & 1:
            continue
        path = [s]
        pos = {s: 0}
        gray |= 1 << s
        stack = [cm[s]]
        while stack:
            rem = stack[-1] & ~black
            if rem:
                low = rem & -rem
                stack[-1] = rem ^ low
                j = low.bit_length() - 1
                if gray & low:
                    return [g.nodes[k] for k in path[pos[j]:]]
                gray |= low
                pos[j] = len(path)
                path.append(j)
                stack.append(cm[j])
            else:
                stack.pop()
                v = path.pop()
                del pos[v]
                gray &= ~(1 << v)
                black |= 1 << v
    return None  # pragma: no cover - g.acyclic was False, so a cycle exists


def is_directed_cycle(g: CausalGraph, nodes: Sequence[str]) -> bool:
    """Whether ``nodes`` (in order, no repetition, closing edge last -> first implied) is a
    directed cycle of ``g``. Rotation-invariant; ``[A]`` is a cycle iff ``A -> A`` exists."""
    nodes = [nodes] if isinstance(nodes, str) else list(nodes)
    idx = [single_node(g, n) for n in nodes]
    if not idx or len(set(idx)) != len(idx):
        return False
    cm = g.children_mask
    k = len(idx)
    return all(cm[idx[i]] >> idx[(i + 1) % k] & 1 for i in range(k))


# ---- explicit paths ----------------------------------------------------------------------
def _edge_types_between(g: CausalGraph, ia: int, ib: int) -> list[str]:
    out = []
    if g.children_mask[ia] >> ib & 1:
        out.append("->")
    if g.parents_mask[ia] >> ib & 1:
        out.append("<-")
    if g.siblings_mask[ia] >> ib & 1:
        out.append("<->")
    return out


def path_edges(g: CausalGraph, nodes: Sequence[str], types: Sequence[str] | None = None) -> list[str]:
    """Edge types (``'->'``, ``'<-'``, ``'<->'``, read left to right) between consecutive nodes of
    a path. Given ``types`` are validated against the graph; missing ones are resolved, and a
    missing or ambiguous edge (e.g. both ``A -> B`` and ``A <-> B``) raises :class:`GraphError`."""
    if isinstance(nodes, str):
        nodes = [nodes]
    nodes = list(nodes)
    if not nodes:
        raise GraphError("a path needs at least one node")
    idx = [single_node(g, n) for n in nodes]
    if types is not None:
        types = [str(t).strip() for t in types]
        if len(types) != len(nodes) - 1:
            raise GraphError(f"a path of {len(nodes)} nodes needs {len(nodes) - 1} edge types, got {len(types)}")
    out = []
    for k in range(len(nodes) - 1):
        a, b = nodes[k], nodes[k + 1]
        present = _edge_types_between(g, idx[k], idx[k + 1])
        if types is not None:
            t = types[k]
            if t not in EDGE_TYPES:
                raise GraphError(f"unknown edge type {t!r}; expected one of ->, <-, <->")
            if t not in present:
                raise GraphError(f"edge {a} {t} {b} is not in the graph")
            out.append(t)
        elif not present:
            raise GraphError(f"no edge between {a} and {b}")
        elif len(present) > 1:
            shown = " and ".join(f"{a} {t} {b}" for t in present)
            raise GraphError(f"ambiguous edge: {shown} both exist; pass the edge types explicitly")
        else:
            out.append(present[0])
    return out


def is_path(g: CausalGraph, nodes: Sequence[str], types: Sequence[str] | None = None) -> bool:
    """Whether ``nodes`` is a simple path of ``g`` (with the given edge types, if any). Unknown
    node names raise; an empty list, a repeated node or a missing edge gives False."""
    if isinstance(nodes, str):
        nodes = [nodes]
    nodes = list(nodes)
    idx = [single_node(g, n) for n in nodes]
    if not idx or len(set(idx)) != len(idx):
        return False
    if types is not None:
        types = [str(t).strip() for t in types]
        if len(types) != len(idx) - 1:
            return False
    for k in range(len(idx) - 1):
        present = _edge_types_between(g, idx[k], idx[k + 1])
        if not present or (types is not None and types[k] not in present):
            return False
    return True


def path_blocking_masks(
    g: CausalGraph, nodes: Sequence[str], types: Sequence[str] | None = None
) -> tuple[int, int, tuple[int, ...]]:
    """Validate a path once and return (endpoint mask, non-collider mask, collider closure masks).

    Each collider's mask is the collider plus its descendants: Z leaves that collider open iff Z
    meets the mask. ``blocks_path_masks`` then answers any Z in a few bit operations, which is
    what enumerating the blocking sets of one path needs.
    """
    types = path_edges(g, nodes, types)
    nodes = [nodes] if isinstance(nodes, str) else list(nodes)
    idx = [g.index(n) for n in nodes]
    if len(idx) < 2:
        raise GraphError("a path needs at least two nodes")
    if len(set(idx)) != len(idx):
        raise GraphError(f"not a simple path: {format_path(nodes, types)} repeats a node")
    non_colliders = 0
    colliders = []
    for k in range(1, len(idx) - 1):
        v = idx[k]
        if types[k - 1] in ("->", "<->") and types[k] in ("<-", "<->"):
            colliders.append(descendants_mask(g, 1 << v, include_self=True))
        else:
            non_colliders |= 1 << v
    return (1 << idx[0]) | (1 << idx[-1]), non_colliders, tuple(colliders)


def blocks_path_masks(masks: tuple[int, int, tuple[int, ...]], zm: int) -> bool:
    """``blocks_path`` on precomputed :func:`path_blocking_masks` (endpoints must not be in Z)."""
    _ends, non_colliders, colliders = masks
    return bool(zm & non_colliders) or any(not (zm & c) for c in colliders)


def blocks_path(
    g: CausalGraph, nodes: Sequence[str], zs: Nodes, types: Sequence[str] | None = None
) -> bool:
    """Whether ``zs`` blocks the path: some non-collider on it is in Z, or some collider has
    neither itself nor a descendant in Z. A collider is a node where both adjacent edge ends are
    arrowheads. Endpoints may not be in Z; the path must be simple with >= 2 nodes."""
    masks = path_blocking_masks(g, nodes, types)
    zm = node_mask(g, zs)
    if zm & masks[0]:
        end = g.names(zm & masks[0])
        raise GraphError(f"path endpoint {min(end)} may not be in the conditioning set Z")
    return blocks_path_masks(masks, zm)
