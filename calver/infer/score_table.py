"""Score once: the verifier's six bits for every candidate of a pool, stored beside it.

    POOL/scores/verifier.jsonl       one row per candidate: units in pool order, candidate-index order within
    POOL/scores/verifier.meta.json   {"schema", "scorer_version", "problems": {problem_id: fingerprint},
                                      "n_rows", "rows_sha256"}

A row: ``problem_id``, ``seed``, ``candidate_index``, ``text_sha256``, ``bits``, ``total``, ``reasons``,
``grounded`` and ``answer`` (the family's ``object_to_json`` of the parsed ANSWER, null if unparsed);
the answer key is derived on read (``Verdict.answer_key``). Every score is
``score(text, strip_problem(problem))``, what a selector's view is scored on: nothing here reads a label.

:func:`score_table` reuses the stored rows that are still valid and scores (and writes) the rest. A
stale row is never reused silently: a changed scorer version (:func:`calver.infer.manifest.scorer_version`),
problem fingerprint or candidate text, or a corrupt table, is named in one warning line (``log`` and
:mod:`warnings`), rescored and rewritten. :func:`read_score_table` is the strict reader: it raises.
Writes are atomic (tmp file + ``os.replace``; the meta, written last, holds the rows' hash, so a write
torn between the two files reads as corrupt) and allowed on a frozen pool (like ``selections/``).

One process shares one table per pool: the table last built or read is kept (weakly: while anything
holds it) with the full :class:`~calver.verifier.Verdict` s it computed (slots, parsed graphs), so
refinement feedback and the audits need not score a candidate again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from calver.infer.firewall import SelectorView, strip_problem
from calver.infer.manifest import scorer_version
from calver.infer.pool import Pool, PoolError
from calver.verifier import SLOTS, PreparedProblem, Problem, Verdict, get_family, prepare, problem_fingerprint, score
from calver.verifier.verdict import answer_key

SCHEMA = "calver-scores/1"
ROWS_FILE = "verifier.jsonl"
META_FILE = "verifier.meta.json"

UnitKey = tuple[str, int]
# (problem hash, candidate text) -> full Verdict: lets the pools of one run that share problems
# (an SFT and a GRPO pool on the same held-out set) score a repeated text once.
ScoreMemo = dict[tuple[str, str], Verdict]


class ScoreTableError(PoolError):
    """A pool's score table is missing, corrupt, or cannot hold an answer."""


class StaleScoreTableError(ScoreTableError):
    """The stored table was scored by another verifier version, on other problems or other texts."""


class ScoreTableWarning(UserWarning):
    """A table was rescored (stale or corrupt) or could not be written."""


@dataclass(eq=False)
class _Data:
    """What one table holds; shared by every :class:`ScoreTable` handed out for it in this process."""

    root: Path
    version: dict[str, str]
    tasks: dict[str, str]  # problem id -> task
    hashes: dict[str, str]  # problem id -> hash of its stripped problem
    rows: dict[UnitKey, tuple[Verdict, ...]]
    text_sha: dict[UnitKey, tuple[str, ...]]
    full: dict[UnitKey, list[Verdict | None]] = field(default_factory=dict)  # computed in this process
    signature: tuple = ()
    on_disk: bool = False  # the stored table holds exactly these rows


_LIVE: "weakref.WeakValueDictionary[str, _Data]" = weakref.WeakValueDictionary()


