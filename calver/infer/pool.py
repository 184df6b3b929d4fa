"""Frozen candidate pools: the on-disk layout every sampler, selector and evaluator shares.

    POOL_DIR/
      manifest.json              model/adapter hashes, sampling params, seeds, corpus hash, versions
      problems.jsonl             one row per problem: {"problem": Problem.to_dict(), "labels": {...}}
      candidates.jsonl           one row per candidate, appended while sampling (resumable)
      candidates.parquet         written by freeze(), same rows (HF ``datasets`` loads it)
      FROZEN                     marker: the pool is read-only from here on
      selections/<name>.jsonl    one row per unit: {"problem_id", "seed", "index", "scores"[, "answer"]}
      selections/<name>.meta.json  the selection's provenance: firewall view hash, K, selector
      scores/verifier.jsonl      every candidate's verifier score, keyed by scorer version and problem
                                 fingerprint (``calver.infer.score_table``)

A *unit* is one (problem_id, seed) pair: the K candidates sampled for one problem under one seed.
Candidate rows hold: problem_id, source_id (the clustering key), seed, candidate_index, text,
finish_reason, num_tokens, mean_logprob. Labels (validity class, source graph in constructed mode,
reference answers) live only in ``problems.jsonl``'s "labels" and never reach a selector (see
``calver.infer.firewall``).

A :class:`Pool` keeps what it has read: each file is read once per state of it (inode, size, mtime_ns)
and again after this instance writes, and each problem's graph is parsed once. Readers get fresh
objects (rows decoded anew, containers copied), so a caller may mutate what it gets.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from calver.verifier.graph import CausalGraph
from calver.verifier.problem import Problem, copy_containers

T = TypeVar("T")

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
    for _, row in _jsonl(path):
        yield row


def _jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(line, row) for each committed row of a JSONL file (see :func:`read_jsonl`)."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1 and not line.endswith("\n"):
                return  # interrupted append: the row was never committed
            raise PoolError(f"{path}:{i + 1}: bad JSON row: {e}") from None
        yield line, row


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


@dataclass(slots=True)
class _ProblemRow:
    """One committed row of problems.jsonl as read: its text, and its graph once a Problem was built."""

    line: str
    graph: CausalGraph | None = None
    parsed: bool = False


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
        self._read: dict[str, tuple[tuple[int, int, int], Any]] = {}  # what -> (file state, parsed)

    def _cached(self, what: str, path: Path, load: Callable[[], T]) -> T:
        """``load()``, kept while ``path`` keeps its (inode, size, mtime_ns); the caller copies it out.
        The state is taken before the read, so a write during it only causes one more read."""
        st = path.stat()
        state = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._read.get(what)
        if hit is not None and hit[0] == state:
            return hit[1]
        value = load()
        self._read[what] = (state, value)
        return value

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
        self._read.clear()  # every writer checks first: what it changes is read again

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
        return json.loads(self._cached("manifest", self.manifest_path, self.manifest_path.read_text))

    def problem_rows(self) -> list[dict[str, Any]]:
        """The rows of problems.jsonl, decoded afresh from the text kept in memory."""
        return [json.loads(r.line) for r in self._problem_rows()]

    def _problem_rows(self) -> list[_ProblemRow]:
        if not self.problems_path.exists():
            raise PoolError(f"{self.root} has no problems.jsonl")
        return self._cached("problems", self.problems_path,
                            lambda: [_ProblemRow(line) for line, _ in _jsonl(self.problems_path)])

    def problems(self) -> dict[str, Problem]:
        """problem id -> Problem, built afresh per call; each row's graph is parsed on the first."""
        out = {}
        for r in self._problem_rows():
            d = json.loads(r.line)["problem"]
            pid = d["id"]
            if r.parsed and r.graph is not None:  # from_dict takes it as is: its class is the row's
                d = {**d, "graph": r.graph, "graph_class": r.graph.kind}
            p = Problem.from_dict(d)
            r.graph, r.parsed = p.graph, True
            out[pid] = p
        return out

    def labels(self) -> dict[str, dict[str, Any]]:
        return {r["problem"]["id"]: r.get("labels", {}) for r in self.problem_rows()}

    def _candidate_rows(self) -> list[dict[str, Any]]:
        if not self.candidates_path.exists():
            return []
        return self._cached("candidate_rows", self.candidates_path, lambda: list(read_jsonl(self.candidates_path)))

    def candidate_rows(self) -> Iterator[dict[str, Any]]:
        return (copy_containers(r) for r in self._candidate_rows())

    def units(self, k: int | None = None) -> list[Unit]:
        """Units in first-seen order; ``k`` takes the K-prefix view (first k candidates by index)."""
        if not self.candidates_path.exists():
            return []
        grouped = self._cached("units", self.candidates_path, self._group_units)
        return [Unit(pid, sid, seed, [r["text"] for r in rows[:k]], [copy_containers(r) for r in rows[:k]])
                for pid, sid, seed, rows in grouped]

    def _group_units(self) -> list[tuple[str, str, int, list[dict[str, Any]]]]:
        groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
        for r in self._candidate_rows():
            groups[(r["problem_id"], int(r["seed"]))].append(r)
        out = []
        for (pid, seed), rows in groups.items():
            rows.sort(key=lambda r: r["candidate_index"])
            out.append((pid, rows[0]["source_id"], seed, rows))
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
