#!/usr/bin/env bash
# ZeRO++ inside a zrun step against raw, in the same run (issue 14's benchmark): every qwZ quantize / dequantize op of
# a stage-3 step of a ~0.5B model (its measured time, --json `measured.quantization`) against kernels/' kernel_bench
# --qwz at the same size; the ratio is the op's rate over the raw kernel's (target >= 0.9). Prints the step too.
# The int8 / int4 collectives against raw NCCL need 2+ GPUs (device_check_2gpu_stage3.sh runs the ZeRO++ tests there).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash .devcarry/exec/bench_zeropp.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
ARGS="$S --here --set deepspeed.zero_optimization.stage=3 --set deepspeed.zero_optimization.zero_quantized_weights=true
  --set model.layers=8 --set model.hidden=2048 --set model.ffn_hidden=5632 --set model.heads=16 --set model.kv_heads=8
  --set model.vocab=32000 --set training.seq_len=1024 --set training.micro_batch=4 --steps 10 --warmup 3"
"$BIN/zrun" $ARGS --json "$OUT/qwz_step.json" > "$OUT/qwz_step.log" 2>&1 || { tail -20 "$OUT/qwz_step.log"; exit 1; }
grep -E "time per step|TFLOPS|peak \(all" "$OUT/qwz_step.log"
SIZES=$($PY -c "import json; q=json.load(open('$OUT/qwz_step.json'))['measured']['quantization']; print(' '.join(sorted({str(o['elements']) for o in q if o['dtype']=='int8'}, key=int)))")
"$BIN/kernel_bench" --qwz $SIZES > "$OUT/qwz_raw.txt"
$PY - "$OUT/qwz_step.json" "$OUT/qwz_raw.txt" <<'PY' | tee "$OUT/qwz_ratio.txt"
import json, statistics, sys
from collections import defaultdict
ops = json.load(open(sys.argv[1]))["measured"]["quantization"]
raw = {}
for line in open(sys.argv[2]):
    f = line.split()
    raw[int(f[1])] = {"quantize": float(f[3]) * 1e-3, "dequantize": float(f[5]) * 1e-3}
by = defaultdict(list)
for o in ops:
    if o["dtype"] == "int8":
        by[(o["compute"], o["elements"])].append(o["seconds"])
print(f"{'op':<12} {'elements':>10} {'ops':>4} {'in step ms':>11} {'raw ms':>9} {'ratio':>6}")
total_step = total_raw = 0.0
for (kind, n), ts in sorted(by.items()):
    step = statistics.median(ts)
    r = raw[n][kind]
    total_step += step * len(ts)
    total_raw += r * len(ts)
    print(f"{kind:<12} {n:>10} {len(ts):>4} {step*1e3:>11.4f} {r*1e3:>9.4f} {r/step:>6.2f}")
print(f"all qwZ kernels of the step: {total_step*1e3:.3f} ms in the step, {total_raw*1e3:.3f} ms raw: ratio "
      f"{total_raw/total_step:.2f} (target >= 0.90)")
PY
