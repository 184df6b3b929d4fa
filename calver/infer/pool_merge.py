"""`calver pool merge --out DIR SHARD_DIR [SHARD_DIR ...]`: join the shards of a sharded ``calver sample``.

A shard (``--shard I --num_shards N``) samples the units at canonical index i (problems in file order,
then seeds) with ``i % N == I`` into its own pool directory (see :mod:`calver.infer.sample`). The merge
refuses (:class:`PoolMergeError`, exit 2) unless

* every directory is a frozen pool whose manifest carries a shard block, all with the same ``num_shards``,
  and the shard indices are exactly 0..N-1, each once;
* the manifests agree on everything but the shard block and the ``created`` timestamp (model and adapter
  hashes, prompts, quantization, sampling params, seeds, corpus, versions, backend, ...), and the
  shards' ``problems.jsonl`` are byte-identical;
* every shard holds exactly its own units (no gap, no unit of another shard, none twice), each with
  candidate indices exactly 0..K-1.

It then writes the pool an unsharded run writes: the same ``problems.jsonl``, ``candidates.jsonl``
with the shards' rows (their bytes, unchanged) in canonical unit order, and the manifest without the
shard block (``created``: the earliest shard's), and freezes it. The shards, their ``created`` times and
the sha256 of each shard's ``candidates.jsonl`` are recorded in ``merge.json`` beside it. The pool is
built in a temporary sibling directory and renamed into place, so ``--out`` is either absent or complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Sequence

from calver.infer.manifest import canonical_units, shard_units
from calver.infer.pool import CANDIDATE_FIELDS, Pool, PoolError

# Manifest keys that may differ between shards of one pool (everything else must be equal).
SHARD_ONLY_KEYS = ("shard", "created")


class PoolMergeError(PoolError):
    """The shards disagree, overlap, leave a gap, or are not finished."""


def _diff_paths(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths at which two JSON values differ (recursing through dicts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            path = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.append(path)
            else:
                out += _diff_paths(a[k], b[k], path)
        return out
    same = json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    return [] if same else [prefix or "<root>"]


def _common(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in SHARD_ONLY_KEYS}


def _shard_of(root: Path, manifest: dict[str, Any]) -> tuple[int, int]:
    block = manifest.get("shard")
    if not isinstance(block, dict):
        raise PoolMergeError(f"{root} is not a shard (its manifest has no 'shard' block); sample shards with "
                             "`calver sample --shard I --num_shards N`")
    idx, n = block.get("index"), block.get("num_shards")
    if not isinstance(idx, int) or not isinstance(n, int) or not 0 <= idx < n:
        raise PoolMergeError(f"{root}: malformed shard block {block!r}")
    return idx, n


def _raw_rows(path: Path) -> Iterator[tuple[dict[str, Any], int, int]]:
    """(row, byte offset, byte length of its line) for every row of a frozen pool's candidates.jsonl."""
    if not path.exists():
        return
    offset = 0
    with open(path, "rb") as fh:
        for i, line in enumerate(fh):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            if not line.endswith(b"\n"):
                raise PoolMergeError(f"{path}:{i + 1}: torn last line in a frozen pool")
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise PoolMergeError(f"{path}:{i + 1}: bad JSON row: {e}") from None
            missing = [f for f in CANDIDATE_FIELDS if f not in row] if isinstance(row, dict) else ["(not an object)"]
            if missing:
                raise PoolMergeError(f"{path}:{i + 1}: candidate row lacks field(s) {missing}")
            yield row, start, len(line)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    if path.exists():
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return "sha256:" + h.hexdigest()


