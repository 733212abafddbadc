#!/usr/bin/env bash
# qgZ's peer-major bucket (the schedule's qgz regions one block per peer, each all-to-all one piece per peer; issue
# 14), checked and measured in one call on 2 GPUs (device kind nvidia-h200-x2):
#   kernels:  kernels_gpu_tests' qgZ and LoCo tests (the chunk strides against the back-to-back layout);
#   ops:      zeropp_ops_gpu_test (the tiny model's first qgZ bucket, two ranks emulated on GPU 0);
#   zeropp:   zrun_zeropp_gpu_test with 4 ranks sharing GPU 0 (ZRUN_TEST_SHARE_GPU=4: hpZ, qgZ, LoCo at 2 nodes of
#             1 and of 2, all of ZeRO++ together), the losses against unquantized stage 3;
#   parts:    bench_all_to_all_parts.sh (zrun's inter-node all-to-all of the ~0.5B model's first bucket against raw
#             NCCL: one call of its bytes, DeepSpeed's call per tensor's values and scales).
# Results under $OUT (summary.txt, logs.tgz). Usage (device tool):
#   ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/device_check_qgz.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
mkdir -p "$OUT/logs"
nvidia-smi -L | tee "$OUT/summary.txt"
run() {  # name, limit in seconds, command...
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc, $(($(date +%s) - start)) s, $(grep -E '^\[  PASSED  \]' "$OUT/logs/$name.log" | head -1)" \
       "$(grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/logs/$name.log" | sort -u | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
}
run kernels 120 "$BIN/kernels_gpu_tests" --gtest_filter='Qgz*:Loco*'
run ops 120 "$BIN/zeropp_ops_gpu_test"
run zeropp "${ZEROPP_LIMIT:-300}" env ZRUN_TEST_SHARE_GPU=4 ZRUN_BIN="$BIN/zrun" "$BIN/zrun_zeropp_gpu_test"
grep -h "^\[ zeropp \]" "$OUT"/logs/zeropp.log | tee -a "$OUT/summary.txt"
echo "== parts" | tee -a "$OUT/summary.txt"
OUT_MAIN=$OUT
OUT=$OUT/logs bash "$HERE/bench_all_to_all_parts.sh" 2>&1 | tee -a "$OUT_MAIN/summary.txt"
OUT=$OUT_MAIN
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
