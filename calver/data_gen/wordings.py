"""Question wordings beyond calver's own: the styles external benchmarks ask in, for a training mix.

``calver``: each family's ``question_text``. ``clear``: CLEAR's phrasing where CLEAR asks that question
("Find one valid nodeset that can d-separate node Z and node V .", "... block path Q->G->D.", "Find one cycle
in this graph."); a query CLEAR has no phrasing for keeps calver's. Only the user text changes: the query,
and so the trace and its score, are the same.
"""

from __future__ import annotations

from typing import Any, Mapping

from calver.verifier.graph import CausalGraph

WORDINGS = ("calver", "clear")


def clear_question(task: str, g: CausalGraph, query: Mapping[str, Any]) -> str | None:
    """CLEAR's wording of ``query``, or None where CLEAR has none."""
    variant = query.get("variant", "any")
    if task == "separation_set" and variant == "any" and len(query["x"]) == len(query["y"]) == 1:
        (x,), (y,) = query["x"], query["y"]
        return f"Find one valid nodeset that can d-separate node {x} and node {y} ."
    if task == "blocking_set" and variant == "any":
        nodes, types = query["path"]
        parts = [nodes[0]]
        for t, n in zip(types or ["->"] * (len(nodes) - 1), nodes[1:]):
            parts += [t, n]
        return f"Find one valid nodeset that can block path {''.join(parts)}."
    if task == "cycle_witness" and not g.acyclic:  # CLEAR asks only of graphs that have one
        return "Find one cycle in this graph."
    return None


def question(task: str, g: CausalGraph, query: Mapping[str, Any], calver_text: str, wording: str) -> str:
    """The question in ``wording`` (``calver_text`` where that wording has none for this query)."""
    if wording not in WORDINGS:
        raise ValueError(f"wording must be one of {WORDINGS}, got {wording!r}")
    if wording == "clear":
        return clear_question(task, g, query) or calver_text
    return calver_text


__all__ = ["WORDINGS", "clear_question", "question"]
