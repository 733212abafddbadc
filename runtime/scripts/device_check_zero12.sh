#!/usr/bin/env bash
# zrun on one GPU (device kind nvidia-h100-x1): the fp32 Adam kernel, then zrun_train_gpu_test's ZeRO-1/2 reduction
# paths, fp32 training and fp32 communication_data_type against stage 0, then the measured reduction bytes of a
# stage-2 step with bf16 and fp32 communication. Results under $OUT (summary.txt and one log per check).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/zero12 bash .devcarry/zero12/device_check_zero12.sh
set -u
source "$(dirname "$0")/device_env.sh"
nvidia-smi -L | tee "$OUT/summary.txt"
"$BIN/kernels_gpu_tests" --gtest_filter='FusedAdamGpu.*' > "$OUT/kernels.log" 2>&1
grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/kernels.log" | sed 's/^/kernels: /' | tee -a "$OUT/summary.txt"
FILTER='*PerOwner*:*Contiguous*:*ReduceScatter*:*OverlapComm*:*RoundRobin*:*Fp32*:*StagesOneAndTwo*'
start=$(date +%s)
ZRUN_BIN="$BIN/zrun" "$BIN/zrun_train_gpu_test" --gtest_filter="$FILTER" > "$OUT/train.log" 2>&1
echo "train tests: $(( $(date +%s) - start )) s" | tee -a "$OUT/summary.txt"
grep -E "^\[  (PASSED|FAILED|      OK)|tests ran|Failure" "$OUT/train.log" | head -60 | tee -a "$OUT/summary.txt"
# The reductions of one stage-2 step (tiny model, micro-batch 1, several buckets) in bf16 and in fp32.
for c in bf16 fp32; do
  "$BIN/zrun" $S --here --set deepspeed.zero_optimization.stage=2 --set deepspeed.communication_data_type=$c \
    --set deepspeed.zero_optimization.reduce_bucket_size=100000 --set training.micro_batch=1 --steps 3 --warmup 1 \
    --json "$OUT/stage2_comm_$c.json" > "$OUT/stage2_comm_$c.log" 2>&1
  echo "stage 2, communication_data_type $c: exit $?" | tee -a "$OUT/summary.txt"
  grep -E "^step|time per step" "$OUT/stage2_comm_$c.log" | tee -a "$OUT/summary.txt"
done
$PY - "$OUT/stage2_comm_bf16.json" "$OUT/stage2_comm_fp32.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
for f in sys.argv[1:]:
    m = json.load(open(f))["measured"]
    red = [c for c in m["collectives"] if c["name"].startswith("bwd.")]
    print(f"{f.split('/')[-1]}: {len(red)} backward reductions, {sum(c['bytes'] for c in red)} bytes")
PY
