"""Pool manifests: everything needed to say which model, prompts, data and code produced a pool.

``build_manifest`` records model id + revision + content hash, adapter id + hash, prompt/contract
version, prompt style and template hash (and the hashes of the system prompts and of the rendered user
prompts), quantization,
sampling params, seeds and the per-unit seed rule, corpus hash, package and scorer versions,
backend and its version.
``fingerprint`` is the subset that must match for a run to resume into an existing pool.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

SCHEMA = "calver-pool/1"
UNIT_SEED_RULE = "int(sha256(f'{seed}:{problem_id}').hexdigest()[:8], 16) & 0x7fffffff"
UNIT_ORDER = "problems in file order (after tasks/limit), then seeds in config order"
SHARD_RULE = "unit i of the canonical unit order belongs to shard i % num_shards"
_FAST_CHUNK = 1 << 20


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prompts_hash(texts: Iterable[str]) -> str:
    """sha256 of ``texts`` in order (each length-prefixed, so no two lists share a hash)."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode()
        h.update(b"%d:" % len(b) + b)
    return "sha256:" + h.hexdigest()


def unit_seed(seed: int, problem_id: str) -> int:
    """The sampler seed of one (problem, seed) unit: independent of batching, order and resumes."""
    return int(hashlib.sha256(f"{seed}:{problem_id}".encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def canonical_units(problem_ids: Iterable[str], seeds: Iterable[int]) -> list[tuple[str, int]]:
    """Every (problem_id, seed) unit of a pool in canonical order: problems in file order, then seeds."""
    seeds = list(seeds)
    return [(pid, s) for pid in problem_ids for s in seeds]


def shard_units(units: list[tuple[str, int]], shard: int, num_shards: int) -> list[tuple[str, int]]:
    """The units of shard ``shard`` of ``num_shards``: those at canonical index i with i % num_shards == shard."""
    return units[shard::num_shards]


def hash_dir(path: str | Path, mode: str = "full", exclude: Iterable[str] = ()) -> str | None:
    """Content hash of a model/adapter directory (``full``: every byte; ``fast``: names, sizes and the
    first/last MiB of each file; ``none``: not hashed), leaving out hidden files and the relative paths in
    ``exclude``. None if ``path`` is not a local directory."""
    root = Path(path)
    if mode == "none" or not root.is_dir():
        return None
    skip = set(exclude)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*")
                    if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
                    and p.relative_to(root).as_posix() not in skip):
        rel = f.relative_to(root).as_posix()
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if mode == "fast" and size > 2 * _FAST_CHUNK:
                h.update(fh.read(_FAST_CHUNK))
                fh.seek(size - _FAST_CHUNK)
                h.update(fh.read(_FAST_CHUNK))
            else:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
    return f"sha256{'-fast' if mode == 'fast' else ''}:{h.hexdigest()}"


def _revision_from_path(path: str) -> str | None:
    m = re.search(r"/snapshots/([0-9a-f]{40})(?:/|$)", str(Path(path).resolve()) if Path(path).exists() else path)
    return m.group(1) if m else None


def _model_id(path: str) -> str:
    m = re.search(r"models--([^/]+?)--([^/]+)/snapshots", path)
    return f"{m.group(1)}/{m.group(2)}" if m else (Path(path).name if Path(path).exists() else path)


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_hub_id(model: str) -> bool:
    """Whether ``model`` names a hub repository (``org/name``) rather than a local directory."""
    return not Path(model).exists() and bool(_HUB_ID.match(model))


def resolve_hub_model(model: str, revision: str | None = None) -> tuple[str, str | None]:
    """A hub id's local snapshot directory and its commit, so a pool records (and samples) exactly the
    revision it was drawn from; a local path comes back unchanged. Uses the Hugging Face cache (and the hub,
    unless ``HF_HUB_OFFLINE`` is set). Raises ``ValueError`` when the id cannot be resolved."""
    if not is_hub_id(model):
        return model, revision
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError as e:
        raise ValueError(f"model {model!r} is a hub id; resolving its revision needs huggingface_hub ({e})") from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        path = snapshot_download(model, revision=revision, local_files_only=offline)
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as e:
        raise ValueError(f"model {model!r}: cannot resolve the hub id to a local snapshot "
                         f"({type(e).__name__}: {e})") from None
    commit = _revision_from_path(path)
    return path, commit or revision


def model_record(path: str | None, revision: str | None = None, hash_mode: str = "full") -> dict[str, Any] | None:
    if path is None:
        return None
    rec: dict[str, Any] = {
        "path": str(path),
        "id": _model_id(str(path)),
        "revision": revision or _revision_from_path(str(path)),
        "content_hash": hash_dir(path, hash_mode),
    }
    c = _read_json(Path(path) / "config.json")
    if c is not None:
        rec["architectures"] = c.get("architectures")
        rec["quantization_config"] = c.get("quantization_config")
    a = _read_json(Path(path) / "adapter_config.json")
    if a is not None:
        rec["base_model"] = a.get("base_model_name_or_path")
        rec["lora_rank"] = a.get("r")
    return rec


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is absent or unreadable (manifest is best effort)."""
    try:
        data = json.loads(path.read_text())
    except (ValueError, OSError):
        return None
    return data if isinstance(data, dict) else None


def package_version(name: str) -> str | None:
    """Installed version of ``name`` (distribution metadata, else the imported module's __version__)."""
    for dist in (name, f"{name}-cpu", name.replace("_", "-")):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    mod = sys.modules.get(name)
    if mod is None:
        try:
            import importlib

            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - importing runs the package's code; a broken install records no version
            return None
    v = getattr(mod, "__version__", None)
    return str(v) if v is not None else None


def scorer_version() -> dict[str, str]:
    """The contract version plus a hash of the verifier's source (any scorer change shows up)."""
    import calver.verifier as v
    from calver.verifier import CONTRACT_VERSION

    root = Path(v.__file__).parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return {"contract_version": CONTRACT_VERSION, "source_hash": "sha256:" + h.hexdigest()}


def corpus_hash(problem_rows: Iterable[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for row in problem_rows:
        h.update(json.dumps(row, sort_keys=True, default=list).encode() + b"\n")
    return "sha256:" + h.hexdigest()


def build_manifest(cfg, *, problem_rows: list[dict[str, Any]], system_prompts: dict[str, str],
                   user_prompts: Iterable[str], backend: str, prompt_style: str = "zero_shot",
                   template_hash: str | None = None,
                   response_prefixes: dict[str, str] | None = None) -> dict[str, Any]:
    """The manifest of a pool sampled with ``cfg`` (a :class:`SampleConfig`) on ``backend``;
    ``user_prompts``: the rendered user turn of each problem, in ``problem_rows`` order;
    ``prompt_style`` / ``template_hash``: :mod:`calver.data_gen.prompt_styles`'s spec and hash;
    ``response_prefixes``: per task, the trace start the prompt wrote and each stored text begins with."""
    import calver

    backend_pkg = {"vllm": "vllm", "hf": "transformers"}.get(backend, backend)
    model = model_record(cfg.model, cfg.model_revision, cfg.model_hash)
    quant = cfg.quantization if cfg.quantization is not None else (model or {}).get("quantization_config")
    n_units = len(problem_rows) * len(cfg.seeds)
    num_shards = getattr(cfg, "num_shards", 1)
    shard = getattr(cfg, "shard", 0)
    manifest = {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "adapter": model_record(cfg.adapter, None, "full" if cfg.model_hash != "none" else "none"),
        "prompt": {
            "version": cfg.prompt_version,
            "style": prompt_style,
            "template_hash": template_hash,
            "system_prompt_hashes": {t: sha256_text(s) for t, s in sorted(system_prompts.items())},
            "user_prompts_hash": prompts_hash(user_prompts),
        },
        "quantization": quant,
        "sampling": {
            "k": cfg.k, "temperature": cfg.temperature, "top_p": cfg.top_p, "max_tokens": cfg.max_tokens,
            "stop": cfg.stop, "sampler_kwargs": cfg.sampler_kwargs,
        },
        "seeds": list(cfg.seeds),
        "unit_seed_rule": UNIT_SEED_RULE,
        "corpus": {"path": str(cfg.problems), "hash": corpus_hash(problem_rows), "n_problems": len(problem_rows),
                   "limit": cfg.limit, "tasks": cfg.tasks},
        "versions": {
            "calver": getattr(calver, "__version__", None),
            "scorer": scorer_version(),
            "python": platform.python_version(),
            "torch": package_version("torch"),
            "transformers": package_version("transformers"),
        },
        "backend": {"name": backend, "version": package_version(backend_pkg)},
        "selector_context": dict(cfg.selector_context),
        "n_units": n_units,
        "unit_order": UNIT_ORDER,
    }
    if response_prefixes:
        manifest["prompt"]["response_prefixes"] = dict(sorted(response_prefixes.items()))
    if num_shards > 1:  # an unsharded pool (and a merged one) has no shard block
        manifest["shard"] = {"index": shard, "num_shards": num_shards, "rule": SHARD_RULE,
                             "n_units": len(range(shard, n_units, num_shards))}
    return manifest


FINGERPRINT_KEYS = ("model.content_hash", "model.revision", "model.id", "adapter", "prompt", "quantization",
                    "sampling", "seeds", "corpus.hash", "backend.name", "shard")


def fingerprint(manifest: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key in FINGERPRINT_KEYS:
        cur: Any = manifest
        for part in key.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        out[key] = cur
    return out


def mismatches(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    a, b = fingerprint(old), fingerprint(new)
    return [k for k in FINGERPRINT_KEYS
            if json.dumps(a[k], sort_keys=True, default=str) != json.dumps(b[k], sort_keys=True, default=str)]
