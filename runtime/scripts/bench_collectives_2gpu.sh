#!/usr/bin/env bash
# zrun's collectives inside real steps against raw NCCL (torch.distributed, raw_collective_bench.py) at the same kind,
# size, data type and group size, in the same run, on 2 GPUs (device kind nvidia-h200-x2; issues 7 and 14):
#   stage 0's gradient all-reduce, stage 3's all-gathers and reduce-scatters (bf16), as configured (the next unit's
#   gathers prefetched beside this one's GEMMs) and with prefetch off (stage3_alone: each gather while compute waits),
#   qwZ's int8 all-gather and its fp32 scales (1 node of 2, prefetch off: the gathers run while compute waits),
#   qgZ's int4 all-to-all (2 virtual nodes of 1: --gpus-per-node 1, the inter-node hop over 2 ranks) and its bf16
#   reduce-scatter fallback, as configured (overlap_comm: each bucket's reduction beside the backward and the next
#   gathers) and alone (qgz_alone: overlap_comm off and prefetch off, so the reduction shares the gathers' stream and
#   the backward waits for it).
# Each zrun report's collectives are those of its op-timed step, each timed the least over the ranks (the last rank to
# arrive waits least). collective_ratio.py prints every collective and, per kind and data type, summed raw time over
# summed zrun time (the target is >= 0.90). A ~0.5B model (8 layers, hidden 2048, seq 1024, micro-batch 4).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/bench_collectives_2gpu.sh (carry .devcarry/exec)
# RUNS="stage3_alone qwz" (say) runs a subset.
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
NGPU=$(nvidia-smi -L | wc -l)
[ "$NGPU" -ge 2 ] || { echo "bench_collectives_2gpu.sh: needs 2 GPUs, $NGPU visible"; exit 2; }
MODEL="$S --here --nproc-per-node 2 $BENCH_MODEL --steps 10 --warmup 3"
Z3=deepspeed.zero_optimization
declare -A ARGS_OF=(
  [stage0]="--set $Z3.stage=0"
  [stage3]="--set $Z3.stage=3"
  [stage3_alone]="--set $Z3.stage=3 --set $Z3.stage3_prefetch_bucket_size=0"
  [qwz]="--set $Z3.stage=3 --set $Z3.zero_quantized_weights=true --set $Z3.stage3_prefetch_bucket_size=0"
  [qgz]="--set $Z3.stage=3 --set $Z3.zero_quantized_gradients=true --gpus-per-node 1"
  [qgz_alone]="--set $Z3.stage=3 --set $Z3.zero_quantized_gradients=true --gpus-per-node 1 --set $Z3.overlap_comm=false
    --set $Z3.stage3_prefetch_bucket_size=0"
)
JSONS=()
for RUN in ${RUNS:-stage0 stage3 stage3_alone qwz qgz qgz_alone}; do
  if timeout 120 "$BIN/zrun" $MODEL ${ARGS_OF[$RUN]} --json "$OUT/coll_$RUN.json" > "$OUT/coll_$RUN.log" 2>&1; then
    echo "== $RUN: $(grep -E 'time per step' "$OUT/coll_$RUN.log")"
    JSONS+=("$OUT/coll_$RUN.json")
  else
    echo "== $RUN: zrun failed"; tail -5 "$OUT/coll_$RUN.log"
  fi
done
SETS=()
for KD in all_reduce:bf16 all_gather:bf16 reduce_scatter:bf16 all_gather:uint8 all_gather:float32 all_to_all:uint8; do
  SIZES=$(for J in "${JSONS[@]}"; do $PY "$HERE/collective_ratio.py" --sizes "$J" "${KD%:*}" "${KD#*:}"; done |
          tr ' ' '\n' | sort -nu | paste -sd, -)
  [ -n "$SIZES" ] && SETS+=("$KD=$SIZES")
done
timeout 180 /opt/torch/.venv/bin/torchrun --nproc_per_node 2 "$HERE/raw_collective_bench.py" "${SETS[@]}" \
  > "$OUT/raw_collectives.json" 2>"$OUT/raw.err" || echo "raw NCCL failed: $(tail -3 "$OUT/raw.err")"
$PY "$HERE/collective_ratio.py" "${JSONS[@]}" --raw "$OUT/raw_collectives.json" > "$OUT/collective_ratio.txt"
sed -n '/^-- per kind/,$p' "$OUT/collective_ratio.txt"
