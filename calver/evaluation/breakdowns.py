"""Breakdowns (``calver eval --by FIELD``): the headline table computed within each stratum of a field.

A field is read from the unit's full problem (task, mode, graph class, and the analysis-only
``Problem.meta`` keys every adapter fills: ``source``, ``network``, ``encoding``, ``text_level``,
``people``, ``ate``, ``n_valid``), never from a selector's view; ``verification`` is what the verifier
judged candidates on (:func:`calver.infer.firewall.verification_mode`). ``policy`` is the pool a unit came
from when several pools are evaluated together. A unit whose problem does not record the field falls in
the stratum ``n/a`` (counted in :attr:`Breakdown.n_missing`). Intervals resample the stratum's own
source-problem clusters. A stratum with constructed-mode units also reports their graph recovery
(:mod:`calver.evaluation.graph_recovery`).
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from calver.evaluation.bootstrap import mean_ci, paired_diff_ci
from calver.evaluation.graph_recovery import UnitGraphRecovery, recover_units, summarize
from calver.evaluation.metrics import coverage, selected_correct
from calver.evaluation.results import Breakdown, BreakdownRow, Interval
from calver.evaluation.units import UnitFacts
from calver.infer.firewall import verification_mode

MISSING = "n/a"
# |ATE - threshold| band edges: how close the effect sits to the decision boundary
ATE_MARGIN_EDGES = (0.01, 0.05, 0.1)


def _meta(key: str) -> Callable[[UnitFacts], Any]:
    def get(u: UnitFacts) -> Any:
        p = u.grading_problem or u.problem
        return None if p is None else p.meta.get(key)
    return get


def _problem(attr: str) -> Callable[[UnitFacts], Any]:
    def get(u: UnitFacts) -> Any:
        p = u.grading_problem or u.problem
        value = None if p is None else getattr(p, attr)
        return getattr(value, "value", value)  # GraphClass -> its name
    return get


def ate_margin_band(margin: float) -> str:
    """The band of ``|ATE - threshold|``: ``[0, 0.01)``, ``[0.01, 0.05)``, ``[0.05, 0.1)``, ``>= 0.1``."""
    lo = 0.0
    for hi in ATE_MARGIN_EDGES:
        if margin < hi:
            return f"[{lo:g}, {hi:g})"
        lo = hi
    return f">= {lo:g}"


def _ate_margin(u: UnitFacts) -> str | None:
    p = u.grading_problem or u.problem
    if p is None or "ate" not in p.meta:
        return None
    try:
        margin = abs(float(p.meta["ate"]) - float(p.query["threshold"]))
    except (KeyError, TypeError, ValueError):
        return None
    return ate_margin_band(margin) if math.isfinite(margin) else None


def _validity_class(u: UnitFacts) -> str | None:
    n = _meta("n_valid")(u)
    if n is None or isinstance(n, bool) or not isinstance(n, int):
        return None
    return "none" if n == 0 else "one" if n == 1 else "many"


def _verification(u: UnitFacts) -> str | None:
    p = u.grading_problem or u.problem  # the full problem: K&K records its mode in meta, which views lack
    return None if p is None else verification_mode(p)


def verification_counts(units: Sequence[UnitFacts]) -> dict[str, int]:
    """{verification mode: units}, in first-seen order (units without a problem are not counted)."""
    out: dict[str, int] = {}
    for u in units:
        if (m := _verification(u)) is not None:
            out[m] = out.get(m, 0) + 1
    return out


BY_FIELDS: dict[str, Callable[[UnitFacts], Any]] = {
    "task": _problem("task"),
    "graph_class": _problem("graph_class"),
    "mode": _problem("mode"),
    "source": _meta("source"),
    "network": _meta("network"),
    "encoding": _meta("encoding"),
    "text_level": _meta("text_level"),
    "people": _meta("people"),
    "ate_margin": _ate_margin,
    "validity_class": _validity_class,  # one / many satisfiers (meta n_valid)
    "verification": _verification,  # source_graph / candidate_graph / grounded / candidate_local
}
POLICY_FIELD = "policy"


def check_fields(fields: Sequence[str], *, policy: bool = False) -> list[str]:
    """``fields`` deduplicated, or a ValueError naming an unknown one (with a did-you-mean)."""
    known = [*BY_FIELDS, *([POLICY_FIELD] if policy else [])]
    out = []
    for f in fields:
        if f not in known:
            close = difflib.get_close_matches(f, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown breakdown field {f!r}{hint}; known: {', '.join(known)}")
        if f not in out:
            out.append(f)
    return out


def stratum_order(stratum: str) -> tuple:
    """Sort key of strata: numbers first, in numeric order (10 after 9), then names, ``n/a`` last."""
    try:
        return (0, float(stratum), stratum)
    except ValueError:
        return (1 if stratum != MISSING else 2, 0.0, stratum)


def breakdowns(units: Sequence[UnitFacts], indices: Mapping[str, Mapping[Hashable, Any]], fields: Sequence[str], *,
               keys: Sequence[Hashable] | None = None, policies: Sequence[str] | None = None, draws: int = 2000,
               seed: int = 0, target: str = "calver", baseline: str = "plurality",
               recovery: Mapping[Hashable, UnitGraphRecovery] | None = None) -> dict[str, Breakdown]:
    """{field: :class:`Breakdown`} over ``units`` (each covered by every selector in ``indices``).
    ``recovery``: the units' :func:`~calver.evaluation.graph_recovery.recover_units`, when already known."""
    fields = check_fields(fields, policy=policies is not None)
    keys = [u.key for u in units] if keys is None else list(keys)
    if recovery is None:  # parsed once here, not once per field and stratum
        recovery = recover_units(units, indices, keys=keys, selectors=(target, baseline))
    out: dict[str, Breakdown] = {}
    for f in fields:
        if f == POLICY_FIELD:
            values = [str(p) for p in policies or ()]
        else:
            values = [MISSING if (v := BY_FIELDS[f](u)) is None else str(v) for u in units]
        rows = []
        for stratum in sorted(set(values), key=stratum_order):
            idx = [j for j, v in enumerate(values) if v == stratum]
            sub = [units[j] for j in idx]
            clusters = [u.source_id for u in sub]
            correct = {n: selected_correct(sub, [sel[keys[j]] for j in idx]) for n, sel in indices.items()}
            rows.append(BreakdownRow(
                stratum=stratum, n_units=len(sub), n_clusters=len(set(clusters)),
                accuracy={n: Interval.of(mean_ci(c, clusters, draws=draws, seed=seed)) for n, c in correct.items()},
                coverage=Interval.of(mean_ci(coverage(sub).astype(np.float64), clusters, draws=draws, seed=seed)),
                paired={n: Interval.of(paired_diff_ci(correct[target], c, clusters, draws=draws, seed=seed))
                        for n, c in correct.items() if n != target and target in correct},
                graph_recovery=summarize([recovery[keys[j]] for j in idx if keys[j] in recovery], draws=draws,
                                         seed=seed, keep_units=False),
            ))
        out[f] = Breakdown(field=f, target=target, baseline=baseline, rows=rows, n_missing=values.count(MISSING))
    return out


__all__ = ["ATE_MARGIN_EDGES", "BY_FIELDS", "MISSING", "POLICY_FIELD", "ate_margin_band", "breakdowns",
           "check_fields", "verification_counts"]
