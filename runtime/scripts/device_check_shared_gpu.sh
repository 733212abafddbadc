#!/usr/bin/env bash
# The multi-GPU tests on a one-GPU machine: every rank on GPU 0 (zrun --share-gpu, each rank an NCCL host of its
# own, sockets on the loopback; ZRUN_TEST_SHARE_GPU=N makes the tests run as on N GPUs). Checks the multi-rank paths
# (reductions over several ranks, ZeRO++'s groups, offload at world > 1), not their speed. A smoke run first, then
# the test binaries given (default: training at 2 ranks, ZeRO++ at 4, offload and calibrate at 2). One log per binary under $OUT.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash .devcarry/exec/device_check_shared_gpu.sh [BIN:N ...]
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
mkdir -p "$OUT/logs"
nvidia-smi -L | tee "$OUT/summary.txt"
echo "== smoke: tiny scenario, stage 3, 2 ranks as 2 virtual nodes of 1 on GPU 0" | tee -a "$OUT/summary.txt"
"$BIN/zrun" $S --here --share-gpu --nproc-per-node 2 --gpus-per-node 1 --steps 3 --warmup 0 \
  > "$OUT/logs/smoke.log" 2>&1
echo "exit $?" | tee -a "$OUT/summary.txt"
grep -E "met at|^step|time per step" "$OUT/logs/smoke.log" | tail -4 | tee -a "$OUT/summary.txt"
RUNS=${*:-"zrun_train_gpu_test:2 zrun_zeropp_gpu_test:4 zrun_offload_gpu_test:2 zrun_calibrate_gpu_test:2"}
for run in $RUNS; do
  t=${run%%:*}; n=${run##*:}
  [ -x "$BIN/$t" ] || { echo "$t: not carried" | tee -a "$OUT/summary.txt"; continue; }
  start=$(date +%s)
  ZRUN_TEST_SHARE_GPU=$n ZRUN_BIN="$BIN/zrun" "$BIN/$t" > "$OUT/logs/$t.$n.log" 2>&1
  rc=$?
  echo "$t at $n ranks: exit $rc, $(($(date +%s) - start)) s, $(grep -E '^\[  PASSED  \]' "$OUT/logs/$t.$n.log" | head -1)" \
       "$(grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/logs/$t.$n.log" | sort -u | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
grep -h "^\[ zeropp \]" "$OUT"/logs/*.log | tee -a "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
