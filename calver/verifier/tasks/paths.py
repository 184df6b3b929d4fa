"""Bounded enumeration of typed simple paths, used to list witness paths in canonical derivations."""

from __future__ import annotations

from calver.verifier.budget import WORK_LIMIT as _DEFAULT_LIMIT
from calver.verifier.budget import TooLargeToGrade, WorkBudget
from calver.verifier.contract import format_path
from calver.verifier.graph import CausalGraph
from calver.verifier.memo import Memo
from calver.verifier.paths import bits, union_of


def _neighbours(g: CausalGraph, node: str):
    """(neighbour, edge type as written from ``node``) pairs, in a deterministic order."""
    out = [(c, "->") for c in sorted(g.children(node))]
    out += [(p, "<-") for p in sorted(g.parents(node))]
    out += [(s, "<->") for s in sorted(g.siblings(node))]
    return out


def typed_paths(g: CausalGraph, start: str, end: str, *, first_into_start: bool = False,
                limit: int = 3, max_len: int = 8) -> list[tuple[list[str], list[str]]]:
    """Up to ``limit`` simple paths start..end (shortest first, BFS over partial paths).

    ``first_into_start``: the first edge must have an arrowhead at ``start`` (a backdoor path).
    """
    found: list[tuple[list[str], list[str]]] = []
    frontier: list[tuple[list[str], list[str]]] = [([start], [])]
    while frontier and len(found) < limit:
        nxt = []
        for nodes, types in frontier:
            for nb, t in _neighbours(g, nodes[-1]):
                if nb in nodes:
                    continue
                if first_into_start and not types and t == "->":
                    continue
                cand = (nodes + [nb], types + [t])
                if nb == end:
                    found.append(cand)
                    if len(found) >= limit:
                        break
                elif len(cand[0]) < max_len:
                    nxt.append(cand)
            if len(found) >= limit:
                break
        frontier = nxt[:2000]  # keep enumeration bounded on dense graphs
    return found


def backdoor_paths(g: CausalGraph, x: str, y: str, limit: int = 3) -> list[str]:
    return [format_path(n, t) for n, t in typed_paths(g, x, y, first_into_start=True, limit=limit)]


# ---- exact shortest, bounded longest simple paths (the path / backdoor_path families) -----------
# A path runs start..end over the skeleton (any edge type); a backdoor path's first edge has an
# arrowhead at the start. Shortest: BFS (a shortest walk never repeats a node; for a backdoor path
# the walk after the first edge runs in the graph minus the start). Longest is NP-hard: branch and
# bound with a work budget, memoized per (graph, query), failing closed beyond it. Extending a
# partial path costs 8 work units plus the nodes its bounding search scans.
WORK_LIMIT = _DEFAULT_LIMIT  # work units of one longest-path search; read per call
_STEP = 8
# Enumerating a path class (generation and default answers, never score or grade) keeps its old
# limit, 100,000 partial paths at one unit each, so generated data does not change.
ENUM_LIMIT = 100_000
TOO_LARGE = "too large to grade"
_LONGEST_MEMO = Memo("longest path")  # (graph, a, b, backdoor) -> length, None, or the too-large reason


def _skeleton(g: CausalGraph) -> list[int]:
    pm, cm, sm = g.parents_mask, g.children_mask, g.siblings_mask
    return [pm[i] | cm[i] | sm[i] for i in range(len(g.nodes))]


def _first_step(g: CausalGraph, ia: int, backdoor: bool) -> int:
    """Nodes a path may visit right after its start (backdoor: only those with an edge into it)."""
    first = g.parents_mask[ia] | g.siblings_mask[ia]
    return (first if backdoor else first | g.children_mask[ia]) & ~(1 << ia)


def _reach(adj: list[int], start: int, blocked: int, end: int) -> int:
    """Nodes reachable from mask ``start`` in >= 1 steps avoiding ``blocked`` and never continuing
    past ``end`` (a path stops there): the nodes a path from ``start`` to ``end`` may still use."""
    seen, frontier = 0, start
    while frontier:
        new = union_of(adj, frontier) & ~blocked & ~seen
        seen |= new
        frontier = new & ~end
    return seen


