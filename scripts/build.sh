#!/usr/bin/env bash
# Installs what is missing, configures (Ninja, Release) into build/ and builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
if grep -q '^ZSIM_CUDA_ENABLED:INTERNAL=OFF' build/CMakeCache.txt; then
  echo "build.sh: building without CUDA: zsim and the host parts only; the CUDA parts (GPU kernels, zrun," \
       "runtime/model's layers) are skipped (no nvcc, or -DZSIM_WITH_CUDA=OFF)"
fi
cmake --build build -j "$(nproc)"
