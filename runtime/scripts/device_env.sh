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
