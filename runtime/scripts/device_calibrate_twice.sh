#!/usr/bin/env bash
# zrun calibrate --quick twice in a row on one lease (how far its profile moves between runs: the host's speed varies
# between and within leases), then the 1-GPU suite (validate/suite/device_suite.sh, SIZES=1) with the arguments given.
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/suite bash runtime/scripts/device_calibrate_twice.sh [suite args]
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
for i in 1 2; do
  "$BIN/zrun" calibrate --quick --out "$OUT/quick$i.yaml" --log "$OUT/quick$i.log" > /dev/null 2>&1 || echo "quick calibrate $i failed"
  grep -E "empty kernel|host issue per call" "$OUT/quick$i.log"
  grep -E "^    launch_us|^      launch_us" "$OUT/quick$i.yaml" | cut -c1-150
done
SIZES=1 BUDGET_S=${BUDGET_S:-420} bash "$HERE/../../validate/suite/device_suite.sh" "$@"