class ScoreTable:
    """Per-candidate scores of one pool: ``table[(problem_id, seed)]`` is the unit's tuple of
    :class:`Verdict` in candidate-index order. ``n_scored``: verifier calls this call made;
    ``n_read``: candidates taken from the stored table; ``rescored_reason``: why stored rows were
    thrown away (None when none were); ``written``: whether this call wrote the table."""

    def __init__(self, data: _Data, *, n_scored: int, n_read: int, rescored_reason: str | None, written: bool):
        self._data = data
        self.n_scored, self.n_read, self.rescored_reason, self.written = n_scored, n_read, rescored_reason, written
        self._checked: dict[int, Problem] = {}  # id -> view problem whose hash matched

    @property
    def root(self) -> Path:
        return self._data.root

    @property
    def scorer_version(self) -> dict[str, str]:
        return dict(self._data.version)

    @property
    def n_candidates(self) -> int:
        return sum(len(r) for r in self._data.rows.values())

    def __len__(self) -> int:
        return len(self._data.rows)

    def __iter__(self) -> Iterator[UnitKey]:
        return iter(self._data.rows)

    def __contains__(self, unit: object) -> bool:
        return unit in self._data.rows

    def __getitem__(self, unit: UnitKey) -> tuple[Verdict, ...]:
        try:
            return self._data.rows[(unit[0], int(unit[1]))]
        except KeyError:
            raise KeyError(f"score table of {self.root} has no unit {unit[0]}/{unit[1]}") from None

    def candidate(self, problem_id: str, seed: int, index: int) -> Verdict:
        row = self[(problem_id, seed)]
        if not 0 <= index < len(row):
            raise KeyError(f"score table of {self.root}: unit {problem_id}/{seed} has no candidate {index}")
        return row[index]

    def verdicts(self, unit: UnitKey) -> list[Verdict]:
        """The unit's verdicts: the full ones this process computed, else the stored rows (equal, without
        slots / parsed graphs / ``g_ver``)."""
        rows = self[unit]
        full = self._data.full.get((unit[0], int(unit[1])))
        return [(full[i] if full and full[i] is not None else c) for i, c in enumerate(rows)]

    def check(self, unit: UnitKey, texts: Sequence[str]) -> None:
        """Raise :class:`ScoreTableError` unless ``texts`` are the first candidates of ``unit`` here."""
        shas = self._data.text_sha.get((unit[0], int(unit[1])))
        if shas is None or len(texts) > len(shas) or any(_sha(t) != s for t, s in zip(texts, shas)):
            raise ScoreTableError(f"unit {unit[0]}/{unit[1]}: its texts are not the score table's ({self.root}); "
                                  "was the pool changed during the run?")

    def with_verdicts(self, views: Sequence[SelectorView]) -> list[SelectorView]:
        """``views`` carrying the table's verdicts (``SelectorView.verdicts``), so the selectors of a run score
        nothing; a K-prefix view takes the unit's first k. A view whose problem or texts are not the
        table's raises :class:`ScoreTableError`."""
        out = []
        for v in views:
            self.check(v.unit, v.texts)
            if id(v.problem) not in self._checked:
                if _problem_hash(v.problem) != self._data.hashes[v.problem_id]:
                    raise ScoreTableError(f"unit {v.problem_id}/{v.seed}: the view's problem is not the one the "
                                          f"score table of {self.root} was scored on")
                self._checked[id(v.problem)] = v.problem  # kept so the id stays unique
            out.append(replace(v, verdicts=tuple(self.verdicts(v.unit)[: v.k])))
        return out


# ---- hashing ------------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _problem_hash(problem: Problem) -> str:
    """Content hash of a (stripped) problem (:func:`calver.verifier.problem_fingerprint`)."""
    try:
        return problem_fingerprint(problem)
    except TypeError as e:
        raise ScoreTableError(f"problem {problem.id!r} cannot be hashed for the score table: {e}") from None


# ---- the pool as it is now ----------------------------------------------------------------------
@dataclass
class _Current:
    problems: dict[str, Problem]
    hashes: dict[str, str]
    units: dict[UnitKey, tuple[str, ...]]  # texts in candidate-index order


def _current(pool: Pool) -> _Current:
    problems = {}
    for r in pool.problem_rows():
        p = strip_problem(r["problem"])
        problems[p.id] = p
    units = {}
    for u in pool.units():
        idx = tuple(int(r["candidate_index"]) for r in u.rows)
        if idx != tuple(range(len(idx))):
            raise ScoreTableError(f"{pool.root}: unit {u.problem_id}/{u.seed} has candidate indices {idx}, not 0..K-1")
        if u.problem_id not in problems:
            raise ScoreTableError(f"{pool.root}: candidates name problem {u.problem_id!r}, which problems.jsonl lacks")
        units[(u.problem_id, u.seed)] = tuple(str(t) for t in u.texts)
    return _Current(problems, {pid: _problem_hash(p) for pid, p in problems.items()}, units)


def _signature(pool: Pool) -> tuple:
    out = []
    for p in (pool.problems_path, pool.candidates_path, pool.root / "scores" / ROWS_FILE,
              pool.root / "scores" / META_FILE):
        try:
            st = p.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


# ---- the stored table -----------------------------------------------------------------------------
class _Corrupt(Exception):
    pass


@dataclass
class _Stored:
    version: Any
    hashes: dict[str, str]
    rows: dict[tuple[str, int, int], dict[str, Any]]