def _budget(g: CausalGraph, ia: int, ib: int, backdoor: bool, what: str, limit: int | None = None) -> WorkBudget:
    kind = "backdoor path" if backdoor else "path"
    return WorkBudget(WORK_LIMIT if limit is None else limit,
                      f"{TOO_LARGE}: {what} {kind} from {g.nodes[ia]} to {g.nodes[ib]}")


def shortest_path_length(g: CausalGraph, a: str, b: str, backdoor: bool = False) -> int | None:
    """Edges on a shortest simple (backdoor) path a..b of the skeleton, or None if there is none."""
    ia, ib = g.index(a), g.index(b)
    adj = _skeleton(g)
    seen = 1 << ia
    frontier, d = _first_step(g, ia, backdoor), 1
    while frontier:
        if frontier >> ib & 1:
            return d
        seen |= frontier
        frontier = union_of(adj, frontier) & ~seen
        d += 1
    return None


def _colouring(adj: list[int]) -> int | None:
    """The nodes of one colour of a 2-colouring of the skeleton, or None if it has an odd cycle."""
    col, seen = 0, 0
    for s in range(len(adj)):
        if seen >> s & 1:
            continue
        frontier, colour, seen = 1 << s, 0, seen | 1 << s
        while frontier:
            if colour:
                col |= frontier
            nxt = union_of(adj, frontier)
            if nxt & frontier:
                return None
            frontier = nxt & ~seen
            seen |= frontier
            colour ^= 1
    return col


def _room_bound(room: int, j: int, col: int | None, end: int) -> int:
    """Most edges a simple path from ``j`` to ``end`` through ``room`` can have: ``room``'s size, or in a
    bipartite skeleton the count that alternating colours and the end's colour allow."""
    size = room.bit_count()
    if col is None:
        return size
    same = (room & col if col >> j & 1 else room & ~col).bit_count()
    opp = size - same
    most = 2 * same + 1 if opp > same else 2 * opp
    return most - 1 if (most & 1) != (bool(col >> j & 1) != bool(col & end)) else most


def _longest(g: CausalGraph, ia: int, ib: int, backdoor: bool) -> int | None:
    """Branch and bound over simple paths: a partial path is extended only if the end is still
    reachable and the most it could still add (:func:`_room_bound`) beats the best length found
    (a partial path with one way on is extended without the bound: pruning is only a shortcut)."""
    adj = _skeleton(g)
    end = 1 << ib
    budget = _budget(g, ia, ib, backdoor, "the search for the longest")
    budget.spend(3 * len(g.nodes))
    col = _colouring(adj)
    first = _first_step(g, ia, backdoor)
    top = first | _reach(adj, first & ~end, 1 << ia, end)  # every node a path may visit after the start
    if not top & end:
        return None
    top = _room_bound(top, ia, col, end)  # so no path has more edges than this
    best = -1
    stack = [(0, 1 << ia, iter(bits(first)))]
    while stack:
        d, on, nxt = stack[-1]
        j = next(nxt, None)
        if j is None:
            stack.pop()
            continue
        if j == ib:
            if d + 1 > best:
                best = d + 1
                if best >= top:
                    return best
            continue
        on_j = on | 1 << j
        way = adj[j] & ~on_j
        if not way & (way - 1):
            budget.spend(_STEP)
            stack.append((d + 1, on_j, iter(bits(way))))
            continue
        room = _reach(adj, 1 << j, on_j, end)
        budget.spend(_STEP + room.bit_count())
        if room & end and d + 1 + _room_bound(room, j, col, end) > best:
            stack.append((d + 1, on_j, _warnsdorff(adj, adj[j] & room, on_j, end)))
    return best if best > 0 else None


def _warnsdorff(adj: list[int], cands: int, on: int, end: int):
    """``cands`` with the fewest onward neighbours first and the end last: long paths, which the
    bound then prunes against, turn up early (the order never changes the result)."""
    free = ~on
    return iter(sorted(bits(cands & ~end), key=lambda c: (adj[c] & free).bit_count()) + bits(cands & end))


