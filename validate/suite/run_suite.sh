#!/usr/bin/env bash
# The validation suite (docs/validation.md): zrun calibrate, then every ready case of suite.tsv for this
# machine's size with zrun --json --trace, then zsim validate of each run with the calibrated profile AND
# with the shipped data-sheet profile, then the summary table. Writes validate/results/<gpu>/.
#
#   validate/suite/run_suite.sh [--quick] [--steps N] [--warmup N] [--measure-only | --validate-only]
#                               [--cases REGEX] [--no-calibrate]
#
# --measure-only (the GPU machine): calibrate and the zrun runs only. --validate-only (any machine, no GPU):
# the zsim validations, plots and summary of measurements already under the results directory (so the
# host side, which needs Python's matplotlib, can run where the measurements were copied). --cases REGEX: only
# the cases whose name matches (grep -E); --no-calibrate: keep the calibrated profile already in the results.
# Environment: ZRUN_BIN_DIR / ZSIM_BIN_DIR (default build/bin), RESULTS (default validate/results/<gpu>),
# SUITE_GPUS (default: 2 when 2+ GPUs are visible, else 1; "NxK": N GPUs split into virtual nodes of K, zrun's and
# calibrate's --gpus-per-node K, so that intra-node and inter-node groups are separate communicators), GPU_TAG
# (default from nvidia-smi: h100, h200, ...), KEEP_OPS_CSV=1 (keep each run's plots/<run>/ops.csv, zsim validate's
# per-op times, which the results otherwise leave out).
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK="" STEPS=5 WARMUP=2 MEASURE=1 VALIDATE=1 CASES="" CALIBRATE=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=--quick ;;
    --steps) STEPS=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --measure-only) VALIDATE=0 ;;
    --validate-only) MEASURE=0 ;;
    --cases) CASES=$2; shift ;;
    --no-calibrate) CALIBRATE=0 ;;
    *) echo "run_suite.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
ZRUN_BIN=${ZRUN_BIN_DIR:-build/bin}
ZSIM_BIN=${ZSIM_BIN_DIR:-build/bin}
if [ "$MEASURE" = 1 ]; then
  VISIBLE=$(nvidia-smi -L | wc -l)
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  GPU_TAG=${GPU_TAG:-$(echo "$GPU_NAME" | tr 'A-Z' 'a-z' | grep -oE 'h200|h100|a100|v100' | head -1)}
  SUITE_GPUS=${SUITE_GPUS:-$([ "$VISIBLE" -ge 2 ] && echo 2 || echo 1)}
  NPROC=${SUITE_GPUS%x*}  # "4x2": 4 processes in virtual nodes of 2
  PER_NODE=()
  case "$SUITE_GPUS" in *x*) PER_NODE=(--gpus-per-node "${SUITE_GPUS#*x}") ;; esac
else
  GPU_TAG=${GPU_TAG:?--validate-only needs GPU_TAG (h100, h200, ...)}
fi
case "$GPU_TAG" in
  h100) BASE=h100-hgx-ib400 ;; h200) BASE=h200-hgx-ib400 ;; a100) BASE=a100-hgx-ib200 ;; v100) BASE=v100-dgx2-ib100 ;;
  *) echo "run_suite.sh: no data-sheet profile for GPU '$GPU_TAG'" >&2; exit 2 ;;
esac
RES=${RESULTS:-validate/results/$GPU_TAG}
PROFILE=calibrated-$GPU_TAG
mkdir -p "$RES/runs" "$RES/validation"

if [ "$MEASURE" = 1 ]; then
  if [ "$CALIBRATE" = 1 ]; then
    echo "== zrun calibrate on $VISIBLE x $GPU_NAME"
    rm -f "$RES/calibrate.log"
    timeout 300 "$ZRUN_BIN/zrun" calibrate --out "$RES/$PROFILE.yaml" --log "$RES/calibrate.log" --base "$BASE" $QUICK \
      --nproc-per-node "$NPROC" ${PER_NODE[@]+"${PER_NODE[@]}"} > /dev/null || echo "zrun calibrate failed (exit $?): the runs go on"
    grep -E "^zrun calibrate: (wrote|GEMM)" "$RES/calibrate.log" || true
  fi
  mkdir -p /tmp/zrun-nvme  # the NVMe offload cases' nvme_path
  grep -vE '^\s*#|^\s*$' validate/suite/suite.tsv | while IFS=$'\t' read -r NAME GPUS SCEN STATUS SETS; do
    [ "$GPUS" = "$SUITE_GPUS" ] || continue
    [ -z "$CASES" ] || echo "$NAME" | grep -qE "$CASES" || continue
    if [ "$STATUS" != ready ]; then echo "-- $NAME: $STATUS"; continue; fi
    ARGS=()
    for kv in $SETS; do ARGS+=(--set "$kv"); done
    echo "== $NAME: zrun $SCEN ${SETS}"
    if timeout 180 "$ZRUN_BIN/zrun" "$SCEN" --here --nproc-per-node "$NPROC" ${PER_NODE[@]+"${PER_NODE[@]}"} --set cluster.profile=$BASE "${ARGS[@]}" \
         --steps "$STEPS" --warmup "$WARMUP" --json "$RES/runs/$NAME.json" --trace "$RES/runs/$NAME.trace.json" \
         > "$RES/runs/$NAME.log" 2>&1; then
      grep -E "time per step|peak" "$RES/runs/$NAME.log" | head -3 || true
      gzip -9f "$RES/runs/$NAME.trace.json"
    else
      echo "   failed (exit $?): $(tail -2 "$RES/runs/$NAME.log" | tr '\n' ' ')"
      rm -f "$RES/runs/$NAME.json" "$RES/runs/$NAME.trace.json"
    fi
  done
fi

if [ "$VALIDATE" = 1 ]; then
  for RUN in "$RES"/runs/*.json; do
    NAME=$(basename "$RUN" .json)
    case "$NAME" in *.trace) continue ;; esac
    "$ZSIM_BIN/zsim" validate "$RUN" --set cluster.profile=$BASE --json "$RES/validation/$NAME.datasheet.json" \
      > "$RES/validation/$NAME.datasheet.txt"
    "$ZSIM_BIN/zsim" validate "$RUN" --profile-dir "$RES" --set cluster.profile=$PROFILE \
      --json "$RES/validation/$NAME.calibrated.json" --plots "$RES/plots/$NAME" > "$RES/validation/$NAME.calibrated.txt"
    [ "${KEEP_OPS_CSV:-0}" = 1 ] || rm -f "$RES/plots/$NAME/ops.csv"
  done
  PYTHON=python3
  [ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3  # Debian's, with python3-matplotlib (scripts/install-deps.sh)
  "$PYTHON" validate/suite/summarize.py "$RES" "$BASE" "$PROFILE"
fi
