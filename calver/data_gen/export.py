"""Export generated problems as training datasets.

- SFT rows (TRL chat format): ``messages`` = [system: contract instructions, user: problem text,
  assistant: canonical trace], plus ``id``, ``task``, ``source_id``.
- GRPO rows: ``prompt`` (system + user messages) plus every problem column the reward function
  needs: ``problem_json`` (``Problem.to_dict()`` as JSON: ``Problem.from_dict(json.loads(...))``
  rebuilds it), ``task``, ``id``, ``source_id``, ``graph``, ``graph_class``, ``mode``, ``query_json``,
  ``n_valid``, ``validity_class_json``.

``export_dataset(problems, out_dir, cfg)`` writes::

    OUT/problems.jsonl            canonical problem JSONL (sorted keys); its sha256 is the content hash
    OUT/sft.jsonl, OUT/grpo.jsonl
    OUT/sft.parquet, OUT/grpo.parquet
    OUT/hf/                       datasets.DatasetDict({"sft", "grpo"}).save_to_disk
    OUT/manifest.json             config, seed, versions, row counts, file hashes
    OUT/README.md                 dataset card
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import calver
from calver.data_gen.drills import Drill, DrillConfig, drill_graph_record
from calver.data_gen.generators import canonical_trace
from calver.data_gen.prompts import render_prompt
from calver.data_gen.trace_style import TraceStyle
from calver.verifier.contract import CONTRACT_VERSION
from calver.verifier.problem import Problem

SFT_COLUMNS = ("id", "task", "source_id", "messages")
GRPO_COLUMNS = ("id", "task", "source_id", "prompt", "problem_json", "graph", "graph_class", "mode",
                "query_json", "n_valid", "validity_class_json")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default)


def _default(o: Any) -> Any:
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, tuple):
        return list(o)
    if hasattr(o, "value"):  # enums
        return o.value
    raise TypeError(f"not JSON-serializable: {type(o).__name__}")


def problem_json(problem: Problem) -> str:
    """The canonical JSON of a problem (sorted keys, compact)."""
    return _dumps(problem.to_dict())


def to_sft_rows(problems: Iterable[Problem], encoding: str | None = None,
                style: TraceStyle = TraceStyle()) -> list[dict[str, Any]]:
    """SFT rows: each problem's prompt (``encoding``: override its graph's encoding) with the system message
    and a canonical trace written in ``style`` (:class:`~calver.data_gen.trace_style.TraceStyle`)."""
    rows = []
    for p in problems:
        trace = canonical_trace(p, style)
        messages = render_prompt(p, encoding, style.system) + [{"role": "assistant", "content": trace}]
        rows.append({"id": p.id, "task": p.task, "source_id": p.source_id, "messages": messages})
    return rows


def to_grpo_rows(problems: Iterable[Problem], encoding: str | None = None,
                 system: str = "contract") -> list[dict[str, Any]]:
    rows = []
    for p in problems:
        d = p.to_dict()
        vc = p.meta.get("validity_class")
        rows.append({
            "id": p.id,
            "task": p.task,
            "source_id": p.source_id,
            "prompt": render_prompt(p, encoding, system),
            "problem_json": _dumps(d),
            "graph": d["graph"] or "",
            "graph_class": d["graph_class"] or "",
            "mode": p.mode,
            "query_json": _dumps(d["query"]),
            "n_valid": int(p.meta.get("n_valid", len(vc) if vc is not None else -1)),
            "validity_class_json": _dumps(vc) if vc is not None else "",
        })
    return rows


def problems_from_rows(rows: Iterable[dict[str, Any]]) -> list[Problem]:
    """Rebuild problems from GRPO rows (or any rows with ``problem_json``)."""
    return [Problem.from_dict(json.loads(r["problem_json"])) for r in rows]


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> str:
    data = "".join(_dumps(r) + "\n" for r in rows).encode("utf-8")
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _require_datasets():
    try:
        import datasets
        import pyarrow  # noqa: F401  (parquet writer)
    except ImportError as e:
        raise ImportError(f"export needs the 'datasets' and 'pyarrow' packages ({e}); "
                          "install them with: pip install 'calver[data]'") from None
    return datasets


def export_dataset(problems: Sequence[Problem], out_dir: str | Path, cfg: Any = None, *,
                   encoding: str | None = None, extra_card: dict[str, Any] | None = None,
                   style: TraceStyle = TraceStyle(), drills: Sequence[Drill] = (),
                   drill_cfg: DrillConfig | None = None) -> dict[str, Any]:
    """Write the dataset (see the module docstring); returns the manifest. ``style``: how the SFT rows are
    written (recorded in the manifest); ``drills`` (drawn by ``drill_cfg``): lookup-drill rows appended to the
    SFT rows, their graphs in ``drills.jsonl``."""
    datasets = _require_datasets()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    problems = list(problems)
    if not problems and not drills:
        raise ValueError("export_dataset: no problems or drills to export")
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise ValueError(f"export_dataset: duplicate problem id {dup!r}")

    content_hash = _write_jsonl(out / "problems.jsonl", [p.to_dict() for p in problems])
    sft = to_sft_rows(problems, encoding, style)
    sft += [{**d.row(), "source_id": d.id} for d in drills]
    grpo = to_grpo_rows(problems, encoding, style.system)
    hashes = {"problems.jsonl": content_hash, "sft.jsonl": _write_jsonl(out / "sft.jsonl", sft),
              "grpo.jsonl": _write_jsonl(out / "grpo.jsonl", grpo)}
    if drills:
        hashes["drills.jsonl"] = _write_jsonl(out / "drills.jsonl", [drill_graph_record(d) for d in drills])
    else:
        (out / "drills.jsonl").unlink(missing_ok=True)  # a rewritten folder keeps no stale drills
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        dd = datasets.DatasetDict({"sft": datasets.Dataset.from_list(sft), "grpo": datasets.Dataset.from_list(grpo)})
        dd["sft"].to_parquet(str(out / "sft.parquet"))
        dd["grpo"].to_parquet(str(out / "grpo.parquet"))
        dd.save_to_disk(str(out / "hf"))
    finally:
        if bars:
            datasets.enable_progress_bars()

    cfg_dict = cfg.to_dict() if hasattr(cfg, "to_dict") else (dict(cfg) if cfg else None)
    manifest = {
        "name": out.name,
        "generator": "calver.data_gen",
        "calver_version": calver.__version__,
        "contract_version": CONTRACT_VERSION,
        "python": platform.python_version(),
        "datasets_version": datasets.__version__,
        "seed": cfg_dict.get("seed") if cfg_dict else None,
        "config": cfg_dict,
        "encoding_override": encoding,
        **style.manifest(),
        "n_rows": len(problems),
        "n_drills": len(drills),
        "drill_config": asdict(drill_cfg) if drills and drill_cfg is not None else None,
        "tasks": dict(sorted(Counter(p.task for p in problems).items())),
        "content_hash": content_hash,
        "content_hash_of": "sha256 of problems.jsonl (one Problem.to_dict() per line, sorted keys, compact)",
        "file_sha256": hashes,
        "columns": {"sft": list(SFT_COLUMNS), "grpo": list(GRPO_COLUMNS)},
    }
    if extra_card:
        manifest.update(extra_card)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "README.md").write_text(dataset_card(manifest, problems), encoding="utf-8")
    return manifest


def dataset_card(manifest: dict[str, Any], problems: Sequence[Problem]) -> str:
    n_valid = [p.meta["n_valid"] for p in problems if "n_valid" in p.meta]
    many = sum(1 for v in n_valid if v >= 2)
    tasks = "\n".join(f"| {t} | {c} |" for t, c in manifest["tasks"].items())
    cfg = json.dumps(manifest["config"], indent=2, sort_keys=True) if manifest["config"] else "(not recorded)"
    drill_cfg = manifest.get("drill_config") or {}
    drilled = (f"\n- `sft` ends with {manifest['n_drills']} drills (`calver.data_gen.drills`, kinds "
               f"{', '.join(drill_cfg.get('kinds', ()))}): short rows without a trace, whose graphs are in "
               "`drills.jsonl`." if manifest.get("n_drills") else "")
    return f"""---