def check_shards(shard_dirs: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """Validate the shards; returns what :func:`merge_pools` writes (raises :class:`PoolMergeError`)."""
    if not shard_dirs:
        raise PoolMergeError("no shard directories given")
    shards: dict[int, Path] = {}
    manifests: dict[int, dict[str, Any]] = {}
    num_shards: int | None = None
    first: Path | None = None
    for d in shard_dirs:
        root = Path(d)
        pool = Pool(root)
        try:
            manifest = pool.manifest()
        except PoolError as e:
            raise PoolMergeError(str(e)) from None
        if not pool.frozen:
            raise PoolMergeError(f"{root} is not frozen: its `calver sample` run is unfinished (rerun it to resume)")
        idx, n = _shard_of(root, manifest)
        if num_shards is None:
            num_shards, first = n, root
        elif n != num_shards:
            raise PoolMergeError(f"{root} is shard {idx} of {n} but {first} is a shard of {num_shards}: "
                                 "num_shards disagrees")
        if idx in shards:
            raise PoolMergeError(f"shard {idx} given twice: {shards[idx]} and {root}")
        shards[idx], manifests[idx] = root, manifest
    assert num_shards is not None
    missing = sorted(set(range(num_shards)) - set(shards))
    if missing:
        raise PoolMergeError(f"missing shard(s) {missing} of {num_shards}")

    ref = _common(manifests[0])
    for i in range(1, num_shards):
        bad = _diff_paths(ref, _common(manifests[i]))
        if bad:
            raise PoolMergeError(f"{shards[i]} (shard {i}) and {shards[0]} (shard 0) were sampled differently: "
                                 f"manifest field(s) {', '.join(bad[:12])} disagree")
    problems_bytes = {i: Pool(shards[i]).problems_path.read_bytes() if Pool(shards[i]).problems_path.exists()
                      else None for i in shards}
    if problems_bytes[0] is None:
        raise PoolMergeError(f"{shards[0]} has no problems.jsonl")
    for i in range(1, num_shards):
        if problems_bytes[i] != problems_bytes[0]:
            raise PoolMergeError(f"{shards[i]}/problems.jsonl differs from {shards[0]}/problems.jsonl")

    problem_ids = [r["problem"]["id"] for r in Pool(shards[0]).problem_rows()]
    seeds = [int(s) for s in ref.get("seeds") or []]
    k = int((ref.get("sampling") or {}).get("k") or 0)
    units = canonical_units(problem_ids, seeds)
    if ref.get("n_units") is not None and ref["n_units"] != len(units):
        raise PoolMergeError(f"manifest n_units={ref['n_units']} but problems x seeds give {len(units)} units")

    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}  # unit -> (offset, length) of its rows
    owner: dict[tuple[str, int], int] = {}
    for i in range(num_shards):
        path = Pool(shards[i]).candidates_path
        groups: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
        for row, start, length in _raw_rows(path):
            groups[(str(row["problem_id"]), int(row["seed"]))].append((int(row["candidate_index"]), start, length))
        expected = set(shard_units(units, i, num_shards))
        for unit, rows in groups.items():
            if unit in owner:
                raise PoolMergeError(f"unit {unit[0]}/seed {unit[1]} appears in shard {owner[unit]} and shard {i}")
            if unit not in expected:
                raise PoolMergeError(f"{shards[i]} (shard {i}) holds unit {unit[0]}/seed {unit[1]}, which is not "
                                     f"one of its units")
            idx = sorted(c for c, _, _ in rows)
            if idx != list(range(k)):
                raise PoolMergeError(f"{shards[i]}: unit {unit[0]}/seed {unit[1]} has candidate indices {idx}, "
                                     f"expected 0..{k - 1}")
            owner[unit] = i
            spans[unit] = [(start, length) for _, start, length in sorted(rows)]
        gap = [u for u in shard_units(units, i, num_shards) if u not in groups]
        if gap:
            raise PoolMergeError(f"{shards[i]} (shard {i}) lacks {len(gap)} of its unit(s), e.g. "
                                 f"{gap[0][0]}/seed {gap[0][1]}")

    merged = dict(manifests[0])
    merged.pop("shard", None)
    created = sorted(str(m.get("created")) for m in manifests.values() if m.get("created") is not None)
    if created:
        merged["created"] = created[0]
    return {
        "manifest": merged,
        "problems": problems_bytes[0],
        "order": [(owner[u], spans[u]) for u in units],
        "paths": {i: Pool(shards[i]).candidates_path for i in range(num_shards)},
        "n_candidates": sum(len(v) for v in spans.values()),
        "n_units": len(units),
        "record": {
            "num_shards": num_shards,
            "shards": [{"index": i, "path": str(shards[i]), "created": manifests[i].get("created"),
                        "candidates_sha256": _sha256_file(Pool(shards[i]).candidates_path)}
                       for i in range(num_shards)],
        },
    }


def merge_pools(shard_dirs: Sequence[str | os.PathLike], out: str | os.PathLike, log=print) -> Pool:
    """Check the shards and write the merged, frozen pool at ``out`` (which must not exist or be empty)."""
    dest = Path(out)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise PoolMergeError(f"--out {dest} exists and is not empty; choose a new directory")
    if any(Path(d).resolve() == dest.resolve() for d in shard_dirs):
        raise PoolMergeError(f"--out {dest} is one of the shards")
    plan = check_shards(shard_dirs)
    tmp = dest.parent / f".{dest.name}.merging-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        pool = Pool(tmp)
        pool.problems_path.write_bytes(plan["problems"])
        sources = {i: open(p, "rb") for i, p in plan["paths"].items()}  # noqa: SIM115 - closed below
        try:
            with open(pool.candidates_path, "wb") as fh:
                for shard, unit_spans in plan["order"]:  # the shards' row bytes, in canonical unit order
                    src = sources[shard]
                    for start, length in unit_spans:
                        src.seek(start)
                        fh.write(src.read(length))
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            for src in sources.values():
                src.close()
        pool.write_manifest(plan["manifest"])
        (tmp / "merge.json").write_text(json.dumps(plan["record"], indent=2, sort_keys=True))
        pool.freeze()
        if dest.exists():
            dest.rmdir()  # checked empty above
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"merged {plan['record']['num_shards']} shard(s) into {dest}: {plan['n_units']} unit(s), "
        f"{plan['n_candidates']} candidate(s); frozen")
    return Pool(dest)


def cmd_pool_merge(args) -> int:
    """``calver pool merge --out DIR SHARD_DIR ...``."""
    try:
        merge_pools(args.shards, args.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    except PoolError as e:
        print(f"calver pool merge: error: {e}", file=sys.stderr)
        return 2
    return 0
