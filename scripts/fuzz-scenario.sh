#!/usr/bin/env bash
# Fuzzes the scenario reader with libFuzzer + AddressSanitizer for a bounded time.
#   scripts/fuzz-scenario.sh [seconds]      (default 60)
# Builds build/fuzz/scenario_fuzzer with Debian clang (yaml-cpp linked as the static Debian library, not
# instrumented), starts from the seeds in tests/fuzz/corpus (+ bundled scenarios), keeps new inputs in
# build/fuzz/corpus, and writes any crashing input to build/fuzz/crash-*. Exit status: libFuzzer's
# (0 = nothing found).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=build/fuzz
mkdir -p "$out/corpus"
CXX="${CXX_FUZZ:-clang++}"
sources=(
  sim/scenario/scalar_values.cpp sim/scenario/edit_distance.cpp sim/scenario/presets.cpp
  sim/scenario/key_schema.cpp sim/scenario/yaml_document.cpp sim/scenario/flat_config.cpp
  sim/scenario/overrides.cpp sim/scenario/hf_config.cpp sim/scenario/scenario_validate.cpp
  sim/scenario/scenario_parse.cpp tests/fuzz/scenario_fuzzer.cpp
)
yaml_lib=/usr/lib/x86_64-linux-gnu/libyaml-cpp.a
[ -f "$yaml_lib" ] || yaml_lib=-lyaml-cpp
echo "building $out/scenario_fuzzer"
"$CXX" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. -DZSIM_SOURCE_DIR="\"$PWD\"" \
  "${sources[@]}" "$yaml_lib" -o "$out/scenario_fuzzer"
echo "replaying past findings (tests/fuzz/regressions)"
for f in tests/fuzz/regressions/*; do
  [ "${f##*.}" = md ] && continue
  "$out/scenario_fuzzer" "$f" >"$out/replay.log" 2>&1 || { cat "$out/replay.log"; echo "regression $f fails"; exit 1; }
  echo "  ok $f"
done
echo "fuzzing for ${seconds}s"
"$out/scenario_fuzzer" "$out/corpus" tests/fuzz/corpus \
  -dict=tests/fuzz/scenario.dict -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1
