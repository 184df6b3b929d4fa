"""Typed results of ``calver eval``: what :func:`~calver.evaluation.evaluate.evaluate` returns and what
every report reads.

Each class mirrors one block of ``results.json``; ``to_dict()`` writes it (plain JSON: NaN as null, ±inf
as "inf"/"-inf", numbers unrounded) and ``from_dict()`` reads it back into equal objects. Optional
blocks that were not computed (K-curves with fewer than two prefixes, audits switched off) are left
out of the JSON, as they are left ``None`` here.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, TypeVar

import numpy as np

if TYPE_CHECKING:
    from calver.evaluation.graph_recovery import GraphRecovery

T = TypeVar("T")


# ---- JSON codec driven by the dataclass annotations -------------------------------------------------
def to_json(obj: Any) -> Any:
    """Plain JSON of a result (dataclasses by field, NaN -> null, ±inf -> "inf"/"-inf", numpy unwrapped)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        custom = getattr(obj, "_to_json", None)
        if custom is not None:
            return custom()
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not (getattr(obj, f.name) is None and f.metadata.get("omit_none", True))}
    if isinstance(obj, Mapping):
        return {("/".join(map(str, k)) if isinstance(k, tuple) else str(k)): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, (set, frozenset)):
        return sorted(to_json(v) for v in obj)
    return obj


def _float(x: Any) -> float:
    """A float field as written by :func:`to_json`: null is NaN, "inf"/"-inf" are infinities."""
    return float("nan") if x is None else float(x)


def from_json(tp: Any, data: Any) -> Any:
    """Inverse of :func:`to_json` for the annotated type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:  # every result field is ``T`` or ``T | None``
            raise TypeError(f"from_json: unsupported union {tp}")
        return from_json(inner[0], data)
    if dataclasses.is_dataclass(tp):
        return tp.from_dict(data)
    if origin in (dict, Mapping, typing.Mapping) or tp is dict:
        kt, vt = args if args else (Any, Any)
        return {(int(k) if kt is int else k): from_json(vt, v) for k, v in dict(data).items()}
    if origin in (list, typing.List) or tp is list:
        vt = args[0] if args else Any
        return [from_json(vt, v) for v in data]
    if tp is float:
        return _float(data)
    if tp is int and data is not None:
        return int(data)
    return data


def _late_types() -> dict[str, Any]:
    """Block types defined in modules that import this one (they subclass :class:`JsonRecord`), so their
    names resolve only when a result is read, not when this module is imported."""
    from calver.evaluation.graph_recovery import GraphRecovery

    return {"GraphRecovery": GraphRecovery}


class JsonRecord:
    """Mixin: ``to_dict`` / ``from_dict`` from the dataclass's annotations."""

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        custom = getattr(cls, "_from_json", None)
        if custom is not None:
            return custom(data)
        hints = typing.get_type_hints(cls, localns=_late_types())
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
        kw = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in data:
                kw[f.name] = from_json(hints[f.name], data[f.name])
        return cls(**kw)


def _threshold_json(t: float) -> Any:
    """A score threshold as written: an integral one as the int it was given as (``6``, not ``6.0``)."""
    return int(t) if isinstance(t, float) and t.is_integer() else to_json(t)


# ---- intervals and counts ------------------------------------------------------------------------
@dataclass
class Interval(JsonRecord):
    """A clustered percentile-bootstrap interval (:func:`~calver.evaluation.bootstrap.mean_ci`); a paired
    difference (:func:`~calver.evaluation.bootstrap.paired_diff_ci`) also has both means."""

    estimate: float
    ci_low: float
    ci_high: float
    alpha: float = 0.05
    draws: int = 0
    cluster_key: str = "source_id"
    seed: int = 0
    n_units: int = 0
    n_clusters: int = 0
    method: str = "clustered percentile bootstrap"
    mean_a: float | None = None
    mean_b: float | None = None
    mean_diff: float | None = None

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Interval":
        """From the dict the bootstrap functions return."""
        return cls.from_dict(to_json(d))


@dataclass
class Decomposition(JsonRecord):
    """Repairs (target right, baseline wrong) and new errors (the reverse) over ``n`` units."""

    n: int
    repairs: int
    new_errors: int
    both_correct: int
    both_wrong: int
    ratio: float
    net_gain: float
    net_gain_ci: Interval | None = None


@dataclass
class TieAudit(JsonRecord):
    """CALVER accuracy under the first / best / worst tie rule (best and worst read labels)."""

    calver_first: Interval
    calver_best: Interval
    calver_worst: Interval
    band: Interval
    n_tied_units: int


