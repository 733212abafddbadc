#!/usr/bin/env bash
# Why the suite's NVMe steps read and write faster than calibrate's disk moments say (issue 8's worst suite cases):
# the disk from pageable memory (calibrate's moments) against pinned memory (zrun's cpu tier), six rounds each
# (offload_bench disk-buffers), then the 1-GPU optimizer-on-NVMe and parameters-on-NVMe cases as the suite runs them,
# each NVMe op's time in their --json, then the buffers again. One GPU.
# Usage: ZRUN_BIN_DIR=build/bin bash runtime/scripts/disk_buffers.sh   (carry build/bin/zrun, build/bin/offload_bench)
set -u
source "$(dirname "$0")/device_env.sh"
mkdir -p /tmp/zrun-nvme  # the suite cases' nvme_path
"$BIN/offload_bench" disk-buffers /tmp | tee "$OUT/buffers_before.txt"
run_case() {  # name, then the suite.tsv case's overrides
  local name=$1; shift
  local sets=(); for a in "$@"; do sets+=(--set "$a"); done
  timeout 150 "$BIN/zrun" validate/suite/small.yaml --here --nproc-per-node 1 "${sets[@]}" --steps 5 --warmup 2 \
    --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(grep 'time per step' "$OUT/$name.log")"
}
while IFS=$'\t' read -r name gpus scen status args; do
  case "$name" in 1g-small-s3-opt-nvme|1g-small-s3-param-nvme) ;; *) continue ;; esac
  # shellcheck disable=SC2086
  run_case "$name" $args
done < validate/suite/suite.tsv
"$BIN/offload_bench" disk-buffers /tmp | tee "$OUT/buffers_after.txt"
