#!/usr/bin/env bash
# ZeRO-Offload on the GPU machine (one GPU), in one run: the NVMe store's host tests (io_uring and O_DIRECT on this
# machine's file system), zrun's offload GPU tests (CPU offload against the GPU optimizer, NVMe against CPU, the
# kill-tests), then the offload benchmark (runtime/scripts/bench_offload.sh). Logs under $OUT.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/offload bash runtime/scripts/device_check_offload.sh
set -u
source "$(dirname "$0")/device_env.sh"
echo "== file systems: /tmp $(stat -f -c %T /tmp), \$OUT $(stat -f -c %T "$OUT")"
for t in zrun_nvme_host_test zrun_offload_gpu_test; do
  echo "== $t"
  ZRUN_BIN="$BIN/zrun" "$BIN/$t" 2>&1 | tee "$OUT/$t.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|relative|Skipped|skip"
done
echo "== benchmark"
bash "$(dirname "$0")/bench_offload.sh" 2>&1 | tee "$OUT/bench_offload.log"
