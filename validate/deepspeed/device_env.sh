# The GPU machine's environment for DeepSpeed runs, sourced by device_run.sh and device_calibrate.sh from the
# repository root (ROOT, DS_DIR set): torch's interpreter, the carried DeepSpeed first on the Python path, torch's
# NCCL / CUDA / cuDNN libraries, NVLink multicast off, and one folder for the JIT-built extensions.
export PYTHONPATH=$DS_DIR/site${PYTHONPATH:+:$PYTHONPATH}
export PATH=/opt/torch/.venv/bin:$PATH
V=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
export LD_LIBRARY_PATH=$V/nccl/lib:$V/cu13/lib:$V/cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
export TORCH_EXTENSIONS_DIR=$ROOT/.devcarry/torch_extensions
PY=${PY:-python}  # torch's interpreter (PATH above)
