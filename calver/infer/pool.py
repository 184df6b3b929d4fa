"""Frozen candidate pools: the on-disk layout every sampler, selector and evaluator shares.

    POOL_DIR/
      manifest.json              model/adapter hashes, sampling params, seeds, corpus hash, versions
      problems.jsonl             one row per problem: {"problem": Problem.to_dict(), "labels": {...}}
      candidates.jsonl           one row per candidate, appended while sampling (resumable)
      candidates.parquet         written by freeze(), same rows (HF ``datasets`` loads it)
      FROZEN                     marker: the pool is read-only from here on
      selections/<name>.jsonl    one row per unit: {"problem_id", "seed", "index", "scores"[, "answer"]}
      selections/<name>.meta.json  the selection's provenance: firewall view hash, K, selector

A *unit* is one (problem_id, seed) pair: the K candidates sampled for one problem under one seed.
Candidate rows hold: problem_id, source_id (the clustering key), seed, candidate_index, text,
finish_reason, num_tokens, mean_logprob. Labels (validity class, source graph in constructed mode,
reference answers) live only in ``problems.jsonl``'s "labels" and never reach a selector (see
``calver.infer.firewall``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from calver.verifier.problem import Problem

CANDIDATE_FIELDS = (
    "problem_id",
    "source_id",
    "seed",
    "candidate_index",
    "text",
    "finish_reason",
    "num_tokens",
    "mean_logprob",
)


class PoolError(RuntimeError):
    """A pool is missing, malformed, or frozen when a write was attempted."""


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (killed writer) is skipped, any other bad line raises."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1 and not line.endswith("\n"):
                return  # interrupted append: the row was never committed
            raise PoolError(f"{path}:{i + 1}: bad JSON row: {e}") from None


def append_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows and fsync, so a kill -9 loses at most the row being written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _truncate_torn_tail(path: Path) -> None:
    """Drop a partial last line left by an interrupted writer before appending again."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


@dataclass
class Unit:
    """One (problem, seed) pool: its K candidates in sampling order."""

    problem_id: str
    source_id: str
    seed: int
    texts: list[str]
    rows: list[dict[str, Any]]


class Pool:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    # ---- paths ------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def problems_path(self) -> Path:
        return self.root / "problems.jsonl"

    @property
    def candidates_path(self) -> Path:
        return self.root / "candidates.jsonl"

    @property
    def frozen(self) -> bool:
        return (self.root / "FROZEN").exists()

    def _writable(self) -> None:
        if self.frozen:
            raise PoolError(f"pool {self.root} is frozen (read-only)")

    # ---- writing ----------------------------------------------------------------------------
    def write_manifest(self, manifest: dict[str, Any]) -> None:
        self._writable()
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))

    def write_problems(self, problems: Iterable[Problem], labels: dict[str, dict[str, Any]] | None = None) -> None:
        self._writable()
        self.root.mkdir(parents=True, exist_ok=True)
        labels = labels or {}
        with open(self.problems_path, "w", encoding="utf-8") as fh:
            for p in problems:
                fh.write(json.dumps({"problem": p.to_dict(), "labels": labels.get(p.id, {})}, default=_jsonable) + "\n")

    def append_candidates(self, rows: Iterable[dict[str, Any]]) -> None:
        self._writable()
        rows = list(rows)
        for r in rows:
            missing = [f for f in CANDIDATE_FIELDS if f not in r]
            if missing:
                raise PoolError(f"candidate row lacks field(s) {missing}")
        _truncate_torn_tail(self.candidates_path)
        append_jsonl(self.candidates_path, rows)

    def rewrite_candidates(self, rows: Iterable[dict[str, Any]]) -> None:
        """Replace candidates.jsonl atomically (tmp file + rename); used by resume to drop partial units."""
        self._writable()
        tmp = self.candidates_path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.candidates_path)

    def write_selection_meta(self, name: str, meta: dict[str, Any]) -> Path:
        """Provenance of a selection (view hash, K, selector config) beside ``selections/<name>.jsonl``."""
        path = self.root / "selections" / f"{name}.meta.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(meta, indent=2, sort_keys=True, default=_jsonable))
        return path

    def freeze(self) -> None:
        """Write candidates.parquet and mark the pool read-only."""
        self._writable()
        rows = list(self.candidate_rows())
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq

            cols = {f: [r.get(f) for r in rows] for f in CANDIDATE_FIELDS}
            pq.write_table(pa.table(cols), self.root / "candidates.parquet")
        except ImportError:  # parquet is a convenience copy; JSONL stays the source of truth
            pass
        (self.root / "FROZEN").write_text("frozen\n")

    def write_selection(self, name: str, rows: Iterable[dict[str, Any]]) -> Path:
        """Selections may be (re)written on a frozen pool: they sit beside, not inside, the candidates."""
        path = self.root / "selections" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, default=_jsonable) + "\n")
        return path

    # ---- reading ----------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            raise PoolError(f"{self.root} has no manifest.json: not a pool")
        return json.loads(self.manifest_path.read_text())

    def problem_rows(self) -> list[dict[str, Any]]:
        if not self.problems_path.exists():
            raise PoolError(f"{self.root} has no problems.jsonl")
        return list(read_jsonl(self.problems_path))

    def problems(self) -> dict[str, Problem]:
        return {r["problem"]["id"]: Problem.from_dict(r["problem"]) for r in self.problem_rows()}

    def labels(self) -> dict[str, dict[str, Any]]:
        return {r["problem"]["id"]: r.get("labels", {}) for r in self.problem_rows()}

    def candidate_rows(self) -> Iterator[dict[str, Any]]:
        if not self.candidates_path.exists():
            return iter(())
        return read_jsonl(self.candidates_path)

    def units(self, k: int | None = None) -> list[Unit]:
        """Units in first-seen order; ``k`` takes the K-prefix view (first k candidates by index)."""
        groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for r in self.candidate_rows():
            groups[(r["problem_id"], int(r["seed"]))].append(r)
        out = []
        for (pid, seed), rows in groups.items():
            rows.sort(key=lambda r: r["candidate_index"])
            if k is not None:
                rows = rows[:k]
            out.append(Unit(pid, rows[0]["source_id"], seed, [r["text"] for r in rows], rows))
        return out

    def selection(self, name: str) -> dict[tuple[str, int], dict[str, Any]]:
        path = self.root / "selections" / f"{name}.jsonl"
        if not path.exists():
            raise PoolError(f"no selection {name!r} in {self.root}")
        return {(r["problem_id"], int(r["seed"])): r for r in read_jsonl(path)}

    def selection_names(self) -> list[str]:
        d = self.root / "selections"
        return sorted(p.stem for p in d.glob("*.jsonl")) if d.exists() else []

    def k(self) -> int | None:
        """The pool's K (candidates per unit, from the manifest), or None if not recorded."""
        try:
            return int(self.manifest().get("sampling", {}).get("k"))
        except (PoolError, TypeError, ValueError):
            return None


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
