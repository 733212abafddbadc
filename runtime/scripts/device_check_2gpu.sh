#!/usr/bin/env bash
# zrun on 2 GPUs (device kind nvidia-h200-x2): the GPU tests at world 2 (faults end every rank; stages 1-3, every
# ZeRO-1/2 reduction path, fp32 training and fp32 communication_data_type against stage 0), 2 GPUs at
# grad_accum 1 against 1 GPU at grad_accum 2 on the same samples, and the bus bandwidth of the step's all-reduce
# against raw NCCL (torch.distributed) at the same size, group and dtype. Results under $OUT.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/device_check_2gpu.sh
set -u
source "$(dirname "$0")/device_env.sh"
nvidia-smi -L
ZRUN_BIN="$BIN/zrun" "$BIN/zrun_train_gpu_test" 2>&1 | tee "$OUT/train_gpu_test_2gpu.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED|  OK|RUN) |Failure" | head -120
echo "== 2 GPUs x micro-batch 1 x grad_accum 1 against 1 GPU x micro-batch 1 x grad_accum 2"
"$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.micro_batch=1 --steps 10 --warmup 0 \
  > "$OUT/dp2.log" 2>&1
CUDA_VISIBLE_DEVICES=0 "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=0 --set training.micro_batch=1 \
  --set training.grad_accum=2 --steps 10 --warmup 0 > "$OUT/ga2.log" 2>&1
paste <(grep -E "^step" "$OUT/dp2.log" | awk '{print $4}') <(grep -E "^step" "$OUT/ga2.log" | awk '{print $4}') |
  awk '{d=($1-$2)/$2; if (d<0) d=-d; if (d>m) m=d; print} END {printf "max relative difference %.2e\n", m}' | tee "$OUT/dp2_vs_ga2.txt"
echo "== the step's all-reduce against raw NCCL"
ARGS="$S --here --set deepspeed.zero_optimization.stage=0 --set model.layers=8 --set model.hidden=1024
  --set model.ffn_hidden=2816 --set model.heads=16 --set model.kv_heads=8 --set model.vocab=32000
  --set training.seq_len=1024 --set training.micro_batch=4 --steps 10 --warmup 3"
"$BIN/zrun" $ARGS --json "$OUT/medium_dp2.json" > "$OUT/medium_dp2.log" 2>&1
grep -E "time per step|TFLOPS|tokens|peak  " "$OUT/medium_dp2.log"
SIZES=$($PY -c "import json; m=json.load(open('$OUT/medium_dp2.json'))['measured']; print(' '.join(sorted({str(c['bytes']) for c in m['collectives']})))")
/opt/torch/.venv/bin/torchrun --nproc_per_node 2 runtime/scripts/raw_collective_bench.py all_reduce $SIZES > "$OUT/raw.json" 2>"$OUT/raw.err"
$PY - "$OUT/medium_dp2.json" "$OUT/raw.json" <<'PY' | tee "$OUT/collective_ratio.txt"
import json, sys
m = json.load(open(sys.argv[1]))["measured"]
raw = {r["bytes"]: r for r in json.load(open(sys.argv[2]))}
for c in m["collectives"]:
    r = raw[c["bytes"]]
    print(f"{c['name']}: {c['bytes']} bytes on {c['group']}: zrun {c['bus_GBps']:.1f} GB/s bus, raw NCCL {r['bus_GBps']:.1f}"
          f" -> {c['bus_GBps'] / r['bus_GBps']:.2f}")
PY