def _read_stored(root: Path) -> _Stored | None:
    rows_path, meta_path = root / "scores" / ROWS_FILE, root / "scores" / META_FILE
    if not rows_path.exists() and not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        body = rows_path.read_bytes()
    except FileNotFoundError as e:
        raise _Corrupt(f"{Path(e.filename).name} is missing") from None
    except (OSError, ValueError) as e:
        raise _Corrupt(f"unreadable: {type(e).__name__}: {e}") from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA or not isinstance(meta.get("problems"), dict):
        raise _Corrupt(f"{META_FILE} is not a {SCHEMA} meta file")
    if meta.get("rows_sha256") != "sha256:" + hashlib.sha256(body).hexdigest():
        raise _Corrupt(f"{ROWS_FILE} does not match the hash its meta records (a torn or edited write)")
    rows: dict[tuple[str, int, int], dict[str, Any]] = {}
    for n, line in enumerate(body.decode("utf-8").splitlines(), 1):
        try:
            r = json.loads(line)
            key = (str(r["problem_id"]), int(r["seed"]), int(r["candidate_index"]))
        except (ValueError, KeyError, TypeError) as e:
            raise _Corrupt(f"{ROWS_FILE}:{n}: bad row: {type(e).__name__}: {e}") from None
        rows[key] = r
    if len(rows) != meta.get("n_rows"):
        raise _Corrupt(f"{ROWS_FILE} holds {len(rows)} distinct rows, its meta says {meta.get('n_rows')}")
    return _Stored(meta.get("scorer_version"), dict(meta["problems"]), rows)


def _decode(row: dict[str, Any], task: str, where: str) -> Verdict:
    try:
        bits = tuple(int(b) for b in row["bits"])
        reasons = {str(k): str(v) for k, v in dict(row["reasons"]).items()}
        grounded = row["grounded"]
        if len(bits) != len(SLOTS) or any(b not in (0, 1) for b in bits) or row["total"] != sum(bits) \
                or not isinstance(grounded, bool):
            raise ValueError("bits/total/grounded malformed")
        raw = row["answer"]
        answer = None if raw is None else get_family(task).object_from_json(raw)
    except Exception as e:  # noqa: BLE001 - any malformed row makes the table corrupt, never a traceback
        raise _Corrupt(f"{where}: bad row: {type(e).__name__}: {e}") from None
    return Verdict(list(bits), reasons, answer, task, grounded)


@dataclass
class _Plan:
    reuse: dict[tuple[str, int, int], Verdict]
    issues: list[str]  # why stored rows were thrown away (loud)
    missing: int  # candidates with no stored row
    dropped: int  # stored rows of candidates no longer in the pool


