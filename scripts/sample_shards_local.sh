#!/usr/bin/env bash
# Sharded K-candidate pool sampling on one node: one `calver sample` shard per visible GPU, then merge.
#
#   scripts/sample_shards_local.sh CONFIG.yaml OUT_POOL [--field value ...]
#
# GPUS (default: CUDA_VISIBLE_DEVICES, else every GPU nvidia-smi lists) picks the devices, e.g.
# GPUS=0,1,2,3. Shard I of N = #GPUS runs on GPU GPUS[I] with CUDA_VISIBLE_DEVICES set to it alone and
# writes OUT_POOL.shards/shard-I (log: shard-I.log beside it). When every shard succeeded, the shards are
# merged into OUT_POOL (`calver pool merge`, which checks them). Rerunning resumes unfinished shards.
# For tensor parallel (a model over G GPUs per shard) set GPUS_PER_SHARD=G and
# `sampler_kwargs: {tensor_parallel_size: G}` in the config: shard I gets GPUs GPUS[I*G .. I*G+G-1].
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
CONFIG=$1
OUT=$2
shift 2
CALVER=${CALVER:-calver}
GPUS_PER_SHARD=${GPUS_PER_SHARD:-1}

if [ -z "${GPUS:-}" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    GPUS=$CUDA_VISIBLE_DEVICES
  else
    GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
  fi
fi
IFS=, read -r -a DEVS <<<"$GPUS"
if [ "${#DEVS[@]}" -lt "$GPUS_PER_SHARD" ] || [ $(( ${#DEVS[@]} % GPUS_PER_SHARD )) -ne 0 ]; then
  echo "sample_shards_local.sh: ${#DEVS[@]} GPU(s) ($GPUS) is not a multiple of GPUS_PER_SHARD=$GPUS_PER_SHARD" >&2
  exit 2
fi
N=$(( ${#DEVS[@]} / GPUS_PER_SHARD ))
mkdir -p "$OUT.shards"

pids=()
for ((i = 0; i < N; i++)); do
  devs=$(IFS=,; echo "${DEVS[*]:$((i * GPUS_PER_SHARD)):$GPUS_PER_SHARD}")
  echo "shard $i/$N on GPU(s) $devs -> $OUT.shards/shard-$i" >&2
  CUDA_VISIBLE_DEVICES=$devs $CALVER sample --config "$CONFIG" --out "$OUT.shards/shard-$i" \
    --shard "$i" --num_shards "$N" "$@" >"$OUT.shards/shard-$i.log" 2>&1 &
  pids+=($!)
done

failed=0
for ((i = 0; i < N; i++)); do
  if ! wait "${pids[$i]}"; then
    echo "shard $i failed; see $OUT.shards/shard-$i.log (rerun this script to resume)" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1

if [ -e "$OUT/FROZEN" ]; then
  echo "$OUT is already merged and frozen" >&2
  exit 0
fi
shards=()
for ((i = 0; i < N; i++)); do shards+=("$OUT.shards/shard-$i"); done
$CALVER pool merge --out "$OUT" "${shards[@]}"
