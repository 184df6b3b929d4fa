"""calver.verifier: deterministic six-bit checking of contract traces (pure Python + networkx/numpy).

Public API: ``parse_graph``, ``Problem``, ``score``, ``grade``, ``select`` (plus ``TraceScore``,
``CausalGraph``, ``GraphClass`` and the task registry). Never imports torch.
"""

from calver.verifier.contract import CONTRACT_VERSION, SLOTS, split_slots
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.instructions import contract_instructions
from calver.verifier.parsers import parse_graph, render_graph
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import TaskFamily, families, get_family, register
from calver.verifier.scoring import TIE_RULES, TraceScore, grade, score, select, select_from_scores

__all__ = [
    "CONTRACT_VERSION",
    "SLOTS",
    "TIE_RULES",
    "CausalGraph",
    "GraphClass",
    "GraphError",
    "Problem",
    "ProblemError",
    "TaskFamily",
    "TraceScore",
    "contract_instructions",
    "families",
    "get_family",
    "grade",
    "parse_graph",
    "register",
    "render_graph",
    "score",
    "select",
    "select_from_scores",
    "split_slots",
]
