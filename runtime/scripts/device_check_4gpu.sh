#!/usr/bin/env bash
# zrun's tests that need 4 GPUs, on a 4-GPU machine (device kind nvidia-h200-x4 or nvidia-h100-x4): ZeRO++ on 2 nodes
# of 2 (--nproc-per-node 4 --gpus-per-node 2: hpZ, qgZ, LoCo, and all of them together, against stage 3 on the same
# ranks) and the whole offload test (hpZ with offload_param cpu needs 4; the others run at world 2 beside it).
# Results under $OUT (summary.txt, one log per binary). Usage (device tool, carry .devcarry/exec):
#   ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/device_check_4gpu.sh
# T_LIMIT: seconds for each test binary (default 500: on 4 H200 the offload binary ran past 280 s; the ZeRO++ filter
# takes about 40 s).
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
NGPU=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee -a "$OUT/summary.txt"
[ "$NGPU" -ge 4 ] || { echo "device_check_4gpu.sh: needs 4 GPUs, $NGPU visible" | tee -a "$OUT/summary.txt"; exit 2; }
run_test() {  # binary, gtest filter
  local start rc
  start=$(date +%s)
  ZRUN_BIN="$BIN/zrun" timeout "${T_LIMIT:-500}" "$BIN/$1" --gtest_filter="$2" > "$OUT/$1.log" 2>&1
  rc=$?
  echo "$1 ($2) on $NGPU GPUs: exit $rc, $(($(date +%s) - start)) s, $(grep -E '^\[  PASSED  \]' "$OUT/$1.log" | head -1)" \
       "$(grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/$1.log" | sort -u | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  grep -E "^\[ (zeropp|offload) \]" "$OUT/$1.log" | tee -a "$OUT/summary.txt"
}
run_test zrun_zeropp_gpu_test '*TwoNodesOfTwo*'
run_test zrun_offload_gpu_test '*'
