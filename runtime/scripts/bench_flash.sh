#!/usr/bin/env bash
# zrun's flash attention beside torch's SDPA flash backend on the GPU machine: bf16, causal, head dim 128
# (and 64), MHA and GQA (kv 8), sequence 2048 (b=4) and 8192 (b=1), 32 heads; forward + backward TFLOPS of
# both and the ratio zrun / torch (issue 9's target: >= 0.60).
#   ZRUN_BIN_DIR=.devcarry/flash bash runtime/scripts/bench_flash.sh     (device tool; prints to stdout)
set -uo pipefail
BIN=${ZRUN_BIN_DIR:-build/bin}
PY=${PY:-/opt/torch/.venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
"$BIN/zrun_flash_bench" | tee "$tmp/zrun.txt"
"$PY" "$HERE/bench_flash.py" | tee "$tmp/torch.txt"
echo "shape                          zrun fwd / fwd+bwd TFLOPS   torch fwd / fwd+bwd TFLOPS   ratio fwd / fwd+bwd"
# Join on the shape (fields 3-7), print the two and their ratios.
awk '
  function val(line, key,   n, i, kv, a) { n = split(line, a, " "); for (i = 1; i <= n; ++i) { split(a[i], kv, "="); if (kv[1] == key) return kv[2] } return 0 }
  FNR == NR { key = $3 " " $4 " " $5 " " $6 " " $7; z[key] = $0; next }
  { key = $3 " " $4 " " $5 " " $6 " " $7; if (!(key in z)) next
    zf = val(z[key], "fwd_tflops"); za = val(z[key], "fwdbwd_tflops"); tf = val($0, "fwd_tflops"); ta = val($0, "fwdbwd_tflops")
    printf "%-30s %10.1f / %-10.1f         %10.1f / %-10.1f        %.2f / %.2f\n", key, zf, za, tf, ta, zf / tf, za / ta }
' "$tmp/zrun.txt" "$tmp/torch.txt"
rm -rf "$tmp"
