"""Benchmark: CPU seconds of the worst ``score`` calls at the documented problem-size limits.

The exact minimal/maximal and longest-path checks are the only super-linear parts of grading. For
each family with such a check this builds the worst shapes known (the 2026-12-01 audit's F3 and
F11 repros plus adversarial ones) at up to 2,000 nodes, scores the canonical trace of a correct
answer and of a wrong one, and prints CPU seconds per ``score`` call:

* cold: a fresh problem, every parse cache and exact-check memo emptied (the first candidate of a
  GRPO group or pool),
* warm: the same trace scored again on the same problem (the pool's other candidates),

and the outcome: the six bits, or "too large" where the check failed closed at its work budget
(``calver.verifier.budget.WORK_LIMIT``). A second group scores the largest traces and problems the
contract admits elsewhere (1 MB traces, a 300 KB GRAPH slot, 20-person puzzles, 20-variable SCMs),
whose cost is linear but still bounds a call. The last line names the worst cold call.

    PYTHONPATH=. python3 benchmarks/worst_case_bench.py [--only frontdoor] [--markdown]
"""

from __future__ import annotations

import argparse
import time

from calver.verifier import Problem, score

GridNode = tuple[int, int]


# ---- shapes: each returns (problem dict, correct answer, wrong answer) ---------------------------
def _problem(task: str, edges: list[str], query: dict, graph_class: str | None = None) -> dict:
    d = {"task": task, "graph": ", ".join(edges), "query": query}
    if graph_class:
        d["graph_class"] = graph_class
    return d


def fd_audit(k: int, npar: int):
    """F3: X -> A_i -> Y, B_i -> A_i, B_i -> Y, npar root parents per B_i; {A_i, B_i} is minimal."""
    edges = []
    for i in range(k):
        edges += [f"X -> A{i}", f"A{i} -> Y", f"B{i} -> A{i}", f"B{i} -> Y"]
        edges += [f"P{i}_{j} -> B{i}" for j in range(npar)]
    z = {f"A{i}" for i in range(k)} | {f"B{i}" for i in range(k)}
    q = {"treatment": "X", "outcome": "Y", "variant": "minimal"}
    return _problem("frontdoor_set", edges, q), z, z | {"P0_0"}  # a root parent: valid, not minimal


def fd_star(k: int):
    """Minimal with no forced member: Z_i -> Y, C -> L_i -> Z_i. Dropping any Z_i lets a walk from Y
    climb to C and drop every other member, so Z is minimal; each member's search expands all k
    L_j before it meets a member already known to fail (k searches of k nodes)."""
    edges = ["X -> Q"] + [e for i in range(k) for e in (f"Z{i} -> Y", f"C -> L{i}", f"L{i} -> Z{i}")]
    z = {f"Z{i}" for i in range(k)}
    q = {"treatment": "X", "outcome": "Y", "variant": "minimal"}
    return _problem("frontdoor_set", edges, q), z, z | {"L0"}


def fd_gadgets(k: int, variant: str):
    """The audit's maximal core plus k pairs A_i, B_i that only work together (tests/test_minmax_exact)."""
    edges = ["V0 -> V5", "V1 <-> V5", "V4 <-> V5"]
    for i in range(k):
        edges += [f"A{i} -> V1", f"A{i} -> B{i}", f"B{i} -> V1", f"A{i} <-> B{i}"]
    pairs = {f"{c}{i}" for c in "AB" for i in range(k)}
    q = {"treatment": "V0", "outcome": "V1", "variant": variant}
    p = _problem("frontdoor_set", edges, q, "ADMG")
    return (p, {"A0", "B0"}, pairs) if variant == "minimal" else (p, pairs | {"V4"}, {"V4"})


