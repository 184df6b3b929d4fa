"""Bounded enumeration of typed simple paths, used to list witness paths in canonical derivations."""

from __future__ import annotations

from calver.verifier.contract import format_path
from calver.verifier.graph import CausalGraph
from calver.verifier.family import TooLargeToGrade
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
# bound with a work limit, memoized per (graph, query), failing closed beyond the limit.
WORK_LIMIT = 100_000  # partial simple paths one longest-path search (or one enumeration) may extend
TOO_LARGE = "too large to grade"
_LONGEST_MEMO: dict[tuple, int | str | None] = {}
_MEMO_MAX = 2048


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


def _too_large(g: CausalGraph, ia: int, ib: int, backdoor: bool, what: str) -> TooLargeToGrade:
    kind = "backdoor path" if backdoor else "path"
    return TooLargeToGrade(f"{TOO_LARGE}: more than {WORK_LIMIT} partial simple paths from {g.nodes[ia]} "
                           f"to {g.nodes[ib]} to search for the {what} {kind}")


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


def _longest(g: CausalGraph, ia: int, ib: int, backdoor: bool) -> int | None:
    """Branch and bound over simple paths: a partial path is extended only if the end is still
    reachable and it plus every node it could still use beats the best length found."""
    adj = _skeleton(g)
    end = 1 << ib
    first = _first_step(g, ia, backdoor)
    top = first | _reach(adj, first & ~end, 1 << ia, end)  # every node a path may visit after the start
    if not top & end:
        return None
    top = top.bit_count()  # so no path has more edges than this
    best, work = -1, 0
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
        work += 1
        if work > WORK_LIMIT:
            raise _too_large(g, ia, ib, backdoor, "longest")
        on_j = on | 1 << j
        room = _reach(adj, 1 << j, on_j, end)
        if room & end and d + 1 + room.bit_count() > best:
            stack.append((d + 1, on_j, iter(bits(adj[j] & room))))
    return best if best > 0 else None


def longest_path_length(g: CausalGraph, a: str, b: str, backdoor: bool = False) -> int | None:
    """Edges on a longest simple (backdoor) path a..b, or None if there is none. Memoized per
    (graph content, a, b, backdoor); raises :class:`TooLargeToGrade` beyond the work limit."""
    key = (g, a, b, backdoor)
    hit = _LONGEST_MEMO.get(key, _LONGEST_MEMO)
    if hit is _LONGEST_MEMO:
        try:
            hit = _longest(g, g.index(a), g.index(b), backdoor)
        except TooLargeToGrade as e:
            hit = str(e)
        if len(_LONGEST_MEMO) >= _MEMO_MAX:
            _LONGEST_MEMO.clear()
        _LONGEST_MEMO[key] = hit
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
                    budget: list[int] | None = None):
    """Every simple typed (backdoor) path a..b with exactly ``length`` edges, as (nodes, types)
    tuples, depth first over neighbours sorted by (name, edge type). ``budget`` ([partial paths
    left], shared across calls) bounds the work; exhausting it raises :class:`TooLargeToGrade`."""
    ia, ib = g.index(a), g.index(b)
    adj, end = _skeleton(g), 1 << ib
    index = {n: i for i, n in enumerate(g.nodes)}
    nbrs = [[(index[nb], t) for nb, t in sorted(_neighbours(g, n))] for n in g.nodes]
    budget = [WORK_LIMIT] if budget is None else budget
    nodes, types, on = [ia], [], 1 << ia
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
        budget[0] -= 1
        if budget[0] < 0:
            raise _too_large(g, ia, ib, backdoor, f"{length}-edge")
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
        lengths = range(hi, hi + 1)
    else:
        ia, ib = g.index(a), g.index(b)
        first = _first_step(g, ia, backdoor)
        room = first | _reach(_skeleton(g), first & ~(1 << ib), 1 << ia, 1 << ib)
        lengths = range(lo, room.bit_count() + 1)
    budget, out = [WORK_LIMIT], []
    for length in lengths:
        for p in paths_of_length(g, a, b, length, backdoor, budget):
            out.append(p)
            if limit is not None and len(out) >= limit:
                return out
    return out
