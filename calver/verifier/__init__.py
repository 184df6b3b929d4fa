"""calver.verifier: deterministic six-bit checking of contract traces (pure Python + networkx/numpy).

Public API: ``parse_graph``, ``Problem``, ``score``, ``grade``, ``select`` (plus ``Verdict``,
``CausalGraph``, ``GraphClass`` and the task registry), and ``prepare`` (a ``PreparedProblem``: one
problem checked and normalized once, for scoring many traces) with ``problem_fingerprint`` (a stable
content hash). Never imports torch.
"""

from calver.verifier.contract import CONTRACT_VERSION, SLOTS, split_slots
from calver.verifier.family import TaskFamily
from calver.verifier.graph import CausalGraph, GraphClass, GraphError
from calver.verifier.instructions import contract_instructions
from calver.verifier.parsers import parse_graph, render_graph
from calver.verifier.prepared import PreparedProblem, prepare, problem_fingerprint
from calver.verifier.problem import Problem, ProblemError
from calver.verifier.registry import families, get_family, register
from calver.verifier.scoring import TIE_RULES, grade, score, select, select_from_scores
from calver.verifier.verdict import BIT_KEYS, RowResult, Unscorable, Verdict

__all__ = [
    "BIT_KEYS",
    "CONTRACT_VERSION",
    "SLOTS",
    "TIE_RULES",
    "CausalGraph",
    "GraphClass",
    "GraphError",
    "PreparedProblem",
    "RowResult",
    "Problem",
    "ProblemError",
    "TaskFamily",
    "Unscorable",
    "Verdict",
    "contract_instructions",
    "families",
    "get_family",
    "grade",
    "parse_graph",
    "prepare",
    "problem_fingerprint",
    "register",
    "render_graph",
    "score",
    "select",
    "select_from_scores",
    "split_slots",
]