def fd_member_hub(k: int, t: int, variant: str):
    """per_member: X -> A_i -> Y, A_i <-> S, S -> T (t nodes): each member's own search sweeps T."""
    edges = [e for i in range(k) for e in (f"X -> A{i}", f"A{i} -> Y", f"A{i} <-> S")]
    edges += ["S -> T0"] + [f"T{j // 2} -> T{j}" for j in range(1, t)]
    z = {f"A{i}" for i in range(k)}
    q = {"treatment": "X", "outcome": "Y", "variant": variant, "criterion": "per_member"}
    wrong = z - {"A0"} if variant != "maximal" else z | {"T0"}  # T0 <- S <-> A0 -> Y is open
    return _problem("frontdoor_set", edges, q, "ADMG"), z, wrong


def fd_member_exposed(k: int, t: int):
    """per_member maximal: many outside w_i -> Y, w_i <-> H, H -> T whose last leaf -> Y: every
    outside node is reached from Y through its out-edge, so each needs its own search."""
    edges = ["X -> M", "M -> Y", "H -> T0"] + [f"T{j // 2} -> T{j}" for j in range(1, t)] + [f"T{t - 1} -> Y"]
    edges += [e for i in range(k) for e in (f"W{i} -> Y", f"W{i} <-> H")]
    q = {"treatment": "X", "outcome": "Y", "variant": "maximal", "criterion": "per_member"}
    return _problem("frontdoor_set", edges, q, "ADMG"), {"M"}, {"M", "W0"}


def sep_audit(k: int):
    """F11-a: X -> D_i <- Y plus W -> X, W -> Y; {W} is the only (so the maximal) separator."""
    edges = ["W -> X", "W -> Y"] + [e for i in range(k) for e in (f"X -> D{i}", f"Y -> D{i}")]
    q = {"x": ["X"], "y": ["Y"], "variant": "maximal"}
    return _problem("separation_set", edges, q), {"W"}, {"W", "D0"}


def sep_minimal(k: int):
    """X -> M_i -> Y (all needed) plus a root R -> X: {M_i} is minimal, adding R is not."""
    edges = ["R -> X"] + [e for i in range(k) for e in (f"X -> M{i}", f"M{i} -> Y")]
    z = {f"M{i}" for i in range(k)}
    return _problem("separation_set", edges, {"x": ["X"], "y": ["Y"], "variant": "minimal"}), z, z | {"R"}


def bd_maximal(k: int):
    """X <-> R_i <-> Y: every R_i is a root outside An(X, Y, Z) that opens a path when added."""
    edges = ["W -> X", "W -> Y", "X -> Y"] + [e for i in range(k) for e in (f"X <-> R{i}", f"R{i} <-> Y")]
    q = {"treatment": "X", "outcome": "Y", "variant": "maximal"}
    return _problem("backdoor_set", edges, q, "ADMG"), {"W"}, set()


def bd_minimal(k: int):
    """P_i -> X, P_i -> Y (every P_i needed) plus Q -> X."""
    edges = ["X -> Y", "Q -> X"] + [e for i in range(k) for e in (f"P{i} -> X", f"P{i} -> Y")]
    z = {f"P{i}" for i in range(k)}
    q = {"treatment": "X", "outcome": "Y", "variant": "minimal"}
    return _problem("backdoor_set", edges, q), z, z | {"Q"}


def _grid_edges(w: int, h: int, diagonals: bool = False) -> list[str]:
    edges = [f"N{i}_{j} -> N{i + 1}_{j}" for i in range(w - 1) for j in range(h)]
    edges += [f"N{i}_{j} -> N{i}_{j + 1}" for i in range(w) for j in range(h - 1)]
    if diagonals:
        edges += [f"N{i}_{j} -> N{i + 1}_{j + 1}" for i in range(w - 1) for j in range(h - 1)]
    return edges


def _grid_path(cells: list[GridNode]) -> str:
    """A typed path over grid cells (every grid edge points to a larger index)."""
    out = f"N{cells[0][0]}_{cells[0][1]}"
    for (a, b), (c, d) in zip(cells, cells[1:]):
        out += (" -> " if (c, d) >= (a, b) else " <- ") + f"N{c}_{d}"
    return out


