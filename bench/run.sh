#!/usr/bin/env bash
# The issue-3 and issue-12 benchmark, one command: bench/run.sh [BUILD_DIR]   (ZSIM_BENCH_PARTS="a b" for some)
# Builds zsim_bench (Release) and prints, with "ratio = measured/target" lines:
#  (a) GPT-3 175B, ZeRO-3, 128 nodes x 8 GPUs, every layer, one full step through the real pipeline
#      (scenario -> plan -> schedule -> report -> timing): wall time (<= 0.05 s, issue 12), peak RSS (<= 1 GiB);
#  (b) a 1,000-point `zsim sweep` of Llama 2 70B (5 micro batches x 5 IB bandwidths x 5 reduce buckets x
#      8 ZeRO++ combinations of qwZ / hpZ / qgZ): wall time (<= 60 s);
#  (c) Llama 3 405B, ZeRO-3, 2,048 nodes x 8 H100, grad_accum 64, seq 8192, the CLI's default 2 steps:
#      wall time (<= 0.5 s), peak RSS (<= 256 MiB) (issue 12);
#  (d) a 10,000-point sweep of the same 70B scenario (grid (b) x 10 NVLink bandwidths): wall time (<= 60 s)
#      (issue 12).
# Each part runs in its own process so that its peak RSS is its own.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
threads="${ZSIM_BENCH_THREADS:-2}"
if [[ ! -f "$build/build.ninja" && ! -f "$build/Makefile" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target zsim_bench >/dev/null
bench="$build/bin/zsim_bench"
cd "$root"
echo "machine: $(nproc) CPU(s), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
parts="${ZSIM_BENCH_PARTS:-a b c d}"
grid_70b=(--grid training.micro_batch=1,2,4,8,16
  --grid cluster.links.ib_GBps=6.25,12.5,25,50,100
  --grid deepspeed.zero_optimization.reduce_bucket_size=5e7,1e8,2e8,5e8,1e9
  --grid deepspeed.zero_optimization.zero_quantized_weights=false,true
  --grid deepspeed.zero_optimization.zero_hpz_partition_size=1,8
  --grid deepspeed.zero_optimization.zero_quantized_gradients=false,true)
if [[ " $parts " == *" a "* ]]; then
  echo
  echo "(a) one full step, GPT-3 175B ZeRO-3 on 128 x 8 GPUs"
  "$bench" pipeline scenarios/gpt3-175b-zero3-1024xh100.yaml --steps 1 --repeat 3 --target-s 0.05
fi
if [[ " $parts " == *" b "* ]]; then
  echo
  echo "(b) 1,000-point sweep, Llama 2 70B ZeRO-3 on 8 x 8 GPUs, $threads thread(s)"
  "$bench" sweep scenarios/llama2-70b-zero3-64xh100.yaml --threads "$threads" "${grid_70b[@]}"
fi
if [[ " $parts " == *" c "* ]]; then
  echo
  echo "(c) Llama 3 405B ZeRO-3 on 2,048 x 8 GPUs, grad_accum 64, seq 8192, 2 steps"
  "$bench" pipeline scenarios/llama3-405b-zero3-16384xh100.yaml --steps 2 --repeat 1 --target-s 0.5 \
    --target-gib 0.25
fi
if [[ " $parts " == *" d "* ]]; then
  echo
  echo "(d) 10,000-point sweep, Llama 2 70B ZeRO-3 on 8 x 8 GPUs, $threads thread(s)"
  "$bench" sweep scenarios/llama2-70b-zero3-64xh100.yaml --threads "$threads" "${grid_70b[@]}" \
    --grid cluster.links.nvlink_GBps=150,200,250,300,350,400,450,500,550,600
fi
