#!/usr/bin/env bash
# The 2-GPU cases of the suite (suite.tsv) run with both ranks on GPU 0 (zrun --share-gpu: each rank an NCCL host of
# its own, sockets on the loopback), for what such a run measures truly: each rank's memory peaks per tier and
# category at world 2 (the partitions, buckets and buffers of 2 ranks), not times. Two steps each, --json. Writes
# $OUT/peaks.tgz (peaks/<case>.json and .log); `zsim validate` of each against the data-sheet profile gives
# gpu_peak.rel_error (docs/validation.md "Peaks at world 2 on one GPU").
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/shared bash validate/suite/device_peaks_shared_gpu.sh [CASE_REGEX]
set -u
source runtime/scripts/device_env.sh  # BIN (ZRUN_BIN_DIR), OUT, and the machine's NCCL / cuBLAS libraries
mkdir -p "$OUT/peaks" /tmp/zrun-nvme  # the NVMe offload cases' nvme_path
grep -v '^#' validate/suite/suite.tsv | while IFS=$'\t' read -r name gpus scen status sets; do
  [ "$gpus" = 2 ] && [ "$status" = ready ] || continue
  [ -n "${1:-}" ] && ! echo "$name" | grep -qE "$1" && continue
  args=()
  for kv in $sets; do args+=(--set "$kv"); done
  start=$(date +%s)
  timeout 240 "$BIN/zrun" "$scen" --here --share-gpu --nproc-per-node 2 "${args[@]}" --steps 2 --warmup 0 \
    --json "$OUT/peaks/$name.json" > "$OUT/peaks/$name.log" 2>&1 < /dev/null
  echo "$name: exit $?, $(($(date +%s) - start)) s"
done
tar czf "$OUT/peaks.tgz" -C "$OUT" peaks && rm -rf "$OUT/peaks"