@dataclass
class Fragmentation(JsonRecord):
    """The fragmentation condition: an invalid answer out-votes every individual valid answer."""

    n_covered: int
    n_fragmented: int
    frac_of_covered: float
    n_invalid_unique_plurality: int
    target_acc_in_fragmented: float
    baseline_acc_in_fragmented: float
    target_acc_outside_fragmented: float
    baseline_acc_outside_fragmented: float
    target_acc_in_invalid_plurality: float
    decomposition_in_fragmented: Decomposition
    gain_in_fragmented: Interval | None = None
    gain_outside_fragmented: Interval | None = None


@dataclass
class Calibration(JsonRecord):
    """The verifier score as a detector of valid answers at ``score >= threshold``."""

    threshold: float
    n: int
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float
    fpr: float
    coverage: float
    auroc: float

    def _to_json(self) -> dict[str, Any]:
        return {**{f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)},
                "threshold": _threshold_json(self.threshold)}


@dataclass
class KCurve(JsonRecord):
    """Accuracy per selector and candidate coverage at each K-prefix, with clustered bands and the
    target - baseline gap per K."""

    ks: list[int]
    accuracy: dict[str, list[float]]
    coverage: list[float]
    ci: dict[str, list[list[float]]]
    gap: list[Interval | None]
    target: str
    baseline: str
    n_units: int
    n_clusters: int

    def _to_json(self) -> dict[str, Any]:
        d = {f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}
        d["gap"] = [None if g is None else g.to_dict() for g in self.gap]
        return d


@dataclass
class StrictAte(JsonRecord):
    """Max-score ATE traces: how many are wrong, and which strict-certificate guards they violate."""

    n_units: int = 0
    n_max_score: int = 0
    n_correct: int = 0
    n_wrong: int = 0
    certified: int = 0
    certified_wrong: int = 0
    unexplained: int = 0
    guards: dict[str, int] = field(default_factory=dict)
    wrong_by_guard_set: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RenameAudit(JsonRecord):
    n: int
    unchanged: int
    unchanged_frac: float
    changed_examples: list[Any] = field(default_factory=list)


@dataclass
class PerturbationAudit(JsonRecord):
    """An answer swap or witness damage applied to frozen candidates, and the scores after it."""

    n_max_score: int
    applied_max_score: int
    applied_all: int
    lost_max: int
    lowered_all: int
    lowered_all_frac: float
    distribution: dict[int, int] = field(default_factory=dict)  # score after -> max-score candidates


@dataclass
class Audits(JsonRecord):
    """The mechanism audits on frozen candidates (:func:`~calver.evaluation.audit_runs.audit_summary`)."""

    rename: RenameAudit
    swap: PerturbationAudit
    damage: PerturbationAudit
    n_errors: int = 0
    errors: list[Any] = field(default_factory=list)
    limit: int | None = None
    seed: int = 0


@dataclass
class LadderRung(JsonRecord):
    rung: str
    calver: float
    plurality: float
    lift: Interval
    retained: float


@dataclass
class Ladder(JsonRecord):
    """CALVER's lift over plurality when the checker graph is corrupted (delete / add / reverse)."""

    rungs: list[LadderRung] = field(default_factory=list)
    n_units: int = 0
    n_skipped_problems: int = 0
    frac: float | None = None
    seed: int | None = None
    note: str | None = None


@dataclass
class UnitRow(JsonRecord):
    """One evaluated unit: each selector's index (-1: an answer built outside the pool, kept in
    ``answers``) and correctness. In ``results.json`` the row is flat: ``<selector>_index`` ..."""

    problem_id: str
    seed: int
    source_id: str
    coverage: bool
    fragmented: bool
    index: dict[str, int] = field(default_factory=dict)
    correct: dict[str, bool] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    policy: str | None = None
    SUFFIXES: ClassVar[tuple[str, ...]] = ("_index", "_correct", "_answer")

    def _to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"problem_id": self.problem_id, "seed": self.seed, "source_id": self.source_id,
                               "coverage": self.coverage, "fragmented": self.fragmented}
        if self.policy is not None:
            row["policy"] = self.policy
        for n, i in self.index.items():
            row[f"{n}_index"] = i
            if n in self.answers:
                row[f"{n}_answer"] = to_json(self.answers[n])
        row.update({f"{n}_correct": bool(c) for n, c in self.correct.items()})
        return row

    @classmethod
    def _from_json(cls, d: Mapping[str, Any]) -> "UnitRow":
        index = {k[: -len("_index")]: int(v) for k, v in d.items() if k.endswith("_index")}
        correct = {k[: -len("_correct")]: bool(v) for k, v in d.items() if k.endswith("_correct")}
        answers = {k[: -len("_answer")]: v for k, v in d.items() if k.endswith("_answer")}
        return cls(problem_id=str(d["problem_id"]), seed=int(d["seed"]), source_id=str(d["source_id"]),
                   coverage=bool(d["coverage"]), fragmented=bool(d["fragmented"]), index=index, correct=correct,
                   answers=answers, policy=d.get("policy"))


