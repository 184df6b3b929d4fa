"""Value parsing shared by QUERY binding, derivation arguments and RESULT verdicts, plus the
graph-difference sentence b1 reports. Pure functions: no registry, no families."""

from __future__ import annotations

import math
from typing import Any

from calver.verifier.graph import CausalGraph
from calver.verifier.memo import memoized, text_cost


@memoized("node set", lambda text: text_cost(text, 16))
def cached_node_set(text: str) -> frozenset[str]:
    """Memoized ``parse_node_set``: a pool's candidates repeat the same few sets."""
    from calver.verifier.parsers import parse_node_set

    return parse_node_set(text)


@memoized("path", lambda text: text_cost(text, 16))
def cached_path(text: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Memoized ``parse_path``: (nodes, edge types or None)."""
    from calver.verifier.parsers import parse_path

    nodes, types = parse_path(text)
    return tuple(nodes), (tuple(types) if types else None)


def normalize_value(kind: str, value: Any) -> Any:
    """Normalize a query/derivation value of type ``kind``; raises ValueError (never TypeError) on a
    value of the wrong shape, so a malformed problem surfaces as a ProblemError naming its field."""
    from calver.verifier.parsers import parse_node_list

    if kind == "node":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"expected a node name, got {_short(value)}")
        v = value.strip()
        if len(v) >= 2 and v[0] + v[-1] in ('""', "''", "“”", "``"):  # one layer: the quotes a renderer adds
            v = v[1:-1]
        return v
    if kind == "set":
        if isinstance(value, str):
            return cached_node_set(value)
        return frozenset(_names(value, "a set of node names"))
    if kind in ("path", "list"):
        if isinstance(value, str):
            return tuple(parse_node_list(value))
        return tuple(_names(value, "a list of node names"))
    if kind == "typed_path":
        from calver.verifier.parsers import parse_path

        if isinstance(value, str):
            nodes, types = parse_path(value)
        elif isinstance(value, dict):
            if "nodes" not in value:
                raise ValueError("expected a path object with 'nodes'")
            nodes, types = value["nodes"], value.get("types")
        else:
            nodes, types = value, None
        nodes = _names(nodes, "a path (a list of node names)")
        if types and (not isinstance(types, (list, tuple)) or not all(isinstance(t, str) for t in types)):
            raise ValueError(f"expected edge types as a list of strings, got {_short(types)}")
        return (tuple(nodes), tuple(types) if types else None)
    if kind == "number":
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"expected a number, got {_short(value)}") from None
        if not math.isfinite(x):
            raise ValueError(f"expected a finite number, got {_short(value)}")
        return x
    if kind == "word":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(f"expected a word, got {_short(value)}")
        return str(value).strip().strip("'\"`").lower()
    if kind == "bool":
        return parse_bool(value)
    raise ValueError(f"unknown query value type {kind!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _names(value: Any, what: str) -> list[str]:
    """Node names of a JSON list (str or int members); ValueError for anything else."""
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ValueError(f"expected {what}, got {_short(value)}")
    bad = [v for v in value if not isinstance(v, (str, int)) or isinstance(v, bool)]
    if bad:
        raise ValueError(f"expected {what}, but it holds {_short(bad[0])}")
    return [str(v) for v in value]


def values_equal(kind: str, a: Any, b: Any) -> bool:
    if kind == "number":
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


_TRUE = {"true", "yes", "valid", "holds", "reachable", "1", "y", "t", "satisfied", "consistent", "blocked", "separated"}
_FALSE = {"false", "no", "invalid", "fails", "unreachable", "0", "n", "f", "unsatisfied", "inconsistent", "open",
          "connected", "not valid"}


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().strip("'\"`*.").lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected a yes/no (true/false, valid/invalid) value, got {str(value)[:40]!r}")


def graph_diff(got: CausalGraph, want: CausalGraph, what: str = "the supplied graph", nodes: bool = True) -> str:
    """The b1 reason: how ``got`` differs from ``want`` (first few missing/extra nodes and edges)."""
    parts = []
    miss_n = sorted(set(want.nodes) - set(got.nodes)) if nodes else []
    extra_n = sorted(set(got.nodes) - set(want.nodes)) if nodes else []
    if miss_n:
        parts.append(f"missing node(s) {', '.join(miss_n[:4])}")
    if extra_n:
        parts.append(f"extra node(s) {', '.join(extra_n[:4])}")
    md = sorted(want.directed - got.directed)
    ed = sorted(got.directed - want.directed)
    mb = sorted(want.bidirected - got.bidirected)
    eb = sorted(got.bidirected - want.bidirected)
    if md:
        parts.append("missing edge(s) " + ", ".join(f"{a}->{b}" for a, b in md[:4]))
    if ed:
        parts.append("extra edge(s) " + ", ".join(f"{a}->{b}" for a, b in ed[:4]))
    if mb:
        parts.append("missing edge(s) " + ", ".join(f"{a}<->{b}" for a, b in mb[:4]))
    if eb:
        parts.append("extra edge(s) " + ", ".join(f"{a}<->{b}" for a, b in eb[:4]))
    return f"GRAPH differs from {what}: " + "; ".join(parts)




def format_value(kind: str, value: Any) -> str:
    """A normalized value of type ``kind`` as a QUERY / DERIVATION argument (inverse of
    :func:`normalize_value` up to whitespace)."""
    from calver.verifier.contract import format_path, format_set

    if kind == "set":
        return format_set(value)
    if kind in ("path", "list"):
        return format_path(list(value))
    if kind == "typed_path":
        nodes, types = value
        return format_path(list(nodes), list(types) if types else None)
    if kind == "number":
        return f"{value:g}"
    if kind == "node":
        from calver.verifier.formats.objects import render_set_name

        return render_set_name(value)
    return str(value)
