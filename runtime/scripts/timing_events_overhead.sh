#!/usr/bin/env bash
# What zrun's per-op timing costs a step: the 1-GPU suite's cases run with --json (per-op CUDA events: an end event
# per op, a start event where it waits for another stream) and without (the step's two events only), alternately,
# REPS times each; prints the median step time of each and their ratio. Results in $OUT/events_overhead.txt.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/timing_events_overhead.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
REPS=${REPS:-3}
CASES=${CASES:-"1g-small-s0 1g-small-s0-ga4 1g-small-s3 1g-medium-s0 1g-medium-s3-ckpt"}
PROFILE=h200-hgx-ib400
step_ms() { grep -E "time per step" "$1" | grep -oE "[0-9.]+ ms" | head -1 | cut -d' ' -f1; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  printf "%-22s %12s %12s %8s\n" case "with --json" without ratio
  for name in $CASES; do
    line=$(grep -P "^$name\t" validate/suite/suite.tsv)
    scen=$(echo "$line" | cut -f3)
    args=()
    for kv in $(echo "$line" | cut -f5); do args+=(--set "$kv"); done
    with="" without=""
    for r in $(seq "$REPS"); do
      "$BIN/zrun" "$scen" --here --set cluster.profile=$PROFILE "${args[@]}" --steps 5 --warmup 2 \
          --json /tmp/ev.json > /tmp/ev_with.log 2>&1
      with="$with $(step_ms /tmp/ev_with.log)"
      "$BIN/zrun" "$scen" --here --set cluster.profile=$PROFILE "${args[@]}" --steps 5 --warmup 2 \
          > /tmp/ev_without.log 2>&1
      without="$without $(step_ms /tmp/ev_without.log)"
    done
    w=$(echo "$with" | median); wo=$(echo "$without" | median)
    printf "%-22s %12s %12s %8s   (with:%s; without:%s)\n" "$name" "$w" "$wo" \
        "$(awk -v a="$w" -v b="$wo" 'BEGIN { if (b > 0) printf "%.3f", a / b }')" "$with" "$without"
  done
} | tee "$OUT/events_overhead.txt"