@dataclass
class EvalMeta(JsonRecord):
    """Provenance of one evaluation: the pool(s), bootstrap settings, scoring provenance, wall time."""

    pool: str
    manifest_sha256: str
    selectors: list[str]
    draws: int
    decomp_draws: int
    seed: int
    threshold: float
    cluster_key: str
    k_max: int
    seconds: float | None = None
    scores: dict[str, Any] | None = None

    def _to_json(self) -> dict[str, Any]:
        return {**{f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)
                   if getattr(self, f.name) is not None}, "threshold": _threshold_json(self.threshold)}


@dataclass
class BreakdownRow(JsonRecord):
    """One stratum of a breakdown (or one policy of the Table 2 layout): accuracy per selector,
    coverage and the target's paired gains."""

    stratum: str
    n_units: int
    n_clusters: int
    accuracy: dict[str, Interval]
    coverage: Interval
    paired: dict[str, Interval]
    graph_recovery: GraphRecovery | None = None  # the stratum's constructed-mode units, if any


@dataclass
class Breakdown(JsonRecord):
    """Results split by one problem field (``--by FIELD``)."""

    field: str
    target: str
    baseline: str
    rows: list[BreakdownRow] = field(default_factory=list)
    n_missing: int = 0  # units whose problem does not record the field (stratum "n/a")


@dataclass
class EvalResult(JsonRecord):
    """Everything ``calver eval`` reports for one pool (or one policy's units), unrounded."""

    n_units: int
    n_units_total: int
    n_clusters: int
    cluster_key: str
    target: str
    baseline: str
    accuracy: dict[str, Interval]
    coverage: Interval
    paired: dict[str, Interval]
    tie_audit: TieAudit
    decomposition: dict[str, Decomposition]
    fragmentation: Fragmentation
    calibration: Calibration
    units: list[UnitRow] = field(default_factory=list)
    builtin_agreement_with_stored: dict[str, float] = field(default_factory=dict)
    k_scaling: KCurve | None = None
    k_scaling_registry_error: str | None = None
    strict_ate: StrictAte | None = None
    audits: Audits | None = None
    ladder: Ladder | None = None
    breakdowns: dict[str, Breakdown] | None = None
    meta: EvalMeta | None = None
    graph_recovery: GraphRecovery | None = None  # constructed-mode units only (None: there are none)
    verification: dict[str, int] = field(default_factory=dict)  # verification mode -> units
    parse_rate: float | None = None  # candidates (of every loaded unit) whose ANSWER parsed
    # per selector whose selections carry per-candidate scores (CALVER: the verifier totals): the mean AUROC of
    # its scores within a pool of mixed validity
    within_pool_auroc: dict[str, Interval] = field(default_factory=dict)


@dataclass
class MultiEvalResult(JsonRecord):
    """An evaluation over several pools: per-policy results, the pooled units (clustered by source
    problem across pools), the Table 2 rows and breakdowns over the pooled units."""

    policies: dict[str, EvalResult]
    pooled: EvalResult
    table: list[BreakdownRow]  # the Table 2 rows: one per policy (its ``stratum``), then "pooled"
    pools: dict[str, list[str]]  # policy -> pool directories
    union: bool
    problem_sets: dict[str, int]  # policy -> problems it covers; "shared": in every pool
    breakdowns: dict[str, Breakdown] = field(default_factory=dict)
    seconds: float | None = None


def load_results(data: Mapping[str, Any]) -> EvalResult | MultiEvalResult:
    """A ``results.json`` document as its typed result."""
    if "policies" in data and "pooled" in data:
        return MultiEvalResult.from_dict(data)
    return EvalResult.from_dict(data)


__all__ = ["Audits", "Breakdown", "BreakdownRow", "Calibration", "Decomposition", "EvalMeta", "EvalResult",
           "Fragmentation", "Interval", "KCurve", "Ladder", "LadderRung", "MultiEvalResult", "PerturbationAudit",
           "RenameAudit", "StrictAte", "TieAudit", "UnitRow", "from_json", "load_results", "to_json"]
