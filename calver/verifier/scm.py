"""Binary structural causal models (a DAG plus conditional probability tables): SCM math only.

Every variable is binary (0/1). A CPT stores ``p1[i] = P(V=1 | parents = config i)`` where config
``i`` reads the parents' values as a binary number, the *first* listed parent being the most
significant bit: for parents ``(A, B)``, ``p1 = [P(V=1|A=0,B=0), P(V=1|A=0,B=1), P(V=1|A=1,B=0),
P(V=1|A=1,B=1)]``.

CPT text (what prompts show and what ``data.cpts`` may hold), one entry per line::

    P(Z=1) = 0.40
    P(X=1 | Z=0) = 0.30
    P(Y=1 | X=0, Z=1) = 0.35

Three independent computations live here, so that tests can cross-check them:

- :func:`do_probability` / :func:`true_ate`: the truncated factorization (X's CPT replaced by the
  point mass at ``x``), summed over the full joint — the causal quantity θ(P; X, Y).
- :func:`adjustment_functional`: ψ(P; X, Y, Z) = Σ_z [P(Y=1|X=1,z) − P(Y=1|X=0,z)] P(z), computed
  only from the observational joint's marginal over (X, Y, Z). It refuses X ∈ Z and Y ∈ Z
  (the arms would collapse: a dict-update implementation silently returns 0 there).
- tests add a third, brute force enumeration in pure Python.

The exact θ, in rationals, is :func:`calver.verifier.scm_exact.exact_ate`. CPT text keeps the exact
decimal it writes (``BinarySCM.p1_exact``, only where it differs from the float's shortest repr).
:func:`cached_joint` keeps observational joints (within the shared memo budget), so ψ for a new Z only
marginalises.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import product
from typing import Any, Iterable, Mapping

import numpy as np

from calver.verifier.budget import TooLargeToGrade
from calver.verifier.graph import CausalGraph, GraphClass
from calver.verifier.memo import Memo
from calver.verifier.scm_exact import FLOAT_MARGIN, MAX_EXACT_COST, AteDecision, exact_ate, exact_cost, exact_decimal

MAX_SCM_NODES = 20  # the joint has 2^n entries

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_CPT_LINE = re.compile(
    r"^\s*P\s*\(\s*(?P<v>" + _NAME + r")\s*=\s*1\s*(?:\|(?P<cond>[^)]*))?\)\s*=\s*(?P<p>[-+0-9.eE]+)\s*$"
)
_COND = re.compile(r"^\s*(" + _NAME + r")\s*=\s*([01])\s*$")


@dataclass(frozen=True, eq=False)
class BinarySCM:
    """A DAG over binary variables with one CPT per node (``nodes`` in topological order)."""

    nodes: tuple[str, ...]
    parents: dict[str, tuple[str, ...]]
    p1: dict[str, np.ndarray]  # node -> array of length 2**len(parents)
    # node -> {config: exact value} where the source text's decimal differs from Fraction(repr(p1)):
    # numerals of more than 15 significant digits (see calver.verifier.scm_exact's number rule)
    p1_exact: dict[str, dict[int, Fraction]] = field(default_factory=dict)

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def build(cls, parents: Mapping[str, Iterable[str]], p1: Mapping[str, Iterable[float]],
              p1_exact: Mapping[str, Mapping[int, Fraction]] | None = None) -> "BinarySCM":
        pa = {str(v): tuple(str(p) for p in ps) for v, ps in parents.items()}
        for v, ps in pa.items():
            for p in ps:
                if p not in pa:
                    raise ValueError(f"CPT of {v} conditions on {p}, which has no CPT of its own")
            if len(set(ps)) != len(ps):
                raise ValueError(f"CPT of {v} lists a parent twice")
        if len(pa) > MAX_SCM_NODES:
            raise ValueError(f"an SCM may have at most {MAX_SCM_NODES} variables, got {len(pa)}")
        tables: dict[str, np.ndarray] = {}
        for v, ps in pa.items():
            if v not in p1:
                raise ValueError(f"no CPT for {v}")
            arr = np.asarray(list(p1[v]), dtype=float)
            if arr.shape != (2 ** len(ps),):
                raise ValueError(f"CPT of {v} needs {2 ** len(ps)} entries (one per parent configuration), "
                                 f"got {arr.size}")
            if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
                raise ValueError(f"CPT of {v} holds a value outside [0, 1]")
            tables[v] = arr
        order = _topological(pa)
        exact = {str(v): dict(d) for v, d in (p1_exact or {}).items() if d}
        return cls(tuple(order), pa, tables, exact)

    @classmethod
    def from_data(cls, cpts: Any) -> "BinarySCM":
        """From ``data.cpts``: CPT text (a string or a list of lines), or a mapping
        ``{node: {"parents": [...], "p1": [...]}}``."""
        if isinstance(cpts, str):
            return parse_cpt_text(cpts)
        if isinstance(cpts, (list, tuple)):
            return parse_cpt_text("\n".join(str(x) for x in cpts))
        if isinstance(cpts, Mapping):
            parents, p1 = {}, {}
            for v, spec in cpts.items():
                if not isinstance(spec, Mapping) or "p1" not in spec:
                    raise ValueError(f"cpts[{v!r}] must be an object with 'parents' and 'p1'")
                # JSON shapes checked here so a malformed problem is a ValueError, never a TypeError
                ps, probs = spec.get("parents") or [], spec["p1"]
                if not isinstance(ps, (list, tuple)) or not all(isinstance(x, str) for x in ps):
                    raise ValueError(f"cpts[{v!r}]['parents'] must be a list of variable names")
                if not isinstance(probs, (list, tuple)) or not all(
                        isinstance(x, (int, float)) and not isinstance(x, bool) for x in probs):
                    raise ValueError(f"cpts[{v!r}]['p1'] must be a list of probabilities")
                parents[v], p1[v] = list(ps), list(probs)
            return cls.build(parents, p1)
        raise ValueError(f"cpts must be CPT text, a list of CPT lines or a mapping, got {type(cpts).__name__}")

    def to_lines(self, digits: int = 4) -> list[str]:
        """The CPT text, one line per entry (``render_cpts`` joins them)."""
        out = []
        for v in self.nodes:
            ps = self.parents[v]
            for i, val in enumerate(self.p1[v]):
                cond = ", ".join(f"{p}={b}" for p, b in zip(ps, _config_bits(i, len(ps))))
                out.append(f"P({v}=1{' | ' + cond if cond else ''}) = {_fmt_prob(val, digits)}")
        return out

    def graph(self) -> CausalGraph:
        return CausalGraph.build(self.nodes, [(p, v) for v in self.nodes for p in self.parents[v]], (), GraphClass.DAG)

    def check_graph(self, g: CausalGraph) -> str | None:
        """None if ``g``'s parent sets are exactly the CPTs' conditioning sets, else why not."""
        if set(g.nodes) != set(self.nodes):
            miss = sorted(set(self.nodes) - set(g.nodes))
            extra = sorted(set(g.nodes) - set(self.nodes))
            parts = ([f"missing {', '.join(miss)}"] if miss else []) + ([f"extra {', '.join(extra)}"] if extra else [])
            return "graph variables differ from the CPT variables: " + "; ".join(parts)
        if g.bidirected:
            return "a binary SCM's graph has no bidirected edges"
        for v in self.nodes:
            if set(g.parents(v)) != set(self.parents[v]):
                return (f"parents of {v} in the graph ({', '.join(sorted(g.parents(v))) or 'none'}) "
                        "differ from its CPT's "
                        f"conditioning set ({', '.join(sorted(self.parents[v])) or 'none'})")
        return None

    # ---- the joint -------------------------------------------------------------------------
    def factor(self, v: str) -> np.ndarray:
        """P(v | parents) as an array with axes (parents..., v)."""
        ps = self.parents[v]
        p = self.p1[v].reshape((2,) * len(ps))
        return np.stack([1.0 - p, p], axis=-1)

    def joint(self, replace: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """The joint distribution, axis ``i`` = ``self.nodes[i]``; ``replace`` swaps factors."""
        n = len(self.nodes)
        idx = {v: i for i, v in enumerate(self.nodes)}
        out = np.ones((2,) * n)
        for v in self.nodes:
            f = replace[v] if replace and v in replace else self.factor(v)
            axes = [idx[p] for p in self.parents[v]] + [idx[v]]
            perm = np.argsort(axes)
            shape = [1] * n
            for a in axes:
                shape[a] = 2
            out = out * np.transpose(f, perm).reshape(shape)
        return out


# Observational joints, charged to the verifier's one memo budget (a 20-variable joint is 8 MB, and
# every new adjustment set Z of a problem marginalises the same one).
_JOINTS = Memo("scm joint")


def cached_joint(scm: BinarySCM) -> np.ndarray:
    """``scm.joint()``, read-only, memoized per SCM within the shared memo budget."""
    hit = _JOINTS.get(id(scm))
    if hit is not None and hit[0] is scm:
        return hit[1]
    joint = scm.joint()
    joint.setflags(write=False)
    return _JOINTS.put(id(scm), (scm, joint), 1024 + joint.nbytes)[1]


def _config_bits(i: int, k: int) -> tuple[int, ...]:
    return tuple((i >> (k - 1 - j)) & 1 for j in range(k))


def _fmt_prob(x: float, digits: int) -> str:
    return f"{float(x):.{digits}f}".rstrip("0").rstrip(".") or "0"


def _topological(parents: Mapping[str, tuple[str, ...]]) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}
    for root in parents:  # iterative DFS keeps the given order among independent nodes
        if root in state:
            continue
        stack = [(root, iter(parents[root]))]
        state[root] = 1
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[v] = 2
                order.append(v)
            elif state.get(nxt) == 1:
                raise ValueError(f"the CPTs' parent sets form a cycle through {nxt}")
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(parents[nxt])))
    return order


# ---- CPT text ---------------------------------------------------------------------------------
def parse_cpt_text(text: str) -> BinarySCM:
    """Parse CPT lines ``P(V=1 | A=0, B=1) = 0.35`` (blank lines and ``#`` comments ignored).

    Each node's lines must use one parent order and cover every configuration exactly once.
    Raises ``ValueError`` naming the offending line.
    """
    parents: dict[str, tuple[str, ...]] = {}
    entries: dict[str, dict[int, float]] = {}
    exact: dict[str, dict[int, Fraction]] = {}
    for ln, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip().rstrip(",;")
        if not line:
            continue
        m = _CPT_LINE.match(line)
        if not m:
            raise ValueError(f"CPT line {ln} is not of the form P(V=1 | A=0, B=1) = 0.35: {raw.strip()[:80]!r}")
        v = m.group("v")
        cond = m.group("cond")
        names, vals = [], []
        if cond is not None and cond.strip():
            for part in cond.split(","):
                cm = _COND.match(part)
                if not cm:
                    raise ValueError(f"CPT line {ln}: bad condition {part.strip()!r} (expected NAME=0 or NAME=1)")
                names.append(cm.group(1))
                vals.append(int(cm.group(2)))
        try:
            p = float(m.group("p"))
        except ValueError:
            raise ValueError(f"CPT line {ln}: {m.group('p')!r} is not a number") from None
        if not (0.0 <= p <= 1.0) or math.isnan(p):
            raise ValueError(f"CPT line {ln}: probability {p} is outside [0, 1]")
        numeral = m.group("p")
        override = None
        if len(numeral) > 16 or "e" in numeral or "E" in numeral:
            # a shorter numeral has at most 15 significant digits and is a normal float: its repr
            # is the same decimal, so only longer ones (or exponents) may need their own value
            try:
                q = exact_decimal(numeral)
            except ValueError as e:
                raise ValueError(f"CPT line {ln}: {e}") from None
            if not 0 <= q <= 1:
                raise ValueError(f"CPT line {ln}: probability {numeral} is outside [0, 1]")
            if q != exact_decimal(repr(p)):
                override = q
        ps = tuple(names)
        if v in parents and parents[v] != ps:
            raise ValueError(f"CPT line {ln}: {v} is conditioned on ({', '.join(ps)}), "
                             f"earlier on ({', '.join(parents[v])})")
        parents[v] = ps
        i = sum(b << (len(vals) - 1 - j) for j, b in enumerate(vals))
        if i in entries.setdefault(v, {}):
            raise ValueError(f"CPT line {ln}: duplicate entry for {v} at this parent configuration")
        entries[v][i] = p
        if override is not None:
            exact.setdefault(v, {})[i] = override
    if not parents:
        raise ValueError("no CPT lines found")
    p1 = {}
    for v, ps in parents.items():
        got = entries[v]
        if len(got) != 2 ** len(ps):
            raise ValueError(f"CPT of {v} has {len(got)} of {2 ** len(ps)} parent configurations")
        p1[v] = [got[i] for i in range(2 ** len(ps))]
    return BinarySCM.build(parents, p1, exact)


def render_cpts(scm: BinarySCM, digits: int = 4) -> str:
    return "\n".join(scm.to_lines(digits))


# ---- causal and statistical functionals -------------------------------------------------------
def _check_names(scm: BinarySCM, *names: str) -> None:
    for n in names:
        if n not in scm.parents:
            raise ValueError(f"unknown variable {n!r}; SCM variables are {', '.join(scm.nodes)}")


def do_probability(scm: BinarySCM, y: str, x: str, x_value: int) -> float:
    """P(Y=1 | do(X=x)) by the truncated factorization over the full joint."""
    _check_names(scm, x, y)
    if x == y:
        raise ValueError("treatment and outcome must differ")
    k = len(scm.parents[x])
    point = np.zeros((2,) * k + (2,))
    point[..., int(x_value)] = 1.0
    joint = scm.joint({x: point})
    iy = scm.nodes.index(y)
    return float(np.take(joint, 1, axis=iy).sum())


def true_ate(scm: BinarySCM, x: str, y: str) -> float:
    """θ(P; X, Y) = P(Y=1 | do(X=1)) − P(Y=1 | do(X=0))."""
    return do_probability(scm, y, x, 1) - do_probability(scm, y, x, 0)


def adjustment_arms(scm_or_joint: Any, x: str, y: str, zs: Iterable[str],
                    nodes: tuple[str, ...] | None = None) -> tuple[float, float]:
    """(Σ_z P(Y=1|X=1,z)P(z), Σ_z P(Y=1|X=0,z)P(z)) from the observational joint only.

    Raises ``ValueError`` naming the guard when X ∈ Z, Y ∈ Z, a name is unknown, or positivity
    fails (P(X=x, Z=z) = 0 where P(Z=z) > 0).
    """
    if isinstance(scm_or_joint, BinarySCM):
        joint, nodes = cached_joint(scm_or_joint), scm_or_joint.nodes
    else:
        joint = np.asarray(scm_or_joint)
        if nodes is None:
            raise ValueError("a raw joint needs its node order")
    zs = list(dict.fromkeys(zs))  # de-duplicate, keep order
    pos = {v: i for i, v in enumerate(nodes)}
    for n in [x, y, *zs]:
        if n not in pos:
            raise ValueError(f"unknown variable {n!r}; SCM variables are {', '.join(nodes)}")
    if x == y:
        raise ValueError("treatment and outcome must differ")
    if x in zs:
        raise ValueError(f"X in Z: the adjustment set contains the treatment {x}")
    if y in zs:
        raise ValueError(f"Y in Z: the adjustment set contains the outcome {y}")
    keep = [pos[x], pos[y]] + [pos[z] for z in zs]
    drop = tuple(i for i in range(len(nodes)) if i not in keep)
    m = joint.sum(axis=drop) if drop else joint
    # m's axes are the kept axes in increasing index order; bring them to (X, Y, Z...).
    order = sorted(keep)
    m = np.transpose(m, [order.index(a) for a in keep])
    pxz = m.sum(axis=1)  # (x, z...)
    pz = pxz.sum(axis=0)  # (z...)
    if np.any((pxz <= 0) & (pz > 0)):
        raise ValueError("positivity fails: P(X=x, Z=z) = 0 for some z with P(Z=z) > 0")
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(pxz > 0, m[:, 1] / np.where(pxz > 0, pxz, 1.0), 0.0)  # P(Y=1 | X=x, z)
    return float((cond[1] * pz).sum()), float((cond[0] * pz).sum())


def adjustment_functional(scm_or_joint: Any, x: str, y: str, zs: Iterable[str],
                          nodes: tuple[str, ...] | None = None) -> float:
    """ψ(P; X, Y, Z) = Σ_z [P(Y=1|X=1,z) − P(Y=1|X=0,z)] P(z) (see :func:`adjustment_arms`)."""
    a1, a0 = adjustment_arms(scm_or_joint, x, y, zs, nodes)
    return a1 - a0


def is_positive(scm: BinarySCM) -> bool:
    return bool(np.all(cached_joint(scm) > 0))


def brute_force_joint(scm: BinarySCM) -> dict[tuple[int, ...], float]:
    """The joint by explicit enumeration in pure Python (a test oracle; slow for large n)."""
    out = {}
    idx = {v: i for i, v in enumerate(scm.nodes)}
    for vals in product((0, 1), repeat=len(scm.nodes)):
        p = 1.0
        for v in scm.nodes:
            ps = scm.parents[v]
            i = 0
            for q in ps:
                i = (i << 1) | vals[idx[q]]
            p1 = float(scm.p1[v][i])
            p *= p1 if vals[idx[v]] else 1.0 - p1
        out[vals] = p
    return out


def decide_ate(scm: Any, x: str, y: str, tau: Fraction, max_cost: int = MAX_EXACT_COST) -> AteDecision:
    """Whether θ(P; X, Y) > τ, exactly: by :func:`exact_ate` when it costs at most ``max_cost``;
    else by the float θ̂ when |θ̂ − τ| exceeds :data:`FLOAT_MARGIN` (plus τ's own rounding). Inside
    that margin on such an SCM (only a constructed near-tie on a large, dense one gets there) it
    fails closed: :class:`~calver.verifier.budget.TooLargeToGrade`, never a guess, never a stall."""
    cost = exact_cost(scm, x, y)
    if cost > max_cost:
        est, t = true_ate(scm, x, y), float(tau)
        if abs(est - t) > FLOAT_MARGIN + 4e-16 * abs(t):
            return AteDecision(est > t, None, est)
        raise TooLargeToGrade(f"the effect {est:.6g} is within {FLOAT_MARGIN:g} of the threshold and its exact "
                              f"value would cost {cost:,} work units (limit {max_cost:,})")
    theta = exact_ate(scm, x, y)
    return AteDecision(theta > tau, theta, float(theta))
