"""Evaluation of selectors on frozen pools: clustered paired bootstrap, accuracy / coverage /
repair decomposition / fragmentation / calibration, K-prefix scaling, mechanism audits, reports.

Modules: ``bootstrap`` (vectorized clustered bootstrap), ``table`` (per-candidate facts),
``metrics``, ``scaling``, ``audits`` (perturbations), ``audit_runs`` (pool-level audits, ladder,
strict ATE), ``evaluate`` (the results dict), ``report`` (markdown / JSON / PNG / wandb), ``cli``.
"""

from calver.infer.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.infer.evaluation.evaluate import evaluate, evaluate_units
from calver.infer.evaluation.table import UnitFacts, load_units, unit_facts

__all__ = ["UnitFacts", "evaluate", "evaluate_units", "load_units", "mean_ci", "paired_diff_ci", "unit_facts"]
