# Sourced by the device scripts: where the binaries are (ZRUN_BIN_DIR, carried from this machine), where results
# go ($OUT), and the GPU machine's NCCL / cuBLAS / cuDNN (torch's environment) with NVLink multicast off.
BIN=${ZRUN_BIN_DIR:-build/bin}
OUT=${OUT:-/tmp/zrun_out}
mkdir -p "$OUT"
SITE=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$SITE/nccl/lib:$SITE/cu13/lib:$SITE/cudnn/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
PY=/opt/torch/.venv/bin/python
S=runtime/scenarios/tiny-zero3-1xh100.yaml
# The ~0.5B model of the ZeRO++ and collective benchmarks (8 layers, hidden 2048, seq 1024, micro-batch 4), as --set's.
BENCH_MODEL="--set model.layers=8 --set model.hidden=2048 --set model.ffn_hidden=5632 --set model.heads=16
  --set model.kv_heads=8 --set model.vocab=32000 --set training.seq_len=1024 --set training.micro_batch=4"
# `traced FILE CMD...`: CMD under the CUPTI kernel tracer carried in $BIN (libzrun_kernel_trace.so; docs/runtime.md
# "Kernel traces"); the trace of the process that ran the most on the GPU (zrun's worker, not its launcher) becomes
# FILE. Returns CMD's exit status.
traced() {
  local out=$1 rc
  shift
  rm -f "$out".*.tsv
  LD_LIBRARY_PATH=$(realpath "$BIN"):$LD_LIBRARY_PATH CUDA_INJECTION64_PATH="$(realpath "$BIN/libzrun_kernel_trace.so")" \
    ZRUN_KERNEL_TRACE="$out.%p.tsv" "$@"
  rc=$?
  local biggest
  biggest=$(ls -S "$out".*.tsv 2>/dev/null | head -1)
  [ -n "$biggest" ] && mv "$biggest" "$out"
  rm -f "$out".*.tsv
  return $rc
}
