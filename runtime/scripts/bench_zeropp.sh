#!/usr/bin/env bash
# ZeRO++ inside a zrun step against raw, in the same run (issue 14's benchmark): every qwZ quantize / dequantize op of
# a stage-3 step of a ~0.5B model (its measured time, --json `measured.quantization`) against kernels/' kernel_bench
# --qwz at the same size; the ratio is the op's rate over the raw kernel's (target >= 0.9). Prints the step too.
# Then, where libzrun_kernel_trace.so is carried, the same with each kernel timed by CUPTI in steps without timing
# events and in kernel_bench (the op-timed figures also hold the op's two timing events; docs/runtime.md "ZeRO++").
# The int8 / int4 collectives against raw NCCL need 2+ GPUs: runtime/scripts/bench_collectives_2gpu.sh.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash .devcarry/exec/bench_zeropp.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
ARGS="$S --here --set deepspeed.zero_optimization.stage=3 --set deepspeed.zero_optimization.zero_quantized_weights=true
  $BENCH_MODEL --steps 10 --warmup 3"
# Twice: as configured (the next layer's gather, its quantize included, prefetched beside this layer's GEMMs), and
# with stage3_prefetch_bucket_size 0 (no prefetch: each gather runs while the compute stream waits for it, so the
# quantize kernels have the GPU to themselves; zsim's schedule of it overlaps no quantize with compute). The target
# (>= 0.9 of kernel_bench's rate) is the second's: a kernel beside GEMMs shares the SMs and HBM with them, which zsim
# prices apart (efficiency.beside_compute).
for RUN in prefetch alone; do
  EXTRA=""
  [ "$RUN" = alone ] && EXTRA="--set deepspeed.zero_optimization.stage3_prefetch_bucket_size=0"
  "$BIN/zrun" $ARGS $EXTRA --json "$OUT/qwz_step_$RUN.json" > "$OUT/qwz_step_$RUN.log" 2>&1 || { tail -20 "$OUT/qwz_step_$RUN.log"; exit 1; }
  echo "== $RUN"
  grep -E "time per step|TFLOPS|peak \(all" "$OUT/qwz_step_$RUN.log"
done
SIZES=$($PY -c "import json; q=[o for r in ('prefetch', 'alone') for o in json.load(open('$OUT/qwz_step_'+r+'.json'))['measured']['quantization']]; print(' '.join(sorted({str(o['elements']) for o in q if o['dtype']=='int8'}, key=int)))")
"$BIN/kernel_bench" --qwz $SIZES > "$OUT/qwz_raw.txt"
$PY - "$OUT/qwz_step_prefetch.json" "$OUT/qwz_step_alone.json" "$OUT/qwz_raw.txt" <<'PY' | tee "$OUT/qwz_ratio.txt"
# The raw rate each op is held to is the kernel's with its operands where the step has them: quantize reads the
# rank's partition, untouched since the last step's optimizer (cold: from HBM); dequantize reads the int8 values the
# all-gather has just written (in L2 where they fit) into a cold output ("produced": timed after a write that evicts
# the L2 and a rewrite of its input, as zrun calibrate times a memory-bound kernel). The other raw figure printed:
# quantize hot, dequantize hot (its input and output both in L2 from the call before: the baseline until 2026-11-26).
import json, statistics, sys
from collections import defaultdict
raw = {}
for line in open(sys.argv[3]):
    f = line.split()
    raw[int(f[1])] = {"quantize": float(f[7]) * 1e-3, "dequantize": float(f[11]) * 1e-3,
                      "quantize_hot": float(f[3]) * 1e-3, "dequantize_hot": float(f[5]) * 1e-3}
for label, path in (("beside the GEMMs (prefetch on)", sys.argv[1]), ("alone (prefetch off)", sys.argv[2])):
    ops = json.load(open(path))["measured"]["quantization"]
    by = defaultdict(list)
    for o in ops:
        if o["dtype"] == "int8":
            by[(o["compute"], o["elements"])].append(o["seconds"])
    print(f"-- {label}")
    print(f"{'op':<12} {'elements':>10} {'ops':>4} {'in step ms':>11} {'raw ms':>9} {'ratio':>6}   other raw (hot)")
    total_step = total_raw = total_other = 0.0
    for (kind, n), ts in sorted(by.items()):
        step = statistics.median(ts)
        r = raw[n][kind]
        other = raw[n]["quantize_hot"] if kind == "quantize" else raw[n]["dequantize_hot"]
        total_step += step * len(ts)
        total_raw += r * len(ts)
        total_other += (r if kind == "quantize" else other) * len(ts)
        print(f"{kind:<12} {n:>10} {len(ts):>4} {step*1e3:>11.4f} {r*1e3:>9.4f} {r/step:>6.2f}   {other*1e3:.4f} ms: {other/step:.2f}")
    target = " (target >= 0.90)" if "alone" in label else ""
    print(f"all qwZ kernels of the step, {label}: {total_step*1e3:.3f} ms in the step, {total_raw*1e3:.3f} ms raw: "
          f"ratio {total_raw/total_step:.2f}{target}; with dequantize's raw hot: {total_other/total_step:.2f}")
PY
# The same kernels timed by CUPTI (libzrun_kernel_trace.so, carried beside the binaries): each kernel's own start and
# end on the GPU, in steps run without --json (no timing events at all) and in kernel_bench's raw launches. The op
# times above run from the event after the op before to the event after the op, so they hold the events' own cost
# and whatever else the stream ran between (an event another stream waits for); these hold the kernel alone.
if [ -f "$BIN/libzrun_kernel_trace.so" ]; then
  traced "$OUT/qwz_raw_trace.tsv" "$BIN/kernel_bench" --qwz $SIZES > /dev/null
  for RUN in prefetch alone; do
    EXTRA=""
    [ "$RUN" = alone ] && EXTRA="--set deepspeed.zero_optimization.stage3_prefetch_bucket_size=0"
    traced "$OUT/qwz_trace_$RUN.tsv" "$BIN/zrun" $ARGS $EXTRA > "$OUT/qwz_traced_$RUN.log" 2>&1 \
      || { tail -20 "$OUT/qwz_traced_$RUN.log"; exit 1; }
    echo "-- CUPTI, $RUN: each kernel's time in the step against kernel_bench's (quantize cold, dequantize produced)"
    grep -E "time per step" "$OUT/qwz_traced_$RUN.log"
    # 13 steps: --warmup 3 and --steps 10 of ARGS, without the op-timed one (no --json); the warm-up left out.
    $PY "$HERE/qwz_kernel_trace.py" "$OUT/qwz_raw_trace.tsv" "${SIZES// /,}" "$OUT/qwz_trace_$RUN.tsv" \
      "$OUT/qwz_step_$RUN.json" 13 3 | tee "$OUT/qwz_cupti_$RUN.txt"
  done
fi