def longest_path_length(g: CausalGraph, a: str, b: str, backdoor: bool = False) -> int | None:
    """Edges on a longest simple (backdoor) path a..b, or None if there is none. Memoized per
    (graph content, a, b, backdoor); raises :class:`TooLargeToGrade` beyond the work limit."""
    key = (g, a, b, backdoor)
    hit = _LONGEST_MEMO.get(key, _LONGEST_MEMO)
    if hit is _LONGEST_MEMO:  # the key keeps the graph alive: charge it too
        try:
            hit = _longest(g, g.index(a), g.index(b), backdoor)
        except TooLargeToGrade as e:
            hit = str(e)
        _LONGEST_MEMO.put(key, hit, 1024 + 512 * (len(g.nodes) + len(g.directed) + len(g.bidirected)))
    if isinstance(hit, str):
        raise TooLargeToGrade(hit)
    return hit


def _fits(adj: list[int], j: int, on: int, end: int, r: int) -> bool:
    """Can a simple path from ``j`` avoiding ``on`` reach ``end`` in exactly ``r`` more edges? (Necessary
    conditions: the distance to ``end`` is at most ``r`` and at least ``r`` nodes are still usable.)"""
    seen, frontier, k, near = 0, 1 << j, 0, False
    while frontier:
        k += 1
        new = union_of(adj, frontier) & ~on & ~seen
        if new & end:
            near = True
        elif not near and k >= r:
            return False
        seen |= new
        if near and seen.bit_count() >= r:
            return True
        frontier = new & ~end
    return False


def paths_of_length(g: CausalGraph, a: str, b: str, length: int, backdoor: bool = False,
                    budget: WorkBudget | None = None):
    """Every simple typed (backdoor) path a..b with exactly ``length`` edges, as (nodes, types)
    tuples, depth first over neighbours sorted by (name, edge type). ``budget`` (shared across
    calls) bounds the work; exhausting it raises :class:`TooLargeToGrade`."""
    ia, ib = g.index(a), g.index(b)
    adj, end = _skeleton(g), 1 << ib
    index = {n: i for i, n in enumerate(g.nodes)}
    nbrs = [[(index[nb], t) for nb, t in sorted(_neighbours(g, n))] for n in g.nodes]
    budget = budget or _budget(g, ia, ib, backdoor, f"enumerating every {length}-edge", ENUM_LIMIT)
    nodes: list[int] = [ia]
    types: list[str] = []
    on = 1 << ia
    stack = [iter([(j, t) for j, t in nbrs[ia] if not (backdoor and t == "->")])]
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            if types:
                types.pop()
                on &= ~(1 << nodes.pop())
            continue
        j, t = step
        if on >> j & 1:
            continue
        d = len(types) + 1
        if j == ib:
            if d == length:
                yield tuple(g.nodes[i] for i in nodes) + (b,), tuple(types) + (t,)
            continue
        if d >= length:
            continue
        budget.spend(1)
        if _fits(adj, j, on | 1 << j, end, length - d):
            nodes.append(j)
            types.append(t)
            on |= 1 << j
            stack.append(iter(nbrs[j]))


def path_class(g: CausalGraph, a: str, b: str, backdoor: bool, variant: str, limit: int | None = None):
    """The (shortest / longest / any) simple typed (backdoor) paths a..b, shortest first, stopping
    after ``limit``; ``[]`` if there is none. Beyond the work limit raises :class:`TooLargeToGrade`."""
    lo = shortest_path_length(g, a, b, backdoor)
    if lo is None:
        return []
    if variant == "shortest":
        lengths = range(lo, lo + 1)
    elif variant == "longest":
        hi = longest_path_length(g, a, b, backdoor)
        assert hi is not None  # a path exists: the shortest one
        lengths = range(hi, hi + 1)
    else:
        ia, ib = g.index(a), g.index(b)
        first = _first_step(g, ia, backdoor)
        room = first | _reach(_skeleton(g), first & ~(1 << ib), 1 << ia, 1 << ib)
        lengths = range(lo, room.bit_count() + 1)
    what = "enumerating every" + ("" if variant == "any" else f" {variant}")
    budget, out = _budget(g, g.index(a), g.index(b), backdoor, what, ENUM_LIMIT), []
    for length in lengths:
        for p in paths_of_length(g, a, b, length, backdoor, budget):
            out.append(p)
            if limit is not None and len(out) >= limit:
                return out
    return out
