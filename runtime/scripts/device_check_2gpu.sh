#!/usr/bin/env bash
# zrun on 2 GPUs (device kind nvidia-h200-x2), the correctness half; bench_collectives_2gpu.sh is the speed half.
#   tests: the GPU tests at world 2: training (faults end every rank; stages 1-3, every ZeRO-1/2 reduction path, fp32
#          training and fp32 communication_data_type against stage 0), ZeRO++ (qwZ, hpZ on 1 node of 2, qgZ and LoCo
#          on 2 virtual nodes of 1, LoCo's error against qgZ's, all of them together) and offload;
#   ga:    2 GPUs at grad_accum 1 against 1 GPU at grad_accum 2 on the same samples;
#   fsdp:  zrun ZeRO-3 against PyTorch FSDP2 at ~1B and ~6B parameters (compare_fsdp2.sh).
# Results under $OUT (summary.txt, one log per part). Usage (device tool):
#   ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/device_check_2gpu.sh [tests] [ga] [fsdp]   (default: all three)
# T_LIMIT: seconds for each test binary (default 300; on 2 H200 training took 150 s, offload over 180).
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
PARTS="${*:-tests ga fsdp}"
nvidia-smi -L | tee -a "$OUT/summary.txt"
if [[ " $PARTS " == *" tests "* ]]; then
  for t in zrun_train_gpu_test zrun_zeropp_gpu_test zrun_offload_gpu_test; do
    start=$(date +%s)
    ZRUN_BIN="$BIN/zrun" timeout "${T_LIMIT:-300}" "$BIN/$t" > "$OUT/$t.log" 2>&1
    rc=$?
    echo "$t at world 2: exit $rc, $(($(date +%s) - start)) s, $(grep -E '^\[  PASSED  \]' "$OUT/$t.log" | head -1)" \
         "$(grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/$t.log" | sort -u | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
    grep -E "^\[ zeropp \]" "$OUT/$t.log" | tee -a "$OUT/summary.txt"
  done
fi
if [[ " $PARTS " == *" ga "* ]]; then
  echo "== 2 GPUs x micro-batch 1 x grad_accum 1 against 1 GPU x micro-batch 1 x grad_accum 2" | tee -a "$OUT/summary.txt"
  timeout 120 "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.micro_batch=1 --steps 10 \
    --warmup 0 > "$OUT/dp2.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout 120 "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 \
    --set training.micro_batch=1 --set training.grad_accum=2 --steps 10 --warmup 0 > "$OUT/ga2.log" 2>&1
  paste <(grep -E "^step" "$OUT/dp2.log" | awk '{print $4}') <(grep -E "^step" "$OUT/ga2.log" | awk '{print $4}') |
    awk '{d=($1-$2)/$2; if (d<0) d=-d; if (d>m) m=d} END {printf "max relative difference over %d steps %.2e\n", NR, m}' |
    tee -a "$OUT/summary.txt"
fi
if [[ " $PARTS " == *" fsdp "* ]]; then
  echo "== zrun ZeRO-3 against FSDP2" | tee -a "$OUT/summary.txt"
  for size in 1b 6b; do timeout 240 bash "$HERE/compare_fsdp2.sh" $size 2>&1 | tee -a "$OUT/summary.txt"; done
fi
