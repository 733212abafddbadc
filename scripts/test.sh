#!/usr/bin/env bash
# The whole test suite: build, then every CTest test. GPU tests skip (with a message) where no GPU is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
