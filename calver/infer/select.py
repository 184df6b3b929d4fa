"""Run selectors over a pool behind the firewall and store their decisions.

``run_selection(pool, names, k)`` builds label-free views (``firewall.make_views``), re-checks each
view (``firewall.check_view``), runs every selector, validates that it returned only an index in
range, one score per candidate and (for index -1 only) an answer, and writes
``selections/<name>.jsonl`` (``<name>@<k>`` for a K-prefix) plus ``<name>.meta.json`` holding the
view hash. The verifier's per-candidate scores come from the pool's score table
(:func:`calver.infer.score_table.score_table`, written here), primed into every view, so no selector
scores a candidate. Nothing here reads a label: correctness is reattached afterwards, outside
``calver.infer`` (:mod:`calver.evaluation.grading`, which also holds the label-reading best/worst tie audit).
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

from calver.infer.firewall import SelectorView, check_view, make_views, view_hash
from calver.infer.pool import Pool
from calver.infer.score_table import ScoreTable, score_table
from calver.infer.selectors import Selection, Selector, SelectorError, build_selector


def selection_name(name: str, k: int | None) -> str:
    return name if k is None else f"{name}@{k}"


def run_selector(selector: Selector, views: Sequence[SelectorView]) -> list[Selection]:
    """Firewall-check every view, run ``selector``, and validate its output."""
    for v in views:
        check_view(v)
    out = selector.select_many(list(views))
    if len(out) != len(views):
        raise SelectorError(f"selector {selector.name!r} returned {len(out)} selections for {len(views)} units")
    for v, s in zip(views, out):
        if not isinstance(s, Selection):
            raise SelectorError(f"selector {selector.name!r} returned {type(s).__name__}, not Selection")
        if not (-1 <= s.index < v.k) or (s.index == -1 and selector.name != "extract_solve"):
            raise SelectorError(f"selector {selector.name!r}: index {s.index} out of range for K={v.k}")
        if len(s.scores) != v.k:
            raise SelectorError(f"selector {selector.name!r}: {len(s.scores)} scores for K={v.k}")
        if s.answer is not None and s.index != -1:
            raise SelectorError(f"selector {selector.name!r}: an answer may accompany only index -1")
    return out


def _needs_stored(sel: Selector) -> bool:
    return sel.neural and not sel.has_model()  # type: ignore[attr-defined]


def run_selection(
    pool: Pool,
    selectors: Iterable[str | Selector],
    k: int | None = None,
    *,
    write: bool = True,
    log=lambda m: None,
    table: ScoreTable | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Select with each selector on the (K-prefix ``k``) views of ``pool``; returns rows per name.

    When a non-neural selector runs, the views are primed from ``table`` (default: the pool's score
    table, built and, with ``write``, stored when missing or stale)."""
    sels = [build_selector(s) if isinstance(s, str) else s for s in selectors]
    stored = sorted({s.name for s in sels if _needs_stored(s)})
    have = set(pool.selection_names())
    missing = [n for n in stored if n not in have]
    if missing:
        raise SelectorError(f"no model given and no stored scores for {', '.join(missing)} in {pool.root}")
    pool_k = pool.k()
    if k is not None and pool_k is not None and k > pool_k:
        raise SelectorError(f"--k {k} exceeds the pool's K={pool_k}")
    views = make_views(pool, k, comparators=stored)
    if any(not s.neural for s in sels):
        views = (table if table is not None else score_table(pool, write=write, log=log)).with_verdicts(views)
    vh = view_hash(views)
    out: dict[str, list[dict[str, Any]]] = {}
    for sel in sels:
        t0 = time.perf_counter()
        res = run_selector(sel, views)
        rows = [s.to_row(v) for v, s in zip(views, res)]
        name = selection_name(sel.name, k)
        if write:
            pool.write_selection(name, rows)
            pool.write_selection_meta(name, {
                "selector": sel.name, "k": k if k is not None else pool_k, "units": len(rows), "view_hash": vh,
                "from_stored_scores": sel.name in stored, "seconds": round(time.perf_counter() - t0, 4),
            })
        out[name] = rows
        log(f"{name}: {len(rows)} unit(s) in {time.perf_counter() - t0:.2f}s")
    return out


__all__ = ["run_selection", "run_selector", "selection_name"]