def _snake(w: int, h: int, diagonals: bool = False) -> list[GridNode]:
    """A longest corner-to-corner path of a w x h grid (w, h even): a column snake, then a zigzag
    over the last two columns; without diagonals it skips one cell (both corners share a colour),
    with them it ends through a diagonal and visits every cell."""
    cells: list[GridNode] = []
    for i in range(w - 2):
        rows = range(h) if i % 2 == 0 else range(h - 1, -1, -1)
        cells += [(i, j) for j in rows]
    a, b = w - 2, w - 1
    last = h - 2 if diagonals else h
    for j in range(last):
        cells += [(a, j), (b, j)] if j % 2 == 0 else ([(b, j)] if j == h - 1 else [(b, j), (a, j)])
    if diagonals:
        cells += [(b, h - 2), (a, h - 2), (a, h - 1), (b, h - 1)]
    return cells


def path_grid(w: int, h: int, diagonals: bool = False, task: str = "path"):
    """F11-c: the longest path between opposite corners of a w x h grid (with diagonals: not bipartite)."""
    ends = ("source", "target") if task == "path" else ("treatment", "outcome")
    q = {ends[0]: "N0_0", ends[1]: f"N{w - 1}_{h - 1}", "variant": "longest"}
    best = _grid_path(_snake(w, h, diagonals))
    if task == "backdoor_path":  # a back-door path must enter the treatment: N0_0 <-> N0_1 first
        edges = _grid_edges(w, h, diagonals) + ["N0_0 <-> N0_1"]
        short = "N0_0 <-> " + _grid_path([(i, i + 1) for i in range(min(w, h - 1))] + [(w - 1, h - 1)])
        return _problem(task, edges, q, "ADMG"), best.replace("N0_0 -> N0_1", "N0_0 <-> N0_1", 1), short
    straight = [(i, 0) for i in range(w)] + [(w - 1, j) for j in range(1, h)]
    return _problem(task, _grid_edges(w, h, diagonals), q), best, _grid_path(straight)


def path_chain(n: int):
    """A 2,000-node path graph V0 -> V1 -> ...: one simple path, so longest = shortest."""
    edges = [f"V{i} -> V{i + 1}" for i in range(n - 1)]
    q = {"source": "V0", "target": f"V{n - 1}", "variant": "longest"}
    return _problem("path", edges, q), " -> ".join(f"V{i}" for i in range(n)), "V0 -> V1"


def blocking_colliders(k: int, t: int):
    """A path of k bidirected colliders A_0 <-> ... <-> A_k-1, each with T (a chain of t) below it."""
    edges = [f"A{i} <-> A{i + 1}" for i in range(k - 1)] + [f"A{i} -> T0" for i in range(1, k - 1)]
    edges += [f"T{j} -> T{j + 1}" for j in range(t - 1)]
    path = " <-> ".join(f"A{i}" for i in range(k))
    return _problem("blocking_set", edges, {"path": path, "variant": "minimal"}, "ADMG"), set(), {"A1"}


