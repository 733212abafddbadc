#!/usr/bin/env bash
# GPU checks of runtime/model/ in one run on the device machine: the model-vs-CPU-reference tests and the
# single-GPU training check (Llama- and GPT-style). Binaries come from BIN (default .devcarry/zmodel, built
# on the build machine and carried); results go to $OUT (default ./out).
#   bash runtime/scripts/device_check_model.sh
set -uo pipefail
BIN=${BIN:-.devcarry/zmodel}
OUT=${OUT:-./out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/device.txt"
rc=0
"$BIN/zrun_model_gpu_tests" 2>&1 | tee "$OUT/model_gpu_tests.txt" || rc=1
"$BIN/zrun_train_check" --style llama 2>&1 | tee "$OUT/train_check_llama.txt" || rc=1
"$BIN/zrun_train_check" --style gpt 2>&1 | tee "$OUT/train_check_gpt.txt" || rc=1
echo "device_check_model: rc=$rc" | tee "$OUT/rc.txt"
exit $rc
