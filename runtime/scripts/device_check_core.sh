#!/usr/bin/env bash
# zrun's core on a machine with one GPU: the GPU tests (one-rank all-reduce through the communicator
# wrapper, the arena on cudaMalloc / cudaHostAlloc), zrun through rendezvous + communicator creation
# (world of 1, and with --gpus-per-node 1, and as a torchrun-style worker; on one GPU the schedule has
# only the world group: the GPU test splits world/hpz/intra_node/inter_node shapes), and injected faults: a hang
# that the watchdog must end within 30 s naming rank, op and group, and an exit the launcher reports.
# Writes one log per check and summary.txt under $OUT; exits non-zero if any check failed.
#   ZRUN_BIN_DIR   where zrun and zrun_gpu_tests are (default build/bin)
#   ZRUN_SCENARIO  a 1-node x 1-GPU scenario (default runtime/scenarios/tiny-zero3-1xh100.yaml)
set -u
BIN=${ZRUN_BIN_DIR:-build/bin}
SCEN=${ZRUN_SCENARIO:-runtime/scenarios/tiny-zero3-1xh100.yaml}
OUT=${OUT:-/tmp/zrun_device_check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
failed=0

# check NAME EXPECTED_EXIT EXPECTED_TEXT LIMIT_S COMMAND...
check() {
  local name=$1 want=$2 text=$3 limit=$4
  shift 4
  local start end code
  start=$(date +%s.%N)
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  code=$?
  end=$(date +%s.%N)
  local secs
  secs=$(awk "BEGIN{printf \"%.1f\", $end - $start}")
  if [ "$code" = "$want" ] && grep -qF -- "$text" "$OUT/$name.log"; then
    echo "PASS $name (exit $code, ${secs} s)" | tee -a "$OUT/summary.txt"
  else
    echo "FAIL $name (exit $code, want $want and '$text', ${secs} s)" | tee -a "$OUT/summary.txt"
    tail -20 "$OUT/$name.log"
    failed=1
  fi
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
: >"$OUT/summary.txt"
check gpu_tests 0 "PASSED" 300 "$BIN/zrun_gpu_tests"
check world_of_one 3 "communicators ready" 120 "$BIN/zrun" "$SCEN" --here
check virtual_nodes_of_one 3 "communicators ready" 120 "$BIN/zrun" "$SCEN" --here --gpus-per-node 1
check virtual_nodes_must_divide 2 "2 GPUs per node do not divide the 1 ranks launched" 60 \
  "$BIN/zrun" "$SCEN" --here --gpus-per-node 2
check torchrun_style_worker 3 "(torchrun) met at 127.0.0.1:29562" 120 \
  env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 "$BIN/zrun" "$SCEN" --here
TORCHRUN=${ZRUN_TORCHRUN:-$(command -v torchrun || echo /opt/torch/.venv/bin/torchrun)}
if [ -x "$TORCHRUN" ]; then
  # torchrun reports any non-zero worker exit, the executor-not-built 3 included, as its own exit 1.
  check under_torchrun 1 "(torchrun) met at 127.0.0.1:29571" 180 \
    "$TORCHRUN" --nnodes 1 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29570 --no-python \
    "$BIN/zrun" "$SCEN" --here
else
  echo "SKIP under_torchrun (no torchrun)" | tee -a "$OUT/summary.txt"
fi
check fault_hang_ends_within_30s 5 "rank 0: op 'init.comm_check.world' on group 'world' did not finish" 30 \
  env ZRUN_FAULT=rank=0,op=init.comm_check.world,kind=hang ZRUN_OP_TIMEOUT_S=10 "$BIN/zrun" "$SCEN" --here
check fault_exit_named_by_launcher 6 "worker rank 0 exited with code 6" 60 \
  env ZRUN_FAULT=rank=0,op=init.comm_check.world,kind=exit "$BIN/zrun" "$SCEN" --here
echo "failed=$failed" >>"$OUT/summary.txt"
exit $failed