CASES = [
    ("frontdoor_set", "minimal: audit F3 k=16 npar=60", lambda: fd_audit(16, 60)),
    ("frontdoor_set", "minimal: audit F3 k=16 npar=120", lambda: fd_audit(16, 120)),
    ("frontdoor_set", "minimal: 995 pairs (gadgets)", lambda: fd_gadgets(995, "minimal")),
    ("frontdoor_set", "minimal: star, 300 unforced members", lambda: fd_star(300)),
    ("frontdoor_set", "minimal: star, 998 unforced members", lambda: fd_star(998)),
    ("frontdoor_set", "maximal: 995 pairs (gadgets)", lambda: fd_gadgets(995, "maximal")),
    ("frontdoor_set", "per_member any: 950 members over T", lambda: fd_member_hub(950, 1045, "any")),
    ("frontdoor_set", "per_member minimal: 950 over T", lambda: fd_member_hub(950, 1045, "minimal")),
    ("frontdoor_set", "per_member maximal: 950 over T", lambda: fd_member_hub(950, 1045, "maximal")),
    ("frontdoor_set", "per_member maximal: 1000 exposed", lambda: fd_member_exposed(1000, 995)),
    ("separation_set", "maximal: audit F11-a k=1990", lambda: sep_audit(1990)),
    ("separation_set", "minimal: 1997 parallel mediators", lambda: sep_minimal(1997)),
    ("backdoor_set", "maximal: X <-> R_i <-> Y, k=1996", lambda: bd_maximal(1996)),
    ("backdoor_set", "minimal: 1997 confounders", lambda: bd_minimal(1997)),
    ("path", "longest: audit F11-c 6x6 grid", lambda: path_grid(6, 6)),
    ("path", "longest: 6x6 grid + diagonals", lambda: path_grid(6, 6, diagonals=True)),
    ("path", "longest: 40x50 grid", lambda: path_grid(40, 50)),
    ("path", "longest: 2000-node chain", lambda: path_chain(2000)),
    ("backdoor_path", "longest: 6x6 grid + diagonals", lambda: path_grid(6, 6, True, "backdoor_path")),
    ("blocking_set", "minimal: 1000 colliders over T", lambda: blocking_colliders(1000, 1000)),
]


# ---- trace-side limits: the largest slots and problems the contract admits ------------------------
# Each returns (problem, trace); these costs are linear (no search), but they bound a call too.
def _backdoor() -> tuple[Problem, str]:
    p = Problem.from_dict(_problem("backdoor_set", ["W -> Z", "Z -> X", "Z -> Y", "X -> M", "M -> Y", "X -> Y"],
                                   {"treatment": "X", "outcome": "Y", "variant": "any"}, "DAG"))
    return p, p.family.canonical_trace(p, frozenset({"Z"}))


def trace_word_soup():
    """A 300 KB GRAPH slot of bare words (audit F4: 1.23 s before the lexer joined names once)."""
    p, good = _backdoor()
    graph = next(line for line in good.split("\n") if line.startswith("GRAPH: "))
    return p, good.replace(graph, "GRAPH: " + " ".join(["w"] * 149_000))


def trace_headers(kind: str):
    """1 MB traces full of header-like lines (audit tools/bigtrace.py), read up to the 1 M limit."""
    p, good = _backdoor()
    text = {"graph lines": "GRAPH:\n" * 140_000 + good, "result lines": "**Result** of step\n" * 52_000 + good,
            "blocks": (good + "\n") * 3_000}[kind]
    return p, text[:1_000_000]


