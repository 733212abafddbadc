#!/usr/bin/env bash
# Every GPU test of the repo in one device call (kernels, zrun's communicators / arena, model, flash attention,
# training on every stage and reduction path, offload), then short zrun runs of the tiny scenario with flash and
# with CPU offload. One log per binary under $OUT plus summary.txt. Runs at the world size of the visible GPUs.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash .devcarry/exec/device_check_all.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
mkdir -p "$OUT/logs"
nvidia-smi -L | tee "$OUT/summary.txt"
# The CUPTI kernel tracer and, where carried, the CUPTI library it links.
export ZRUN_KERNEL_TRACE_LIB="$(realpath "$BIN")/libzrun_kernel_trace.so" LD_LIBRARY_PATH=$(realpath "$BIN"):$LD_LIBRARY_PATH
for t in kernels_gpu_tests zrun_gpu_tests zrun_model_gpu_tests zrun_flash_attention_gpu_tests zrun_train_gpu_test \
         zrun_zeropp_gpu_test zeropp_ops_gpu_test zrun_offload_gpu_test zrun_nvme_host_test zrun_elementwise_gpu_test \
         kernel_trace_gpu_test; do
  [ -x "$BIN/$t" ] || { echo "$t: not carried" | tee -a "$OUT/summary.txt"; continue; }
  start=$(date +%s)
  ZRUN_BIN="$BIN/zrun" "$BIN/$t" > "$OUT/logs/$t.log" 2>&1
  rc=$?
  echo "$t: exit $rc, $(($(date +%s) - start)) s, $(grep -E '^\[  PASSED  \]' "$OUT/logs/$t.log" | head -1)" \
       "$(grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/logs/$t.log" | sort -u | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
echo "== tiny scenario, stage 3, flash attention" | tee -a "$OUT/summary.txt"
"$BIN/zrun" $S --here --set model.attention=flash --steps 5 --warmup 1 > "$OUT/logs/flash_stage3.log" 2>&1
echo "exit $?" | tee -a "$OUT/summary.txt"; grep -E "^step|time per step" "$OUT/logs/flash_stage3.log" | tail -3 | tee -a "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
