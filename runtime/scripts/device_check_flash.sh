#!/usr/bin/env bash
# Flash attention on the GPU machine in one run: the kernel tests (against a double reference and the eager
# path), the model's flash variants, zrun training flash vs eager, compute-sanitizer (memcheck on every flash
# test, racecheck and synccheck on small cases), then the benchmark against torch (bench_flash.sh).
# Binaries from ZRUN_BIN_DIR (built on the build machine and carried); everything is logged to $OUT/flash.log.
#   ZRUN_BIN_DIR=.devcarry/flash bash .devcarry/flash/device_check_flash.sh        (device tool)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export ZRUN_BIN_DIR=${ZRUN_BIN_DIR:-.devcarry/flash}
source "$HERE/device_env.sh"
SAN=/usr/local/cuda/bin/compute-sanitizer
LOG="$OUT/flash.log"
rc=0
step() {  # step NAME TIMEOUT_S CMD...: runs CMD, logs it, notes a failure
  local name=$1 t=$2
  shift 2
  echo "=== $name: $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$t" "$@" >>"$LOG" 2>&1
  local r=$?
  echo "=== $name: rc=$r in $((SECONDS - t0)) s" | tee -a "$LOG"
  [ $r -eq 0 ] || rc=1
}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
step flash_tests 60 "$BIN/zrun_flash_attention_gpu_tests"
step model_tests 60 "$BIN/zrun_model_gpu_tests"
step train_flash_vs_eager 90 env ZRUN_BIN="$BIN/zrun" "$BIN/zrun_train_gpu_test" --gtest_filter='*Flash*'
step train_all 240 env ZRUN_BIN="$BIN/zrun" "$BIN/zrun_train_gpu_test"
for att in eager flash; do  # a step of the tiny model at seq 1024, micro-batch 4: time and activation peak
  step "zrun_seq1024_$att" 60 "$BIN/zrun" runtime/scenarios/tiny-zero3-1xh100.yaml --here --steps 5 --warmup 2 \
    --set model.attention=$att --set training.seq_len=1024 --set training.micro_batch=4 \
    --set deepspeed.zero_optimization.stage=0
done
step memcheck_flash_tests 120 "$SAN" --tool memcheck --error-exitcode 3 "$BIN/zrun_flash_attention_gpu_tests"
step memcheck_model_flash 60 "$SAN" --tool memcheck --error-exitcode 3 "$BIN/zrun_model_gpu_tests" --gtest_filter='*Flash*'
step racecheck_small 120 "$SAN" --tool racecheck --error-exitcode 3 "$BIN/zrun_flash_attention_gpu_tests" \
  --gtest_filter='*ShortSequence*:*Fp16HeadDim128*'
step synccheck_small 60 "$SAN" --tool synccheck --error-exitcode 3 "$BIN/zrun_flash_attention_gpu_tests" \
  --gtest_filter='*ShortSequence*'
step bench 150 bash "$HERE/bench_flash.sh"
grep -E "^  step |^=== zrun|time per step|TFLOPS per GPU|^  activations|^  buffer |peak \(all|^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED|ERROR SUMMARY|RACECHECK SUMMARY|^  \[|rc=|ratio|^b=|RESULT|Failure" "$LOG" | head -120
echo "device_check_flash: rc=$rc" | tee -a "$LOG"
exit $rc
