"""THE prompt renderer: every sampler, trainer and exporter builds chat messages here.

``render_prompt(problem)`` gives ``[system, user]`` messages: system = the registry's contract
instructions for the problem's task, user = the problem text (graph in its encoding + question).
``problem_text(graph, question, encoding)`` builds that user text for supplied-graph problems;
``prompt_encoding(problem)`` names the graph encoding a problem's own prompt shows.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from calver.verifier.formats.common import RenderOrder
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.instructions import contract_instructions
from calver.verifier.parsers import RENDER_FORMATS, reading_order, render_graph
from calver.verifier.problem import Problem

ENCODING_HEADERS: dict[str, str] = {
    "arrows": "as an edge list (A -> B: A causes B; A <-> B: A and B share a hidden common cause)",
    "json": "as JSON (nodes, directed edges [from, to], bidirected edges)",
    "json_parents": "as a JSON map from each node to its parents (and its spouses: bidirected neighbours)",
    "matrix": "as an adjacency matrix (row -> column: 1 directed edge, 2 bidirected edge, 3 both)",
    "graphml": "in GraphML",
    "dot": "in Graphviz DOT (dir=both marks a bidirected edge)",
    "prose": "in sentences",
    "clear": "in one sentence",
}

_CLASS_WORDS = {
    GraphClass.DAG: "a DAG (directed acyclic graph)",
    GraphClass.ADMG: "an ADMG (acyclic directed mixed graph: directed and bidirected edges)",
    GraphClass.DIRECTED: "a directed graph (cycles allowed)",
}


# A canonical trace's GRAPH slot: an arrow list in reading order, or (``verbatim``) the prompt's own matrix or
# parents map: reading either into arrows regroups every edge, which a small policy gets wrong, while the
# GRAPH bit parses every encoding. ``cue_first``: verbatim, and the arrow lines of the families whose rule
# reads a node's parents written child first (``L <- K``), so each lookup's node comes before what it copies.
GRAPH_SLOTS = ("arrows", "verbatim", "cue_first")
VERBATIM_SLOTS = ("verbatim", "cue_first")  # the slots that copy a matrix or parents map as shown
VERBATIM_ENCODINGS = ("json_parents", "matrix")
PARENT_LOOKUP_TASKS = ("backdoor_set", "separation_set")  # their rule rationales look up edges into a node

SYSTEMS = ("contract", "compact")  # the system message: the full contract instructions, or a short one


@functools.lru_cache(maxsize=64)
def system_prompt(task: str, system: str = "contract") -> str:
    """The system message for ``task``: the contract instructions (``contract``), or (``compact``) one line
    naming the task and the six slot labels, for policies trained on the contract, whose rows carry it in
    their assistant turns instead (the contract is over half of every row's tokens and carries no loss)."""
    if system == "contract":
        return contract_instructions(task)
    if system != "compact":
        raise ValueError(f"system prompt must be one of {SYSTEMS}, got {system!r}")
    from calver.verifier.contract import SLOTS
    from calver.verifier.registry import get_family

    labels = (get_family(task).graph_label, *SLOTS[1:])
    return f"Task: {task}. Reply with the six contract lines {', '.join(labels)}, in that order."


def problem_text(graph: CausalGraph, question: str, encoding: str = "arrows", header: bool = True,
                 order: RenderOrder | None = None) -> str:
    """The user message of a supplied-graph problem (``header``: led by a line naming the graph class and
    encoding; CLEAR's prompts have none; ``order``: the order its nodes and edges are listed in)."""
    if encoding not in ENCODING_HEADERS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {', '.join(ENCODING_HEADERS)}")
    if not header:
        return f"{render_graph(graph, encoding, order)}\n\n{question}"
    head = f"The causal graph is {_CLASS_WORDS[graph.kind]}, given {ENCODING_HEADERS[encoding]}:"
    return f"{head}\n{render_graph(graph, encoding, order)}\n\n{question}"


def render_order(problem: Problem) -> RenderOrder | None:
    """The order a generated problem's prompt lists its graph in (``meta["render_order"]``, written by
    ``shuffle_order``), or None (the default order)."""
    o = problem.meta.get("render_order") if isinstance(problem.meta, dict) else None
    if not o:
        return None
    return RenderOrder(tuple(o["nodes"]), tuple((a, b) for a, b in o["directed"]),
                       tuple((a, b) for a, b in o.get("bidirected", ())))


class ShownGraph(NamedTuple):
    """A problem's graph as its prompt shows it: the encoding, the order it lists nodes and edges in, the text."""

    encoding: str
    order: RenderOrder | None
    text: str


def _shown_graph(problem: Problem) -> ShownGraph | None:
    """``problem``'s graph as its prompt shows it, where the prompt holds the graph rendered in
    ``meta["encoding"]``; else None."""
    order = render_order(problem)
    enc = problem.meta.get("encoding") if isinstance(problem.meta, dict) else None
    g = problem.graph
    if g is None or enc not in RENDER_FORMATS:
        return None
    try:
        shown = render_graph(g, enc, order)
    except GraphError:  # a graph this encoding cannot render is not what the prompt shows
        return None
    return ShownGraph(enc, order, shown) if shown in (problem.text or "") else None


def graph_line_order(problem: Problem) -> RenderOrder | None:
    """The order a trace's GRAPH line copies ``problem``'s graph in: the order its prompt's encoding lists the
    nodes and edges (:func:`~calver.verifier.parsers.reading_order`; a matrix row by row, a parents map node by
    node), where the prompt shows the graph rendered in ``meta["encoding"]``; else :func:`render_order`."""
    shown = _shown_graph(problem)
    if shown is None:
        return render_order(problem)
    return reading_order(problem.graph, shown.encoding, shown.order)


def verbatim_graph(problem: Problem) -> str | None:
    """The graph text a ``verbatim`` GRAPH slot copies: the prompt's matrix or JSON parents map as shown
    (:data:`VERBATIM_ENCODINGS`), or None where the prompt shows another encoding (the slot stays an arrow list)."""
    shown = _shown_graph(problem)
    return shown.text if shown is not None and shown.encoding in VERBATIM_ENCODINGS else None


def slot_graph(problem: Problem, graph_slot: str) -> str | None:
    """The GRAPH slot text a canonical trace writes under ``graph_slot`` (:data:`GRAPH_SLOTS`), or None for the
    arrow line in :func:`graph_line_order`. ``cue_first``: a matrix or parents map as shown; for
    :data:`PARENT_LOOKUP_TASKS`, an arrow line child first in that order (a causal model's lookup copies what
    follows its cue: ``L <- K`` puts the node before the parent it looks up)."""
    if graph_slot not in GRAPH_SLOTS:
        raise ValueError(f"slot_graph: graph_slot must be one of {GRAPH_SLOTS}, got {graph_slot!r}")
    if graph_slot == "arrows":
        return None
    shown = verbatim_graph(problem)
    if shown is not None or graph_slot == "verbatim" or problem.graph is None:
        return shown
    if problem.task not in PARENT_LOOKUP_TASKS:
        return None
    from calver.verifier.formats.arrows import render

    return render(problem.graph, graph_line_order(problem), child_first=True)


def prompt_encoding(problem: Problem) -> str | None:
    """The graph encoding ``problem``'s own prompt shows (``meta["encoding"]``): ``"none"`` without a
    graph, ``"text"`` in constructed mode, ``"arrows"`` for a text-less supplied graph (what
    :func:`user_text` renders), the :func:`problem_text` header's encoding, else None (unknown)."""
    if problem.graph is None:
        return "none"
    if problem.mode == "constructed":
        return "text"
    if not problem.text:
        return "arrows"
    first = problem.text.split("\n", 1)[0]
    lead = f"The causal graph is {_CLASS_WORDS[problem.graph.kind]}, given "
    return next((enc for enc, head in ENCODING_HEADERS.items() if first == f"{lead}{head}:"), None)


def question_for(problem: Problem) -> str:
    fam = problem.family
    return fam.question_text(fam.normalize_query(problem))


def user_text(problem: Problem, encoding: str | None = None) -> str:
    """The problem's user message.

    - ``encoding`` re-renders a supplied graph-only problem (no ``data`` payload) in that encoding.
    - A problem's own ``text`` is used as is; when it lacks the family's question (e.g. a CLEAR
      row whose text is only the graph description) and carries no ``data`` payload (ATE and K&K
      texts phrase their own question), the question is appended.
    - Supplied-mode problems without text get the graph in arrow text plus the question.
    """
    graph_only = problem.graph is not None and problem.mode == "supplied" and not problem.data
    if encoding is not None and graph_only:
        return problem_text(problem.graph, question_for(problem), encoding, order=render_order(problem))
    if problem.text:
        if problem.data:
            return problem.text
        question = question_for(problem)
        return problem.text if question in problem.text else f"{problem.text}\n\n{question}"
    if problem.graph is not None and problem.mode == "supplied":
        return problem_text(problem.graph, question_for(problem), "arrows")
    raise ValueError(f"problem {problem.id!r} has neither text nor a graph to render")


def render_prompt(problem: Problem, encoding: str | None = None, system: str = "contract") -> list[dict[str, Any]]:
    """Chat messages ``[{"role": "system", ...}, {"role": "user", ...}]`` for ``problem`` (``system``: see
    :func:`system_prompt`)."""
    return [
        {"role": "system", "content": system_prompt(problem.task, system)},
        {"role": "user", "content": user_text(problem, encoding)},
    ]


def render_sft_messages(problem: Problem, trace: str, encoding: str | None = None,
                        system: str = "contract") -> list[dict[str, Any]]:
    """``render_prompt`` plus the assistant turn holding ``trace``."""
    return render_prompt(problem, encoding, system) + [{"role": "assistant", "content": trace}]