def kk_big(n_people: int, chars: int):
    """K&K at the verifier's people limit (the generator stops at 10) with a CONSTRAINTS slot near the
    300 KB GRAPH-slot limit (audit F11): each person speaks about the next two."""
    people = [f"P{i}" for i in range(n_people)]
    said = {people[i]: f"knight({people[(i + 1) % n_people]}) or knave({people[(i + 2) % n_people]})"
            for i in range(n_people)}
    p = Problem.from_dict({"task": "knights_knaves", "mode": "constructed",
                           "query": {"people": people, "question": "roles"},
                           "data": {"people": people, "statements": said}})
    good = p.family.canonical_trace(p)
    line = next(ln for ln in good.split("\n") if ln.startswith("CONSTRAINTS: "))
    body = line[len("CONSTRAINTS: "):]
    return p, good.replace(line, "CONSTRAINTS: " + "; ".join([body] * max(1, chars // (len(body) + 2))))


def ate_big(parents: int, seed: int = 0):
    """ate_threshold at the 20-variable limit, each node with up to ``parents`` parents (CPTs of
    2^parents rows), the canonical trace and a new adjustment set."""
    import random

    rng = random.Random(seed)
    nodes = [f"V{i}" for i in range(20)]
    pa = {v: nodes[max(0, i - parents):i] for i, v in enumerate(nodes)}
    cpts = {v: {"parents": pa[v], "p1": [round(rng.uniform(0.05, 0.95), 3) for _ in range(2 ** len(pa[v]))]}
            for v in nodes}
    edges = [f"{a} -> {v}" for v in nodes for a in pa[v]]
    p = Problem.from_dict({"task": "ate_threshold", "graph": ", ".join(edges), "graph_class": "DAG",
                           "query": {"treatment": "V0", "outcome": "V19", "threshold": 0.05}, "data": {"cpts": cpts}})
    return p, p.family.canonical_trace(p)


TRACE_CASES = [
    ("backdoor_set", "300 KB GRAPH of bare words", trace_word_soup),
    ("backdoor_set", "1 MB trace: GRAPH: header lines", lambda: trace_headers("graph lines")),
    ("backdoor_set", "1 MB trace: **Result** lines", lambda: trace_headers("result lines")),
    ("backdoor_set", "1 MB trace: 3,000 blocks", lambda: trace_headers("blocks")),
    ("knights_knaves", "20 people, 290 KB CONSTRAINTS", lambda: kk_big(20, 290_000)),
    ("ate_threshold", "20 variables, 3 parents each", lambda: ate_big(3)),
    ("ate_threshold", "20 variables, 14 parents each", lambda: ate_big(14)),
]


def run_trace_case(task: str, shape: str, build) -> list[tuple]:
    p, trace = build()
    _forget()
    s, cold = _cpu(lambda: score(trace, p))
    _, warm = _cpu(lambda: score(trace, p))
    size = len(p.graph.nodes) if p.graph is not None else len(p.data.get("people", ()))
    return [(task, shape, size, "as built", cold, warm, _outcome(s))]


# ---- timing ------------------------------------------------------------------------------------
def _forget() -> None:
    """Empty every parse cache and exact-check memo, so the next call pays the whole cost."""
    from calver.verifier import memo

    memo.clear_all()


def _cpu(fn) -> tuple[object, float]:
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def _outcome(s) -> str:
    text = " ".join(str(r) for r in s.reasons.values())
    bits = "".join(str(b) for b in s.bits)
    return f"{bits} too large" if "too large" in text else bits


def run_case(task: str, shape: str, build) -> list[tuple]:
    d, right, wrong = build()
    rows = []
    for label, answer in (("correct", right), ("wrong", wrong)):
        p = Problem.from_dict(d)
        fam = p.family
        obj = fam.coerce_object(answer)
        trace = fam.canonical_trace(p, obj) if hasattr(fam, "canonical_trace") else ""
        trace = trace.replace("RESULT: invalid", "RESULT: valid")  # what a confident trace claims
        p = Problem.from_dict(d)
        _forget()
        s, cold = _cpu(lambda: score(trace, p))
        _, warm = _cpu(lambda: score(trace, p))
        rows.append((task, shape, len(p.graph.nodes), label, cold, warm, _outcome(s)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run the cases whose family or shape contains this text")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    rows = []
    for task, shape, build in CASES + TRACE_CASES:
        if args.only and args.only not in task and args.only not in shape:
            continue
        rows += (run_trace_case if (task, shape, build) in TRACE_CASES else run_case)(task, shape, build)
    head = ("family", "shape", "nodes", "answer", "cold CPU s", "warm CPU s", "outcome")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|---|---|---:|---|---:|---:|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]:,} | {r[3]} | {r[4]:.3f} | {r[5]:.4f} | {r[6]} |")
    else:
        print(f"{head[0]:<14} {head[1]:<38} {head[2]:>6} {head[3]:<8} {head[4]:>10} {head[5]:>10}  {head[6]}")
        for r in rows:
            print(f"{r[0]:<14} {r[1]:<38} {r[2]:>6} {r[3]:<8} {r[4]:>10.3f} {r[5]:>10.4f}  {r[6]}")
    worst = max(rows, key=lambda r: r[4])
    print(f"worst cold call: {worst[4]:.3f} s CPU ({worst[0]}, {worst[1]}, {worst[2]:,} nodes, {worst[3]} answer)")


if __name__ == "__main__":
    main()
