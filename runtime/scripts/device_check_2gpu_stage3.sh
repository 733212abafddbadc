#!/usr/bin/env bash
# zrun's ZeRO-3 on 2 GPUs (device kind nvidia-h200-x2), issue 7's open items in one run:
#  1. the stage-3 GPU tests at world 2 (losses against stage 0, every fetch variant);
#  2. the stage-3 step's all-gathers and reduce-scatters against raw NCCL (torch.distributed) at the same sizes
#     in the same run: per kind, the bytes-weighted bus bandwidth of zrun over that of raw NCCL;
#  3. zrun ZeRO-3 against PyTorch FSDP2 at ~1B and ~6B parameters (compare_fsdp2.sh).
# Results under $OUT. Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash .devcarry/exec/device_check_2gpu_stage3.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
nvidia-smi -L
echo "== 1. stage-3 GPU tests at world 2"
ZRUN_BIN="$BIN/zrun" "$BIN/zrun_train_gpu_test" --gtest_filter='*Stage3*:*Stage1*:*Stage2*' 2>&1 |
  tee "$OUT/stage3_tests_2gpu.log" | grep -E "^\[  (PASSED|FAILED|SKIPPED|  OK) |Failure" | head -40

echo "== 1b. ZeRO++ at world 2 (qwZ, hpZ, qgZ and LoCo against unquantized stage 3)"
ZRUN_BIN="$BIN/zrun" "$BIN/zrun_zeropp_gpu_test" 2>&1 | tee "$OUT/zeropp_tests_2gpu.log" |
  grep -E "^\[  (PASSED|FAILED|SKIPPED|  OK) |Failure|zeropp \]" | head -40

echo "== 2. stage-3 collectives against raw NCCL"
ARGS="$S --here --set deepspeed.zero_optimization.stage=3 --set model.layers=8 --set model.hidden=2048
  --set model.ffn_hidden=5632 --set model.heads=16 --set model.kv_heads=8 --set model.vocab=32000
  --set training.seq_len=1024 --set training.micro_batch=4 --steps 10 --warmup 3"
"$BIN/zrun" $ARGS --json "$OUT/stage3_dp2.json" > "$OUT/stage3_dp2.log" 2>&1 || tail -5 "$OUT/stage3_dp2.log"
grep -E "time per step|TFLOPS|tokens|peak  " "$OUT/stage3_dp2.log"
for kind in all_gather reduce_scatter; do
  SIZES=$($PY -c "import json; m=json.load(open('$OUT/stage3_dp2.json'))['measured']; print(' '.join(sorted({str(c['bytes']) for c in m['collectives'] if c['kind']=='$kind' and c['group']=='world'})))")
  [ -n "$SIZES" ] && /opt/torch/.venv/bin/torchrun --nproc_per_node 2 "$HERE/raw_collective_bench.py" $kind $SIZES \
    > "$OUT/raw_$kind.json" 2>>"$OUT/raw.err"
done
$PY - "$OUT/stage3_dp2.json" "$OUT/raw_all_gather.json" "$OUT/raw_reduce_scatter.json" <<'PY' | tee "$OUT/stage3_collective_ratio.txt"
import json, sys
from collections import defaultdict
m = json.load(open(sys.argv[1]))["measured"]
raw = {}
for f in sys.argv[2:]:
    try:
        for r in json.load(open(f)):
            raw[(r["kind"], r["bytes"])] = r
    except (OSError, ValueError):
        pass
agg = defaultdict(lambda: [0, 0.0, 0.0, 0])  # bytes, zrun seconds, raw seconds, count
for c in m["collectives"]:
    r = raw.get((c["kind"], c["bytes"]))
    if c["group"] != "world" or r is None:
        continue
    a = agg[c["kind"]]
    a[0] += c["bytes"]; a[1] += c["seconds"]; a[2] += r["seconds"]; a[3] += 1
    print(f"{c['name']}: {c['kind']} {c['bytes']} B: zrun {c['bus_GBps']:.1f} GB/s bus, raw {r['bus_GBps']:.1f}")
for kind, (b, zs, rs, n) in agg.items():
    print(f"{kind}: {n} collectives, {b / 2**20:.1f} MiB in all: zrun {zs * 1e3:.3f} ms, raw NCCL {rs * 1e3:.3f} ms "
          f"-> zrun bandwidth / raw = {rs / zs:.2f}")
PY

echo "== 3. zrun ZeRO-3 against FSDP2"
for size in 1b 6b; do bash "$HERE/compare_fsdp2.sh" $size; done