def _examples(items: list[str]) -> str:
    return ", ".join(items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def _plan(stored: _Stored, cur: _Current, version: dict[str, str]) -> _Plan:
    plan = _Plan({}, [], 0, 0)
    keys = {(pid, seed, i) for (pid, seed), texts in cur.units.items() for i in range(len(texts))}
    plan.dropped = len(set(stored.rows) - keys)
    if stored.version != version:
        plan.issues.append(f"scorer version changed (stored {json.dumps(stored.version, sort_keys=True)}, "
                           f"current {json.dumps(version, sort_keys=True)})")
        return plan
    used = {pid for pid, _ in cur.units}
    changed = [f"{pid} (stored {str(stored.hashes[pid])[:19]}, current {cur.hashes[pid][:19]})"
               for pid in sorted(used) if pid in stored.hashes and stored.hashes[pid] != cur.hashes[pid]]
    if changed:
        plan.issues.append(f"{len(changed)} problem(s) changed: {_examples(changed)}")
    texts_changed = []
    for (pid, seed), texts in cur.units.items():
        fresh = pid in stored.hashes and stored.hashes[pid] == cur.hashes[pid]
        for i, text in enumerate(texts):
            row = stored.rows.get((pid, seed, i))
            if row is None or not fresh:
                plan.missing += row is None
                continue
            if row.get("text_sha256") != _sha(text):
                texts_changed.append(f"{pid}/{seed}/{i}")
                continue
            plan.reuse[(pid, seed, i)] = _decode(row, cur.problems[pid].task, f"{ROWS_FILE} row {pid}/{seed}/{i}")
    if texts_changed:
        plan.issues.append(f"{len(texts_changed)} candidate text(s) changed: {_examples(texts_changed)}")
    return plan


# ---- entry points -------------------------------------------------------------------------------
def _as_pool(pool: Pool | str | os.PathLike) -> Pool:
    return pool if isinstance(pool, Pool) else Pool(pool)


def read_score_table(pool: Pool | str | os.PathLike) -> ScoreTable:
    """The stored table, only if it is complete and current; else :class:`ScoreTableError`
    (missing, corrupt) or :class:`StaleScoreTableError` (other verifier, problems or texts)."""
    pool = _as_pool(pool)
    where = pool.root / "scores" / ROWS_FILE
    cur, version = _current(pool), scorer_version()
    try:
        stored = _read_stored(pool.root)
    except _Corrupt as e:
        raise ScoreTableError(f"score table {where} is corrupt: {e}") from None
    if stored is None:
        raise ScoreTableError(f"{pool.root} has no score table ({where}); `calver select` or `calver eval` writes it")
    try:
        plan = _plan(stored, cur, version)
    except _Corrupt as e:
        raise ScoreTableError(f"score table {where} is corrupt: {e}") from None
    problems = list(plan.issues)
    if plan.missing:
        problems.append(f"{plan.missing} candidate(s) have no row")
    if plan.dropped:
        problems.append(f"{plan.dropped} row(s) name candidates the pool does not hold")
    if problems:
        raise StaleScoreTableError(f"score table {where} is stale: {'; '.join(problems)}")
    data = _assemble(pool, cur, version, plan.reuse, {})
    return ScoreTable(data, n_scored=0, n_read=len(plan.reuse), rescored_reason=None, written=False)


def score_table(pool: Pool | str | os.PathLike, *, write: bool = True, log: Callable[[str], None] = lambda m: None,
                memo: ScoreMemo | None = None) -> ScoreTable:
    """The pool's score table: stored rows that are still valid, every other candidate scored now
    (each distinct (problem, text) once; ``memo`` shares scores across pools), written back when
    ``write`` and anything changed. Stale or corrupt rows are rescored with one loud warning."""
    pool = _as_pool(pool)
    key = str(pool.root.resolve())
    version = scorer_version()
    live = _LIVE.get(key)
    if live is not None and live.version == version and live.signature == _signature(pool):
        written = write and not live.on_disk and _write(pool, live, log)
        if written:
            live.on_disk, live.signature = True, _signature(pool)
        return ScoreTable(live, n_scored=0, n_read=sum(len(r) for r in live.rows.values()), rescored_reason=None,
                          written=written)
    t0, where, cur = time.perf_counter(), pool.root / "scores" / ROWS_FILE, _current(pool)
    n_all = sum(len(t) for t in cur.units.values())
    try:
        stored = _read_stored(pool.root)
        plan = _plan(stored, cur, version) if stored is not None else _Plan({}, [], n_all, 0)
    except _Corrupt as e:
        stored, plan = None, _Plan({}, [f"the stored table is corrupt ({e})"], 0, 0)
    reason = "; ".join(plan.issues) or None
    if reason:
        msg = (f"score table {where}: {reason}: rescoring {n_all - len(plan.reuse)} of {n_all} candidate(s), "
               "rewriting it")
        log(f"warning: {msg}")
        warnings.warn(msg, ScoreTableWarning, stacklevel=2)
    elif plan.dropped:
        log(f"score table {where}: dropping {plan.dropped} row(s) of candidates the pool no longer holds")
    full: dict[UnitKey, list[Verdict | None]] = {}
    n_scored = _score_missing(cur, plan.reuse, full, memo)
    data = _assemble(pool, cur, version, plan.reuse, full)
    changed = bool(full or reason or plan.dropped or stored is None)
    written = write and changed and _write(pool, data, log)
    data.on_disk, data.signature = written or not changed, _signature(pool)
    _LIVE[key] = data
    if full:
        log(f"score table {where}: {n_scored} candidate text(s) scored, {len(plan.reuse)} read "
            f"({time.perf_counter() - t0:.2f}s)")
    return ScoreTable(data, n_scored=n_scored, n_read=len(plan.reuse), rescored_reason=reason, written=written)


def _score_missing(cur: _Current, reuse: dict, full: dict[UnitKey, list[Verdict | None]],
                   memo: ScoreMemo | None) -> int:
    """Score every candidate ``reuse`` lacks into ``full``; returns the verifier calls made."""
    memo = {} if memo is None else memo
    prepared: dict[str, Problem | PreparedProblem] = {}
    n = 0
    for (pid, seed), texts in cur.units.items():
        slots: list[Verdict | None] = [None] * len(texts)
        for i, text in enumerate(texts):
            if (pid, seed, i) in reuse:
                continue
            mkey = (cur.hashes[pid], text)
            ts = memo.get(mkey)
            if ts is None:
                if pid not in prepared:
                    prepared[pid] = _prepared(cur.problems[pid])
                ts = memo[mkey] = score(text, prepared[pid])
                n += 1
            slots[i] = ts
        if any(s is not None for s in slots):
            full[(pid, seed)] = slots
    return n


def _prepared(problem: Problem) -> Problem | PreparedProblem:
    """The problem prepared once for its K candidates; an unregistered task stays a Problem (``score``
    then fails every trace closed, as it does for any caller)."""
    try:
        return prepare(problem)
    except KeyError:
        return problem


def _assemble(pool: Pool, cur: _Current, version: dict[str, str], reuse: dict,
              full: dict[UnitKey, list[Verdict | None]]) -> _Data:
    rows: dict[UnitKey, tuple[Verdict, ...]] = {}
    for (pid, seed), texts in cur.units.items():
        fresh = full.get((pid, seed)) or []
        out = []
        for i in range(len(texts)):
            c = reuse.get((pid, seed, i))
            if c is None:
                ts = fresh[i]
                assert ts is not None  # every candidate without a stored row was scored into ``full``
                c = ts.stored()
            out.append(c)
        rows[(pid, seed)] = tuple(out)
    return _Data(pool.root, dict(version), {pid: p.task for pid, p in cur.problems.items()}, dict(cur.hashes), rows,
                 {u: tuple(_sha(t) for t in texts) for u, texts in cur.units.items()}, full)


def _answer_json(task: str, answer: Any, where: str) -> Any:
    if answer is None:
        return None
    fam = get_family(task)
    data = fam.object_to_json(answer)
    back = fam.object_from_json(json.loads(json.dumps(data)))
    if back != answer or answer_key(task, back) != answer_key(task, answer):
        raise ScoreTableError(f"{where}: {task}'s object_to_json/object_from_json do not round-trip the answer "
                              f"{answer!r} (got {back!r}); the score table cannot store it")
    return data


def _write(pool: Pool, data: _Data, log: Callable[[str], None]) -> bool:
    """Write rows, then meta (holding the rows' hash), each atomically; False (with a warning) when
    the directory is not writable."""
    lines = []
    for (pid, seed), cands in data.rows.items():
        task = data.tasks[pid]
        for i, (c, sha) in enumerate(zip(cands, data.text_sha[(pid, seed)])):
            row = {"problem_id": pid, "seed": seed, "candidate_index": i, "text_sha256": sha, "bits": list(c.bits),
                   "total": c.total, "reasons": dict(c.reasons), "grounded": c.grounded,
                   "answer": _answer_json(task, c.answer, f"{pid}/{seed}/{i}")}
            lines.append(json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n")
    body = "".join(lines).encode("utf-8")
    meta = {"schema": SCHEMA, "scorer_version": data.version, "n_rows": len(lines),
            "problems": {pid: h for pid, h in sorted(data.hashes.items())},
            "rows_sha256": "sha256:" + hashlib.sha256(body).hexdigest()}
    d = pool.root / "scores"
    try:
        d.mkdir(parents=True, exist_ok=True)
        _atomic_write(d / ROWS_FILE, body)
        _atomic_write(d / META_FILE, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
    except OSError as e:
        msg = f"could not write the score table {d / ROWS_FILE}: {type(e).__name__}: {e}; using it in memory only"
        log(f"warning: {msg}")
        warnings.warn(msg, ScoreTableWarning, stacklevel=3)
        return False
    return True


def _atomic_write(path: Path, body: bytes) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def source_verdicts(pool: Pool | str | os.PathLike) -> list[tuple[dict[str, Any], Problem, Verdict]]:
    """Each candidate row of ``pool`` (pool order) with its problem and its verdict for a trainer (a GRPO
    prompt filter, a PRM's labels): the score table's where the firewall view grounded it, else ``score`` on
    the source problem. Raises :class:`PoolError` for a pool the table cannot be built on."""
    pool = _as_pool(pool)
    problems, table = pool.problems(), score_table(pool)
    out = []
    for row in pool.candidate_rows():
        pid = row["problem_id"]  # the table has checked that every candidate's problem is in the pool
        verdict = table.candidate(pid, int(row["seed"]), int(row["candidate_index"]))
        out.append((row, problems[pid], verdict if verdict.grounded else score(row.get("text") or "", problems[pid])))
    return out


__all__ = ["ScoreMemo", "ScoreTable", "ScoreTableError", "ScoreTableWarning",
           "StaleScoreTableError", "read_score_table", "score_table", "source_verdicts"]
