#!/usr/bin/env bash
# Why the suite's NVMe steps read and write faster than calibrate's disk moments say (issue 8's worst suite cases, on
# every record of the 2 x H200 kind): the disk from pageable memory (calibrate's moments) against pinned memory (zrun's
# cpu tier), six rounds each (offload_bench disk-buffers); then calibrate's own disk moment right before and after each
# of the 1-GPU parameters-on-NVMe and optimizer-on-NVMe cases as the suite runs them (their --json has each NVMe op's
# time), so that the step's transfers and calibrate's figures are minutes apart at most. One GPU.
# Usage: ZRUN_BIN_DIR=build/bin bash runtime/scripts/disk_buffers.sh   (carry build/bin/zrun, build/bin/offload_bench)
# SKIP_BUFFERS=1 leaves out the pageable / pinned rounds.
set -u
source "$(dirname "$0")/device_env.sh"
mkdir -p /tmp/zrun-nvme  # the suite cases' nvme_path
[ "${SKIP_BUFFERS:-0}" = 1 ] || "$BIN/offload_bench" disk-buffers /tmp > "$OUT/buffers.txt"
run_case() {  # name, then the suite.tsv case's overrides
  local name=$1; shift
  local sets=(); for a in "$@"; do sets+=(--set "$a"); done
  timeout 150 "$BIN/zrun" validate/suite/small.yaml --here --nproc-per-node 1 "${sets[@]}" --steps 5 --warmup 2 \
    --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $(grep 'time per step' "$OUT/$name.log")"
}
"$BIN/offload_bench" disk-moment /tmp before | tee "$OUT/moments.txt"
while IFS=$'\t' read -r name gpus scen status args; do
  case "$name" in 1g-small-s3-opt-nvme|1g-small-s3-param-nvme) ;; *) continue ;; esac
  # shellcheck disable=SC2086
  run_case "$name" $args
  "$BIN/offload_bench" disk-moment /tmp "after_$name" | tee -a "$OUT/moments.txt"
done < validate/suite/suite.tsv
