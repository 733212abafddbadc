#!/usr/bin/env bash
# The validation suite in one device call, from this checkout: zrun calibrate (full grid: GEMMs, the memory-bound
# kernels, the empty kernel's launch; on 2+ GPUs the collectives across them too), then every ready case of
# suite.tsv for the machine's size through run_suite.sh --measure-only: on 4+ GPUs first the 4x2 cases (2 virtual
# nodes of 2); on 2+ GPUs the 2-GPU cases, then the 1-GPU cases on GPU 0 against the same calibration; on one GPU
# the 1-GPU cases. All inside a time budget (BUDGET_S, default 510 s: the device tool's 10-minute limit less the
# packing), into a results folder <gpu>/ packed as $OUT/results.tgz (only it and the log $OUT/suite.log are left in
# $OUT: the device tool returns a few files).
#
#   device tool:  run(command="bash validate/suite/device_suite.sh", carry=["build/bin/zrun"], timeout_s=600,
#                     kind="nvidia-h200-x2")   # or one GPU
#   then here:    tar xzf <files_at>/results.tgz -C validate/results
#                 GPU_TAG=h200 validate/suite/run_suite.sh --validate-only      # zsim validate, plots, summary, bands
#
# SIZES="2 1" (default on 2 or 3 GPUs), "4x2 2 1" (default on 4+: the 4-GPU cases in 2 virtual nodes of 2 first, whose
# calibration measures the intra-node pairs, the inter-node pairs and the world), "1", "2", ...: the case sizes, in
# order; the first calibrates. Arguments go to run_suite.sh (e.g. --quick, --cases REGEX, --no-calibrate). The
# GPU's tag (h100, h200, ...) comes from nvidia-smi.
# A case cut by the budget is dropped (its files removed); the log says which ran.
set -u
cd "$(dirname "$0")/../.."
source runtime/scripts/device_env.sh  # OUT, and the machine's NCCL / cuBLAS libraries
export ZRUN_BIN_DIR=${ZRUN_BIN_DIR:-build/bin}
if [ ! -x "$ZRUN_BIN_DIR/zrun" ]; then
  echo "device_suite.sh: no $ZRUN_BIN_DIR/zrun (build it here and carry build/bin/zrun)" | tee "$OUT/suite.log"
  exit 2
fi
TAG=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | grep -oE 'h200|h100|a100|v100' | head -1)
if [ -z "$TAG" ]; then
  echo "device_suite.sh: no data-sheet profile for $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" | tee "$OUT/suite.log"
  exit 2
fi
STAGE=$(mktemp -d)
export GPU_TAG=$TAG RESULTS=$STAGE/$TAG
mkdir -p "$RESULTS"
{ nvidia-smi -L; date -u; } > "$OUT/suite.log"
# The suite's process tree (run_suite.sh's own `timeout`s start process groups of their own, so a group kill
# would miss them): every descendant of `pid`, by parent id, deepest first.
kill_tree() {
  local child
  for child in $(pgrep -P "$1"); do kill_tree "$child"; done
  kill -TERM "$1" 2>/dev/null
}
VISIBLE=$(nvidia-smi -L | wc -l)
SIZES=${SIZES:-$([ "$VISIBLE" -ge 4 ] && echo "4x2 2 1" || { [ "$VISIBLE" -ge 2 ] && echo "2 1"; } || echo 1)}
# Each size in turn (the first calibrates on every GPU it uses; the next keep that calibration), in the background.
sizes() {
  local first=1 n
  for n in $SIZES; do
    if [ "$n" = 1 ]; then
      CUDA_VISIBLE_DEVICES=0 SUITE_GPUS=1 bash validate/suite/run_suite.sh --measure-only "$@" $([ $first = 1 ] || echo --no-calibrate)
    else
      SUITE_GPUS=$n bash validate/suite/run_suite.sh --measure-only "$@" $([ $first = 1 ] || echo --no-calibrate)
    fi
    first=0
  done
}
start=$(date +%s)
sizes "$@" >> "$OUT/suite.log" 2>&1 &
pid=$!
budget=${BUDGET_S:-510}
while kill -0 "$pid" 2>/dev/null && [ $(($(date +%s) - start)) -lt "$budget" ]; do sleep 1; done
cut=""
if kill -0 "$pid" 2>/dev/null; then
  kill_tree "$pid"
  # The case that was running when the budget ran out: drop what it left (not a whole run).
  last=$(grep -E '^== [^ ]+: zrun ' "$OUT/suite.log" | tail -1 | sed -E 's/^== ([^:]+):.*/\1/')
  [ -n "$last" ] && [ ! -e "$RESULTS/runs/$last.trace.json.gz" ] && rm -f "$RESULTS/runs/$last".*
  cut=" (budget of $budget s reached: stopped${last:+ during $last, whose files were removed})"
fi
wait "$pid"
rc=$?
echo "run_suite.sh exit $rc after $(($(date +%s) - start)) s$cut" >> "$OUT/suite.log"
ls -la "$RESULTS" "$RESULTS/runs" >> "$OUT/suite.log" 2>&1
tar czf "$OUT/results.tgz" -C "$STAGE" "$TAG"
rm -rf "$STAGE"
tail -n 3 "$OUT/suite.log"
