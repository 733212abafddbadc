#!/usr/bin/env bash
# The suite's cases of one size (suite.tsv's GPUs column: SIZE=2, the default, or SIZE=4x2) run with every rank on
# GPU 0 (zrun --share-gpu: each rank an NCCL host of its own, sockets on the loopback; "NxK": N ranks in virtual nodes
# of K, zrun's --gpus-per-node K), for what such a run measures truly: each rank's memory peaks per tier and category
# at that world (the partitions, buckets, hpZ's secondary partitions and buffers of N ranks), not times. Two steps
# each, --json. Writes $OUT/peaks.tgz (peaks/<case>.json and .log); `zsim validate` of each against the data-sheet
# profile gives gpu_peak.rel_error (docs/validation.md "Peaks at world 2 and 4 on one GPU").
# Usage (device tool): [SIZE=4x2] ZRUN_BIN_DIR=build/bin bash validate/suite/device_peaks_shared_gpu.sh [CASE_REGEX]
set -u
source runtime/scripts/device_env.sh  # BIN (ZRUN_BIN_DIR), OUT, and the machine's NCCL / cuBLAS libraries
SIZE=${SIZE:-2}
NPROC=${SIZE%x*}
PER_NODE=()
case "$SIZE" in *x*) PER_NODE=(--gpus-per-node "${SIZE#*x}") ;; esac
mkdir -p "$OUT/peaks" /tmp/zrun-nvme  # the NVMe offload cases' nvme_path
grep -v '^#' validate/suite/suite.tsv | while IFS=$'\t' read -r name gpus scen status sets; do
  [ "$gpus" = "$SIZE" ] && [ "$status" = ready ] || continue
  [ -n "${1:-}" ] && ! echo "$name" | grep -qE "$1" && continue
  args=()
  for kv in $sets; do args+=(--set "$kv"); done
  start=$(date +%s)
  timeout 240 "$BIN/zrun" "$scen" --here --share-gpu --nproc-per-node "$NPROC" ${PER_NODE[@]+"${PER_NODE[@]}"} \
    "${args[@]}" --steps 2 --warmup 0 --json "$OUT/peaks/$name.json" > "$OUT/peaks/$name.log" 2>&1 < /dev/null
  echo "$name: exit $?, $(($(date +%s) - start)) s"
done
tar czf "$OUT/peaks.tgz" -C "$OUT" peaks && rm -rf "$OUT/peaks"
