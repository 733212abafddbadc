#!/usr/bin/env bash
# The kernels' benchmark: GPU kernels' GB/s against a device copy, then CPU Adam against
# torch.optim.Adam(foreach=True) on this machine's CPU. Usage: kernels/bench/run_bench.sh DIR
# where DIR holds kernel_bench and cpu_adam_bench (a build's bin/ or a copy of it).
set -euo pipefail
dir=${1:?usage: run_bench.sh DIR_WITH_BINARIES}
here=$(cd "$(dirname "$0")" && pwd)
py="$here/torch_adam_bench.py"; [ -f "$py" ] || py="$dir/torch_adam_bench.py"
n=${ZK_CPU_ADAM_N:-33554432}
"$dir/kernel_bench"
ours=$("$dir/cpu_adam_bench" "$n" 10)
echo "$ours"
theirs=$(python3 "$py" "$n" 10)
echo "$theirs"
a=$(echo "$ours" | sed -n 's/.*params_per_s \([0-9.e+]*\).*/\1/p')
b=$(echo "$theirs" | sed -n 's/.*params_per_s \([0-9.e+]*\).*/\1/p')
python3 -c "a=float('$a'); b=float('$b'); r=a/b; print(f'CPU Adam speed-up over torch foreach: {r:.2f}x (target >= 2x: {\"ok\" if r >= 2 else \"BELOW\"})')"
