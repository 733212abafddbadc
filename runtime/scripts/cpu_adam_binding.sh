#!/usr/bin/env bash
# How much CPU Adam's rate moves between runs of the same call, and whether binding OpenMP's threads to cores holds it
# (issue 8: the 1-GPU CPU-offload step's CPU Adam ran 1.3x calibrate's one rank alone on two leases, 0.8x on another).
# cpu_adam_bench on 16 threads over the small suite model's 1-GPU parameter count, unbound and bound (OMP_PLACES=cores
# with OMP_PROC_BIND close and spread), the three interleaved, 5 rounds; then 2 processes at once on 8 threads each,
# unbound and each bound to its own half of the cores. One line per run: "<case> round <r> params_per_s <rate>".
# Usage (device tool, nvidia-h200-x2): ZRUN_BIN_DIR=build/bin bash runtime/scripts/cpu_adam_binding.sh
set -u
source "$(dirname "$0")/device_env.sh"
lscpu | grep -E "^CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|Model name"
N=105788160  # the small model's parameters at 1 GPU (validate/suite/small.yaml)
rate() { grep -oE 'params_per_s [0-9.e+]+' | awk '{print $2}'; }
HALF=$(($(nproc) / 2))
for r in 1 2 3 4 5; do
  echo "alone16_unbound round $r params_per_s $(OMP_NUM_THREADS=16 "$BIN/cpu_adam_bench" $N 8 | rate)"
  echo "alone16_close round $r params_per_s $(OMP_NUM_THREADS=16 OMP_PLACES=cores OMP_PROC_BIND=close "$BIN/cpu_adam_bench" $N 8 | rate)"
  echo "alone16_spread round $r params_per_s $(OMP_NUM_THREADS=16 OMP_PLACES=cores OMP_PROC_BIND=spread "$BIN/cpu_adam_bench" $N 8 | rate)"
done
for r in 1 2 3; do
  for i in 0 1; do OMP_NUM_THREADS=8 "$BIN/cpu_adam_bench" $((N / 2)) 8 > "$OUT/u$i.txt" & done
  wait
  echo "two8_unbound round $r params_per_s $(cat "$OUT"/u0.txt | rate) $(cat "$OUT"/u1.txt | rate)"
  for i in 0 1; do
    OMP_NUM_THREADS=8 OMP_PROC_BIND=spread OMP_PLACES=cores taskset -c $((i * HALF))-$((i * HALF + HALF - 1)) \
      "$BIN/cpu_adam_bench" $((N / 2)) 8 > "$OUT/b$i.txt" &
  done
  wait
  echo "two8_halves round $r params_per_s $(cat "$OUT"/b0.txt | rate) $(cat "$OUT"/b1.txt | rate)"
done
rm -f "$OUT"/u?.txt "$OUT"/b?.txt
