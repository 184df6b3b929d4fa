"""The strict ATE certificate (Theorem 1): an ``ate_threshold`` trace's guards, each checked on its own.

The six-bit score (:mod:`calver.verifier.tasks.ate`) rewards a trace; the certificate says whether its
number can be trusted as an effect: it requires 6/6 and then re-checks treatment exclusion, the backdoor
criterion, positivity and the margin around τ, reporting every guard that fails.
"""

from __future__ import annotations

from calver.verifier.graph import GraphClass, GraphError
from calver.verifier.primitives import descendants, find_open_path, format_path
from calver.verifier.problem import Problem
from calver.verifier.registry import get_family
from calver.verifier.scm import adjustment_functional, is_positive
from calver.verifier.scoring import score
from calver.verifier.tasks.ate import AteThreshold


def strict_certificate(problem: Problem, trace: str) -> tuple[bool, list[str]]:
    """Whether ``trace`` earns the strict ATE certificate for ``problem`` (Theorem 1), and why not.

    Every guard is evaluated independently of the six-bit score (which it also requires):
    max score 6/6; the graph is a DAG and P is positive; Z ∩ ({X, Y} ∪ De(X)) = ∅ (reasons
    ``X in Z``, ``Y in Z``, ``descendant of X in Z``); X ⊥ Y | Z with X's outgoing edges removed
    (``backdoor path open``); and the recomputed ψ lies outside the margin (``inside margin
    |ψ−τ| ≤ ε``). Z is checked for membership *before* ψ is computed, so no number from an
    X ∈ Z adjustment is ever trusted. The graph and slots are the score's own (``Verdict.g_ver``,
    ``Verdict.slots``): G*, which the CPTs bind in both modes.
    """
    if problem.task != AteThreshold.name:
        return False, [f"the strict ATE certificate applies to ate_threshold problems, not {problem.task}"]
    fam = get_family(problem.task)
    assert isinstance(fam, AteThreshold)
    reasons: list[str] = []
    q = fam.normalize_query(problem)
    x, y, tau, eps = q["treatment"], q["outcome"], q["threshold"], q["epsilon"]
    sc = score(trace, problem)
    if sc.total != 6:
        failed = ", ".join(sorted(sc.reasons)) or "?"
        reasons.append(f"not max score: {sc.total}/6 (failed {failed})")
    g = sc.g_ver
    if g is None:
        return False, reasons + ["no usable graph"]
    scm = fam.scm(problem)
    if g.kind is not GraphClass.DAG or not g.acyclic:
        reasons.append("graph is not a DAG")
    if not is_positive(scm):
        reasons.append("P is not positive")
    assert sc.slots is not None  # a fresh score always carries its slots
    stext = sc.slots.get("STRATEGY")
    try:
        if stext is None:
            raise ValueError(sc.slots.problems.get("STRATEGY", "STRATEGY missing"))
        z = fam.parse_set(stext)
    except (ValueError, GraphError) as e:
        return False, reasons + [f"no adjustment set: {e}"]
    unknown = sorted(n for n in z if n not in g)
    if unknown:
        return False, reasons + [f"Z names unknown variable(s) {', '.join(unknown)}"]
    membership_ok = True
    if x in z:
        reasons.append(f"X in Z: the treatment {x} is in the adjustment set")
        membership_ok = False
    if y in z:
        reasons.append(f"Y in Z: the outcome {y} is in the adjustment set")
        membership_ok = False
    bad = sorted(z & descendants(g, x))
    if bad:
        reasons.append(f"descendant of X in Z: {', '.join(bad)}")
        membership_ok = False
    if not membership_ok:
        reasons.append("ψ not computed: Z violates treatment exclusion")
        return False, reasons
    path = find_open_path(g, x, y, z, remove_outgoing_of=x)
    if path is not None:
        reasons.append(f"backdoor path open: {format_path(path[0], path[1])}")
    try:
        psi = adjustment_functional(scm, x, y, z)
    except ValueError as e:
        return False, reasons + [f"ψ not computed: {e}"]
    if not abs(psi - tau) > eps:
        reasons.append(f"inside margin |ψ−τ| ≤ ε: |{psi:.6g} − {tau:g}| = {abs(psi - tau):.3g} ≤ {eps:g}")
    return not reasons, reasons
