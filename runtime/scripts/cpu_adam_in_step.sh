#!/usr/bin/env bash
# Why CPU Adam runs slower inside zrun's step than calibrate measures it (issue 8's worst suite cases): the host's
# topology, CPU Adam over heap / pinned buffers from the main thread / a second thread (offload_bench adam-placement)
# at the small suite model's per-rank counts, then the suite's CPU-offload cases at 1 and 2 GPUs with the CPUs each of
# zrun's threads may run on, sampled mid-run. Any kind with 2+ GPUs.
# Usage: ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/cpu_adam_in_step.sh
set -u
source "$(dirname "$0")/device_env.sh"
lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|NUMA)" ; nvidia-smi topo -m 2>/dev/null | head -8
N1=52894080  # the small model's parameters per rank at 2 GPUs
for cfg in "$((2 * N1)) 16" "$N1 8" "$N1 16"; do "$BIN/offload_bench" adam-placement $cfg; done
echo "2 at once, $N1 x 8 threads:"; for r in 1 2; do "$BIN/offload_bench" adam-placement $N1 8 > "$OUT/p$r.txt" & done; wait
cat "$OUT"/p?.txt; rm -f "$OUT"/p?.txt
case_args="--set cluster.host.cores=16 --set deepspeed.zero_optimization.stage=2
  --set deepspeed.zero_optimization.offload_optimizer.device=cpu --set deepspeed.zero_optimization.offload_optimizer.pin_memory=true"
for g in 1 2; do
  # shellcheck disable=SC2086
  timeout 120 "$BIN/zrun" validate/suite/small.yaml --here --nproc-per-node $g $case_args --steps 8 --warmup 2 \
    --json "$OUT/s2cpu$g.json" > "$OUT/s2cpu$g.log" 2>&1 &
  sleep 6
  for pid in $(pgrep -f "zrun validate/suite/small.yaml"); do
    echo "pid $pid threads by allowed CPUs:"; cat /proc/$pid/task/*/status 2>/dev/null | grep Cpus_allowed_list | sort | uniq -c
    ps -L -o psr= -p "$pid" | sort -n | uniq -c | awk '{printf "cpu%s:%s ", $2, $1} END {print ""}'
  done
  wait
  echo "$g GPU(s):"; grep -E "time per step|CPU Adam" "$OUT/s2cpu$g.log" | head -5
done
