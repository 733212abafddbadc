#!/usr/bin/env bash
# What a kernel costs inside a step, apart from the host's speed (issue 8: the launch term of the calibrated profile
# followed the host's speed; docs/timing.md "Kernel launches"): launch_probe's GPU-alone and host-inclusive figures,
# zrun calibrate --quick twice (its launch figures as the profile takes them), and the suite's micro-batch 1 x 4 run
# (untimed and op-timed steps). Results under $OUT.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/probe bash runtime/scripts/device_probe_launch.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
"$BIN/launch_probe" 200 | tee "$OUT/launch_probe.txt"
for i in 1 2; do
  "$BIN/zrun" calibrate --quick --out "$OUT/quick$i.yaml" --log "$OUT/quick$i.log" --base h200-hgx-ib400 > /dev/null 2>&1
  grep -E "launch|host issue" "$OUT/quick$i.log" | head -6
  grep -E "^    launch_us|^      launch_us" "$OUT/quick$i.yaml" | head -3
done
"$BIN/zrun" validate/suite/small.yaml --here --nproc-per-node 1 --set cluster.profile=h200-hgx-ib400 \
  --set deepspeed.zero_optimization.stage=0 --set training.micro_batch=1 --set training.grad_accum=4 \
  --steps 5 --warmup 2 --json "$OUT/ga4.json" > "$OUT/ga4.log" 2>&1
grep -E "time per step" "$OUT/ga4.log"
"$BIN/launch_probe" 200 | tee "$OUT/launch_probe2.txt"
