#!/usr/bin/env bash
# On a machine without nvcc the configure succeeds, says the CUDA parts are skipped, and generates zsim
# and the host parts only. Simulated here by hiding the CUDA compiler: nvcc off PATH and
# CMAKE_CUDA_COMPILER pointing nowhere. Usage: check-build-without-cuda.sh [--build] (also builds zsim).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
path_without_cuda="$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:)"
log="$dir/configure.log"
if ! PATH="$path_without_cuda" CUDACXX= cmake -S "$src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DCMAKE_CUDA_COMPILER=/nonexistent/nvcc >"$log" 2>&1; then
  cat "$log"; echo "FAIL: configure without a CUDA compiler failed"; exit 1
fi
# CMake wraps warnings: compare the text with its line breaks and indentation folded to single spaces.
tr -s ' \n' '  ' <"$log" | grep -q "the CUDA parts (GPU kernels, zrun, runtime/model's layers) are skipped" ||
  { cat "$log"; echo "FAIL: the configure did not say that the CUDA parts are skipped"; exit 1; }
grep -q '^ZSIM_CUDA_ENABLED:INTERNAL=OFF' "$dir/build/CMakeCache.txt" || { echo "FAIL: CUDA still enabled"; exit 1; }
targets="$(ninja -C "$dir/build" -t targets all)"
for t in bin/zsim zrun_model_host_tests; do
  grep -q "^$t:" <<<"$targets" || grep -q "/$t:" <<<"$targets" || { echo "FAIL: no target $t"; exit 1; }
done
for t in bin/zrun libzrun_model.a libzkernels.a; do
  if grep -q "$t:" <<<"$targets"; then echo "FAIL: CUDA target $t generated"; exit 1; fi
done
if [[ "${1:-}" == "--build" ]]; then
  PATH="$path_without_cuda" cmake --build "$dir/build" --target zsim
  "$dir/build/bin/zsim" "$src/scenarios/llama2-7b-zero2-8xa100.yaml" >/dev/null
fi
echo "OK: without a CUDA compiler the configure skips the CUDA parts and keeps zsim and the host parts"
