"""Evaluation of selectors on frozen pools: everything that reads a label lives here, on top of
``calver.infer`` (which never imports this package).

Modules: ``grading`` (the only place labels are read: ``safe_grade``, ``grade_rows``, tie audits),
``units`` (per-candidate facts), ``bootstrap`` (vectorized clustered bootstrap), ``metrics``,
``scaling``, ``audits`` (perturbations), ``audit_runs`` (pool-level audits, ladder, strict ATE),
``evaluate`` (one policy's :class:`EvalResult`), ``multi`` (several pools: per-policy rows, pooled
units, Table 2), ``breakdowns`` (``--by FIELD``), ``results`` (the typed results and their JSON),
``report`` (markdown / JSON / PNG / wandb), ``audit_judges`` (judge / PRM corruption audit),
``refine_eval`` (refinement vs token-matched best-of-K'), ``router_calibration`` (the router's dev-set
threshold and its test report), ``cli``.
"""

from calver.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.evaluation.evaluate import evaluate, evaluate_policy, evaluate_units
from calver.evaluation.grading import safe_grade
from calver.evaluation.multi import evaluate_pools
from calver.evaluation.results import EvalResult, Interval, MultiEvalResult, load_results
from calver.evaluation.units import UnitFacts, load_units, unit_facts

__all__ = ["EvalResult", "Interval", "MultiEvalResult", "UnitFacts", "evaluate", "evaluate_policy", "evaluate_pools",
           "evaluate_units", "load_results", "load_units", "mean_ci", "paired_diff_ci", "safe_grade", "unit_facts"]
