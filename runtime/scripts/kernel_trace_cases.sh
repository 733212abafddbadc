#!/usr/bin/env bash
# Suite cases run by zrun under CUPTI (libzrun_kernel_trace.so): each kernel's own GPU time beside the ops' measured
# times of the same run (--json; the last step is the op-timed one), to tell a kernel's time from what a timed op holds
# besides it. Writes $OUT/<case>.tsv (the kernels of every step), <case>.json and <case>.log.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/zpp bash .devcarry/zpp/kernel_trace_cases.sh 1g-small-s0 1g-small-s0-ga4
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
for CASE in "$@"; do
  LINE=$(awk -F'\t' -v c="$CASE" '$1 == c' validate/suite/suite.tsv)
  [ -n "$LINE" ] || { echo "kernel_trace_cases.sh: no case $CASE in validate/suite/suite.tsv"; exit 2; }
  SCEN=$(echo "$LINE" | cut -f3)
  SETS=$(echo "$LINE" | cut -f5 | tr ' ' '\n' | sed 's/^/--set /' | tr '\n' ' ')
  traced "$OUT/$CASE.tsv" "$BIN/zrun" "$SCEN" --here --nproc-per-node 1 $SETS --steps 5 --warmup 2 \
    --json "$OUT/$CASE.json" > "$OUT/$CASE.log" 2>&1 || { tail -20 "$OUT/$CASE.log"; exit 1; }
  echo "== $CASE: $(grep -E 'time per step' "$OUT/$CASE.log")"
done
