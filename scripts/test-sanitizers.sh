#!/usr/bin/env bash
# The host tests again, built with AddressSanitizer and UndefinedBehaviorSanitizer (CUDA parts off: they run on
# the GPU machine), into build-asan/. CI runs it after scripts/test.sh (.ci/run); any report fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DZSIM_WITH_CUDA=OFF \
  "-DCMAKE_CXX_FLAGS=-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
cmake --build build-asan -j "$(nproc)"
ctest --test-dir build-asan --output-on-failure -j "$(nproc)"
