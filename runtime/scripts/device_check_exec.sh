#!/usr/bin/env bash
# zrun on the GPU machine (one GPU): its GPU tests, then the tiny scenario at ZeRO stages 0 and 3 with the measured
# report, trace and CSV under $OUT. Binaries come from ZRUN_BIN_DIR (built here, carried there).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/device_check_exec.sh
set -u
source "$(dirname "$0")/device_env.sh"
# The GPU tests of zrun (communicators, arena, model against its CPU reference, training and faults).
for t in zrun_gpu_tests zrun_model_gpu_tests zrun_train_gpu_test; do
  [ -x "$BIN/$t" ] && ZRUN_BIN="$BIN/zrun" "$BIN/$t" 2>&1 | tee "$OUT/$t.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran"
done
run() { echo "== $*"; "$@"; echo "exit $?"; }
ZRUN_LR=3e-3 run "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.micro_batch=8 --steps 50 --warmup 0 \
    --json "$OUT/stage0.json" --trace "$OUT/stage0_trace.json" --csv "$OUT/stage0_ops.csv" 2>&1 | tee "$OUT/stage0.log"
# The same samples as micro-batch 2 x 1 micro-step and as micro-batch 1 x 2 micro-steps: the losses must agree.
run "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --steps 5 --warmup 0 2>&1 | tee "$OUT/stage0_mb2.log"
run "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.grad_accum=2 \
    --set training.micro_batch=1 --steps 5 --warmup 0 2>&1 | tee "$OUT/stage0_ga2.log"
run "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.activation_checkpointing=none \
    --steps 5 --warmup 0 2>&1 | tee "$OUT/stage0_nockpt.log"
run "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=2 --steps 2 --warmup 0 2>&1 | tail -3
# Stage 3 (the scenario's own stage): the same losses as stage 0 (zrun_train_gpu_test checks them).
run "$BIN/zrun" $S --here --steps 5 --warmup 0 2>&1 | tee "$OUT/stage3.log"
