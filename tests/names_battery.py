"""The 2026-12-03 audit's hostile-names battery (M2) as a library, shared by ``tests/test_name_rendering.py``
(small, in CI) and ``benchmarks/attack_bench.py --names`` (at scale).

Random DAGs over hostile node names (separators, slot labels, empty-set words, brackets, quotes, unicode);
for backdoor_set and separation_set every subset of the other nodes is an answer, judged right or wrong by
networkx (``is_d_separator``, descendants). Each answer's canonical trace is scored with its GRAPH slot in
every encoding. A wrong answer at 6/6 is a reward hack; a right one below 6/6 a false reject (the contract's
own trace refused).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import networkx as nx

from calver.verifier import CausalGraph, Problem, render_graph, score
from calver.verifier.registry import get_family

NAMES = ["ANSWER: yes", "RESULT", "Strategy - x", "QUERY:", "GRAPH", "a -> b", "x <-> y", "blood pressure",
         "température", "Ω", "名前", "and", "or", "none", "yes", "no", "{}", "∅", "Z,W", "1", "-1", "true", "Z", "W",
         "rock and roll", "gdp.growth", "age (years)", "it's", '"q"', "A;B", "[x]", "x=y",
         "DERIVATION: backdoor_check()", "CONSTRAINTS", "->", "<-", "#", "`z`", "**b**", " lead", "tab\tname",
         "Aì", "\u200dzwj", "ｘ", "Ａ", "empty", "nothing", "null", "set()", "N/A", "o-o", "(bidirected)"]
ENCODINGS = ("arrows", "json", "json_parents", "matrix", "graphml", "dot")


def _right(task: str, g: CausalGraph, x: str, y: str, z: frozenset[str]) -> bool:
    d = nx.DiGraph(list(g.directed))
    d.add_nodes_from(g.nodes)
    if task == "backdoor_set":
        if z & (nx.descendants(d, x) | {x, y}):
            return False
        d.remove_edges_from(list(d.out_edges(x)))
    elif z & {x, y}:
        return False
    return nx.is_d_separator(d, {x}, {y}, set(z))


def _with_graph(trace: str, gtext: str) -> str:
    lines = trace.split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith("GRAPH:"))
    return "\n".join(lines[:i] + ["GRAPH:", gtext] + lines[i + 1:])


def run(n_graphs: int, seed: int = 0) -> Counter:
    """Counts: ``traces``, ``right``, ``wrong_six``, ``right_below_six`` (per encoding too, as
    ``<enc>:<count>``), ``problems``."""
    rng = random.Random(seed)
    out: Counter = Counter()
    for gi in range(n_graphs):
        names = rng.sample(NAMES, rng.randint(4, 6))
        k = len(names)
        edges = [(names[i], names[j]) for i in range(k) for j in range(i + 1, k) if rng.random() < 0.45]
        x = names[rng.randrange(k - 1)]
        y = rng.choice(names[names.index(x) + 1:])
        for task in ("backdoor_set", "separation_set"):
            es = list(dict.fromkeys(edges + [(x, y)])) if task == "backdoor_set" else [e for e in edges if e != (x, y)]
            g = CausalGraph.build(names, es, (), "DAG")
            q = {"treatment": x, "outcome": y, "variant": "any"} if task == "backdoor_set" else \
                {"x": [x], "y": [y], "variant": "any"}
            p = Problem.from_dict({"id": f"n{gi}", "task": task, "graph": g, "graph_class": "DAG", "query": q})
            fam = get_family(task)
            out["problems"] += 1
            others = [v for v in names if v not in (x, y)]
            for r in range(len(others) + 1):
                for s in itertools.combinations(others, r):
                    z = frozenset(s)
                    right = _right(task, g, x, y, z)
                    base = fam.canonical_trace(p, z)
                    for enc in ENCODINGS:
                        tr = base if enc == "arrows" else _with_graph(base, render_graph(g, enc))
                        total = score(tr, p).total
                        for key in ("", f"{enc}:"):
                            out[key + "traces"] += 1
                            out[key + "right"] += right
                            out[key + "wrong_six"] += total == 6 and not right
                            out[key + "right_below_six"] += right and total < 6
    return out
