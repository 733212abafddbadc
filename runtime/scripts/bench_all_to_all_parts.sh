#!/usr/bin/env bash
# qgZ's bucket all-to-all in zrun's step against raw NCCL at the same parts, on 2 GPUs (issue 14): zrun runs qgZ on 2
# virtual nodes of 1 with the bucket's reduction alone (overlap_comm and prefetch off), the ~0.5B model of
# bench_collectives_2gpu.sh; zsim emits the same schedule, and all_to_all_parts_bench.py times the bucket's
# per-tensor pairs (each tensor's values, each its scales) on raw NCCL as one call of their bytes (what zrun's
# peer-major region moves), as one group of sends / receives (zrun's way before the peer-major region), and as one
# call per pair (DeepSpeed's). Needs zsim beside zrun in ZRUN_BIN_DIR. Results under $OUT (parts.json, zrun's report and log).
# Usage (device tool): ZRUN_BIN_DIR=.devcarry/exec bash runtime/scripts/bench_all_to_all_parts.sh
set -u
HERE="$(dirname "$0")"
source "$HERE/device_env.sh"
Z3=deepspeed.zero_optimization
SET="$BENCH_MODEL --set $Z3.stage=3
  --set $Z3.zero_quantized_gradients=true --set $Z3.overlap_comm=false --set $Z3.stage3_prefetch_bucket_size=0"
OP=${OP:-bwd.bucket0.all_to_all.inter}
"$BIN/zsim" plan $S $SET --set cluster.nodes=2 --set cluster.gpus_per_node=1 --emit-schedule "$OUT/schedule.json" \
  > /dev/null || { echo "zsim plan failed"; exit 1; }
timeout 120 "$BIN/zrun" $S $SET --here --nproc-per-node 2 --gpus-per-node 1 --steps 10 --warmup 3 \
  --json "$OUT/zrun_qgz_alone.json" > "$OUT/zrun_qgz_alone.log" 2>&1 || { echo "zrun failed"; tail -5 "$OUT/zrun_qgz_alone.log"; }
timeout 180 /opt/torch/.venv/bin/torchrun --nproc_per_node 2 "$HERE/all_to_all_parts_bench.py" "$OUT/schedule.json" "$OP" \
  > "$OUT/parts.json" 2> "$OUT/parts.err" || { echo "raw parts failed"; tail -5 "$OUT/parts.err"; }
$PY - "$OUT/zrun_qgz_alone.json" "$OUT/parts.json" "$OP" <<'PY'
import json, sys
z, parts, op = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
zr = [c for c in z["measured"]["collectives"] if c["name"] == op]
print(f"{op}: {parts['pairs']} pairs ({parts['smallest_pair']}-{parts['largest_pair']} B), {parts['bytes']} B on {parts['ranks']} ranks")
if zr:
    print(f"  zrun in the step: {zr[0]['seconds'] * 1e3:.3f} ms")
for k, s in parts["seconds"].items():
    ratio = f", raw / zrun {s / zr[0]['seconds']:.2f}" if zr else ""
    print(f"  raw {k}: {s * 1e3:.3f} ms ({parts['bus_GBps'][k]:.1f} GB/s bus){ratio}")
PY
