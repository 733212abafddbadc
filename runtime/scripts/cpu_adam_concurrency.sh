#!/usr/bin/env bash
# CPU Adam alone against CPU Adam of several ranks at once (issue 8: the suite's CPU-offload steps run it slower than
# calibrate measured it alone). cpu_adam_bench on T threads at the small suite model's per-rank count, alone and as R
# processes at once, then the suite's 2-GPU CPU-offload case for its in-step rate. Device kind nvidia-h200-x2.
# Usage: ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/cpu_adam_concurrency.sh
set -u
source "$(dirname "$0")/device_env.sh"
echo "CPU: $(nproc) cores; NUMA: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l) nodes"
N1=52894080  # the small model's parameters per rank at 2 GPUs (one sub-group)
for T in 8 16; do
  echo "alone, $T threads: $(OMP_NUM_THREADS=$T "$BIN/cpu_adam_bench" $N1 10 | grep -oE 'params_per_s [0-9.e+]+')"
  for R in 2; do
    for r in $(seq $R); do OMP_NUM_THREADS=$T "$BIN/cpu_adam_bench" $N1 10 > "$OUT/adam_${T}_$r.txt" & done
    wait
    echo "$R at once, $T threads each: $(cat "$OUT"/adam_${T}_*.txt | grep -oE 'params_per_s [0-9.e+]+' | tr '\n' ' ')"
    rm -f "$OUT"/adam_${T}_*.txt
  done
done
echo "alone, 16 threads, 2x the parameters: $(OMP_NUM_THREADS=16 "$BIN/cpu_adam_bench" $((2 * N1)) 10 | grep -oE 'params_per_s [0-9.e+]+')"
timeout 120 "$BIN/zrun" validate/suite/small.yaml --here --nproc-per-node 2 --set cluster.host.cores=16 \
  --set deepspeed.zero_optimization.stage=2 --set deepspeed.zero_optimization.offload_optimizer.device=cpu \
  --set deepspeed.zero_optimization.offload_optimizer.pin_memory=true --steps 5 --warmup 2 --json "$OUT/s2cpu.json" \
  > "$OUT/s2cpu.log" 2>&1
grep -E "time per step|CPU Adam" "$OUT/s2cpu.log"
