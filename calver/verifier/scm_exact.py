"""Exact rational arithmetic for binary SCMs: the ATE θ(P; X, Y) as a ``fractions.Fraction``.

**Number rule.** Every number a decision compares (CPT values, the threshold τ, the tolerance ε, a
trace's RESULT) is read as an exact decimal: text as the decimal it writes (``"0.35"`` is 7/20,
``"1e-3"`` is 1/1000), a float (a JSON number) as the decimal of its shortest round-trip ``repr``
(``0.1`` is 1/10, not the binary double nearest to it), an int as itself. A decimal of up to 15
significant digits thus reads the same whether it arrives as text or as a JSON number. Text that is
not a plain ASCII decimal numeral (``1_000``, non-ASCII digits) is read through its float. A numeral
with more than :data:`MAX_SIG_DIGITS` significant digits or a decimal exponent beyond
±:data:`MAX_EXPONENT` is refused (``ValueError``): exact arithmetic on it could take unbounded time.

**Method.** P(Y=1 | do(X=x)) is the truncated factorisation summed over An(Y) in G_X̄ (X's incoming
edges cut): every other variable is barren and sums out to 1, and X ∉ An(Y) gives θ = 0 without any
arithmetic. Each remaining CPT is scaled to integers by its own common denominator D_v, so the sum
is an integer polynomial, evaluated by variable elimination on Python ints (numpy object arrays, no
gcd per operation); one division at the end: θ = (g(1) − g(0)) / Π D_v, with g(x) the sum at Y=1
and X=x.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

MAX_SIG_DIGITS = 60  # a double's repr has at most 17
MAX_EXPONENT = 400  # a double's repr has |exponent| <= 324

_DECIMAL = re.compile(r"\s*([-+]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]{1,6}))?\s*")


def exact_decimal(text: str) -> Fraction:
    """The exact value of a decimal numeral (see the number rule); ``ValueError`` if it is none."""
    m = _DECIMAL.fullmatch(text)
    if m is None or not (m.group(2) or m.group(3)):
        return exact_decimal(repr(_finite_float(text)))
    sign, whole, frac, exp = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    e = (int(exp) if exp else 0) - len(frac)
    stripped = digits.rstrip("0")
    e += len(digits) - len(stripped)
    if len(stripped) > MAX_SIG_DIGITS:
        raise ValueError(f"{text.strip()[:40]!r} has more than {MAX_SIG_DIGITS} significant digits")
    if abs(e + len(stripped)) > MAX_EXPONENT:
        raise ValueError(f"{text.strip()[:40]!r} is out of range for exact arithmetic")
    mant = int(stripped) * (-1 if sign == "-" else 1)
    return Fraction(mant * 10**e) if e >= 0 else Fraction(mant, 10**-e)


def exact_number(value: Any) -> Fraction:
    """``value`` (text, int, float or Fraction) as an exact rational under the number rule."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, str):
        return exact_decimal(value)
    return exact_decimal(repr(_finite_float(value)))


