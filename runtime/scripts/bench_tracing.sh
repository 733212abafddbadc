#!/usr/bin/env bash
# What zrun's per-op tracing costs (issue 7: <= 2% of step time): a ~150M-parameter Llama-shaped model at ZeRO
# stage 0 on one GPU, the same steps with and without per-op CUDA events (--json turns them on).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/bench_tracing.sh
set -u
source "$(dirname "$0")/device_env.sh"
ARGS="runtime/scenarios/tiny-zero3-1xh100.yaml --here --set deepspeed.zero_optimization.stage=0
  --set model.layers=8 --set model.hidden=1024 --set model.ffn_hidden=2816 --set model.heads=16 --set model.kv_heads=8
  --set model.vocab=32000 --set training.seq_len=1024 --set training.micro_batch=4 --steps 20 --warmup 3"
"$BIN/zrun" $ARGS > "$OUT/untraced.log" 2>&1
"$BIN/zrun" $ARGS --json "$OUT/traced.json" > "$OUT/traced.log" 2>&1
a=$(grep "time per step" "$OUT/untraced.log" | awk '{print $4}')
b=$(grep "time per step" "$OUT/traced.log" | awk '{print $4}')
echo "untraced ${a} ms, traced ${b} ms, tracing costs $($PY -c "print(f'{($b/$a-1)*100:.2f}')")% of the step" \
  | tee "$OUT/tracing.txt"
grep -E "TFLOPS|tokens|peak|buffer|outside" "$OUT/untraced.log"