pretty_name: calver synthetic causal-graph problems ({manifest['name']})
tags: [causal-reasoning, calver, synthetic]
configs:
- config_name: sft
  data_files: sft.parquet
- config_name: grpo
  data_files: grpo.parquet
---

# {manifest['name']}

Synthetic problems from `calver.data_gen` (calver {manifest['calver_version']}, contract
`{manifest['contract_version']}`). Each row's graph is supplied in the prompt; its validity class
(every valid answer) is a label in `problem_json.meta` / `validity_class_json`: strip it before
any selector sees a row.

- rows: {manifest['n_rows']}; seed: {manifest['seed']}
- content hash (sha256 of `problems.jsonl`): `{manifest['content_hash']}`
- rows with >= 2 valid answers (many-satisfier regime): {many} of {len(n_valid)}

| task | rows |
|---|---|
{tasks}

## Splits

- `sft`: TRL chat format, `messages` = system (contract instructions), user (problem), assistant
  (a canonical six-slot trace for a valid answer drawn at random from the validity class; it
  scores 6 under `calver.verifier.score`).
- `grpo`: `prompt` (system + user) plus `problem_json` for the reward function
  (`Problem.from_dict(json.loads(row["problem_json"]))`).{drilled}

Files: `problems.jsonl`, `sft.jsonl`, `grpo.jsonl`, `sft.parquet`, `grpo.parquet`, `hf/`
(`datasets.load_from_disk`), `manifest.json`.

## Generator config

```json
{cfg}
```
"""
