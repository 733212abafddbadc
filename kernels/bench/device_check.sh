#!/usr/bin/env bash
# Everything the kernels need checked on the GPU machine, in one call: GPU and host tests,
# compute-sanitizer memcheck on the GPU tests and on a quick benchmark pass, then the benchmark.
# Usage: device_check.sh DIR   (DIR holds the four binaries and this bench/ folder's scripts);
# logs go to $OUT (or ./out).
set -uo pipefail
dir=$(cd "${1:?usage: device_check.sh DIR}" && pwd)
out=${OUT:-./out}; mkdir -p "$out"
nvidia-smi -L; nproc; grep -o -m1 -w 'avx512f' /proc/cpuinfo || echo "no avx512f"
echo "== GPU tests";  "$dir/kernels_gpu_tests" > "$out/gpu_tests.log" 2>&1; echo "rc=$?"; grep -E 'LoCo|PASSED|FAILED|SKIPPED|tests ran' "$out/gpu_tests.log"
echo "== host tests"; "$dir/kernels_host_tests" > "$out/host_tests.log" 2>&1; echo "rc=$?"; grep -E 'LoCo|PASSED|FAILED|tests ran' "$out/host_tests.log"
echo "== memcheck GPU tests"
timeout 300 compute-sanitizer --tool memcheck --leak-check full "$dir/kernels_gpu_tests" > "$out/memcheck_tests.log" 2>&1; echo "rc=$?"
grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_tests.log" | tail -3
echo "== memcheck quick bench"
timeout 120 compute-sanitizer --tool memcheck "$dir/kernel_bench" --quick > "$out/memcheck_bench.log" 2>&1; echo "rc=$?"
grep -E 'ERROR SUMMARY' "$out/memcheck_bench.log"
echo "== bench"
"$dir/run_bench.sh" "$dir" 2>&1 | tee "$out/bench.log"