def _finite_float(value: Any) -> float:
    """``float(value)``; ``ValueError`` unless it is a finite number."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"expected a number, got {str(value)[:40]!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {str(value)[:40]!r}")
    return x


def format_exact(f: Fraction) -> str:
    """``f`` for a reason: its exact decimal when short (``0.3``), else ``n/d``, else an approximation."""
    if f.denominator == 1:
        return str(f.numerator)
    d, twos, fives = f.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d == 1 and max(twos, fives) <= 30:  # a terminating decimal of at most 30 places
        k = max(twos, fives)
        n = abs(f.numerator) * (10**k // f.denominator)
        s = str(n).rjust(k + 1, "0")
        return ("-" if f < 0 else "") + (s[:-k] + "." + s[-k:]).rstrip("0").rstrip(".")
    if len(str(f.denominator)) <= 20:
        return f"{f.numerator}/{f.denominator}"
    return f"≈{float(f):.9g}"


def describe_exact(f: Fraction) -> str:
    """``exactly 3/10 = 0.3`` (or ``exactly 0``, ``exactly 1/3 ≈ 0.333333``) for a reason."""
    if f.denominator == 1:
        return f"exactly {f.numerator}"
    text = format_exact(f)
    if text.startswith("≈"):
        return f"≈{float(f):.9g} (exactly a rational with a {len(str(f.denominator))}-digit denominator)"
    frac = f"{f.numerator}/{f.denominator}"
    if text == frac:
        return f"exactly {frac} ≈ {float(f):.6g}"
    if len(str(f.denominator)) <= 20:
        return f"exactly {frac} = {text}"
    return f"exactly {text}"


def exact_p1(scm: Any, v: str) -> tuple[Fraction, ...]:
    """The exact CPT row of ``v``: each float's shortest-repr decimal, except where the source text
    wrote another decimal (``BinarySCM.p1_exact``)."""
    over = (getattr(scm, "p1_exact", None) or {}).get(v, {})
    return tuple(over[i] if i in over else exact_decimal(repr(float(p))) for i, p in enumerate(scm.p1[v]))


def _decimal_places(scm: Any, v: str) -> int | None:
    """The k ≤ 15 for which every entry of ``v``'s row is a/10^k with a an integer (its repr's
    decimal), or None (a longer decimal, or a source-text override): those go one by one."""
    if (getattr(scm, "p1_exact", None) or {}).get(v):
        return None
    p = np.asarray(scm.p1[v], dtype=float)
    for k in range(16):
        # a/10^k == p in floats (a correctly rounded division) makes a/10^k, a decimal of at most 15
        # significant digits, the shortest decimal that rounds to p: its repr
        if np.array_equal(np.round(p * 10.0**k) / 10.0**k, p):
            return k
    return None


def _scaled_row(scm: Any, v: str) -> tuple[list[int], int]:
    """``v``'s exact CPT row as integers over one denominator D: (numerators, D)."""
    k = _decimal_places(scm, v)
    if k is not None:
        a = np.round(np.asarray(scm.p1[v], dtype=float) * 10.0**k)
        return [int(t) for t in a.tolist()], 10**k
    vals = exact_p1(scm, v)
    d = math.lcm(*(f.denominator for f in vals))
    return [f.numerator * (d // f.denominator) for f in vals], d


def mutilated_ancestors(scm: Any, x: str, y: str) -> set[str]:
    """An(Y) ∪ {Y} in G_X̄: the only variables P(Y | do(X)) depends on."""
    seen, stack = {y}, [y]
    while stack:
        v = stack.pop()
        if v == x:
            continue  # do(X) cuts X's incoming edges
        for p in scm.parents[v]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def _check(scm: Any, x: str, y: str) -> None:
    for n in (x, y):
        if n not in scm.parents:
            raise ValueError(f"unknown variable {n!r}; SCM variables are {', '.join(scm.nodes)}")
    if x == y:
        raise ValueError("treatment and outcome must differ")


def _scopes(scm: Any, x: str, y: str) -> dict[str, tuple[str, ...]] | None:
    """Each summed CPT's scope (Y's sliced at Y=1; X's dropped), None when θ = 0 structurally."""
    keep = mutilated_ancestors(scm, x, y)
    if x not in keep:
        return None
    return {v: tuple(scm.parents[v]) + (() if v == y else (v,)) for v in scm.nodes if v in keep and v != x}


def exact_cost(scm: Any, x: str, y: str) -> int:
    """An estimate of :func:`exact_ate`'s cost, in units of about 30 ns: the entries its products and
    sums touch, weighted by the size of its integers, plus the CPT entries converted one by one."""
    _check(scm, x, y)
    scopes = _scopes(scm, x, y)
    if scopes is None:
        return 0
    bits, slow = 0, 0
    for v in scopes:
        k = _decimal_places(scm, v)
        bits += 57 if k is None else int(3.33 * k) + 1
        slow += 0 if k is not None else 2 ** len(scm.parents[v])
    work = _plan(list(scopes.values()), x)[1]
    return work * (1 + bits // 250) + 150 * slow


def exact_ate(scm: Any, x: str, y: str) -> Fraction:
    """θ(P; X, Y) = P(Y=1 | do(X=1)) − P(Y=1 | do(X=0)), exactly (see the module docstring)."""
    _check(scm, x, y)
    scopes = _scopes(scm, x, y)
    if scopes is None:
        return Fraction(0)
    factors: list[tuple[tuple[str, ...], np.ndarray]] = []
    denom = 1
    for v, scope in scopes.items():
        ones, d = _scaled_row(scm, v)
        k = len(scm.parents[v])
        if v == y:  # only Y=1 is summed
            table = np.array(ones, dtype=object).reshape((2,) * k)
        else:
            flat = np.empty(2 * len(ones), dtype=object)
            flat[0::2] = [d - a for a in ones]
            flat[1::2] = ones
            table = flat.reshape((2,) * (k + 1))
        factors.append((scope, table))
        denom *= d
    scope, table = _eliminate(factors, _plan(list(scopes.values()), x)[0])
    if scope != (x,):  # unreachable: X ∈ An(Y) has a child in An(Y)
        raise ValueError(f"internal: elimination left scope {scope}")
    return Fraction(int(table[1]) - int(table[0]), denom)


def _plan(scopes: list[tuple[str, ...]], free: str) -> tuple[list[str], int]:
    """A greedy min-size elimination order of every variable but ``free``, and its work (the
    entries the products and sums touch)."""
    live = [set(s) for s in scopes]
    todo = sorted(set().union(*live) - {free})
    order, work = [], 0
    while todo:
        best = min(todo, key=lambda v: (len(set().union(*(s for s in live if v in s))), v))
        touching = [s for s in live if best in s]
        union = set().union(*touching)
        work += (len(touching) + 1) * 2 ** len(union)
        live = [s for s in live if best not in s] + [union - {best}]
        order.append(best)
        todo.remove(best)
    return order, work + len(live) * 2 ** len(set().union(*live))


def _multiply(factors: list[tuple[tuple[str, ...], np.ndarray]]) -> tuple[tuple[str, ...], np.ndarray]:
    scope: list[str] = []
    for s, _t in factors:
        scope.extend(v for v in s if v not in scope)
    pos = {v: i for i, v in enumerate(scope)}
    out: Any = None
    for s, t in factors:
        order = sorted(range(len(s)), key=lambda i: pos[s[i]])
        shape = [1] * len(scope)
        for v in s:
            shape[pos[v]] = 2
        t = np.transpose(t, order).reshape(shape) if s else t
        out = t if out is None else out * t
    return tuple(scope), np.asarray(out, dtype=object)


def _eliminate(factors: list[tuple[tuple[str, ...], np.ndarray]],
               order: list[str]) -> tuple[tuple[str, ...], np.ndarray]:
    """Sum the variables of ``order`` out of the product of ``factors``, in that order."""
    for v in order:
        touching = [f for f in factors if v in f[0]]
        factors = [f for f in factors if v not in f[0]]
        scope, table = _multiply(touching)
        i = scope.index(v)
        factors.append((scope[:i] + scope[i + 1:], np.asarray(table.sum(axis=i), dtype=object)))
    return _multiply(factors)


def margin_side(numeral: str, tau: Fraction, eps: Fraction, tau_f: float, eps_f: float) -> tuple[bool, bool]:
    """(|v − τ| > ε, v > τ) for the decimal ``numeral`` v, exactly (τ, ε exact; ``tau_f``, ``eps_f``
    their floats). Floats decide a short numeral where both comparisons are clear of 1e-9 (relative),
    far beyond their rounding; else the exact decimals do (``ValueError`` past the number limits)."""
    r = float(numeral)
    gap, tol = abs(r - tau_f), 1e-9 * max(1.0, abs(r), abs(tau_f), eps_f)
    if len(numeral) <= 40 and abs(gap - eps_f) > tol and gap > tol:
        return gap > eps_f, r > tau_f
    v = exact_decimal(numeral)
    return abs(v - tau) > eps, v > tau


# ---- the decision θ > τ ---------------------------------------------------------------------------
MAX_EXACT_COST = 8_000_000  # about 0.2-0.3 s (25-35 ns a unit): above it the float estimate decides where it can
# |θ̂ − θ| for the float truncated factorisation of at most 20 binary variables is below ~1e-13 (each
# factor is off by at most 2u absolutely, products and the pairwise sum add ~(n + log2 2^n)u): a
# float estimate farther than this from τ decides θ > τ exactly.
FLOAT_MARGIN = 1e-9


@dataclass(frozen=True)
class AteDecision:
    """θ > τ, decided exactly: ``theta`` is the exact θ, or None where the float estimate, farther
    than :data:`FLOAT_MARGIN` from τ, decided (``estimate`` is float(θ) or that estimate)."""

    exceeds: bool
    theta: Fraction | None
    estimate: float

    def describe(self) -> str:
        """``exactly 3/10 = 0.3``, or ``0.213457 (within 1e-09 of the exact value)``."""
        if self.theta is not None:
            return describe_exact(self.theta)
        return f"{self.estimate:.6g} (within {FLOAT_MARGIN:g} of the exact value)"
