#!/usr/bin/env bash
# Runs DeepSpeed validation cases on the GPU machine, one after another within a time budget, and packs every
# result into ONE tarball, $OUT/deepspeed_results.tgz (README.md beside this file: "The device run").
#
# Usage (from the repository root, with .devcarry/deepspeed-0.14.5 carried):
#   bash validate/deepspeed/device_run.sh smoke                 # a list of lists/: smoke, core, extra
#   bash validate/deepspeed/device_run.sh 'l150m-z3-*' l1.3b-z2-w1-mb1-s4096-sdpa   # globs / names of cases/
#   bash validate/deepspeed/device_run.sh all                   # every case;  @FILE: the names in FILE
# Environment: BUDGET_S (default 520: no case starts when less than MIN_START_S, default 60, is left, and a case
# gets at most what is left, less 60 s), CASE_TIMEOUT_S (default 420), STEPS (default: the case's), PREBUILD
# (default 1: JIT-build fused_adam / cpu_adam once before the cases, as the cases need them; 0 skips),
# STOP_ON_PREBUILD_FAILURE (default 1), HARNESS_ARGS (more harness.py options), PIN_CPUS (run each case's processes
# on these CPUs only, a taskset -c list such as 2-5), DS_DIR, OUT.
set -u
START=$(date +%s)
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
HD=validate/deepspeed
DS_DIR=${DS_DIR:-$ROOT/.devcarry/deepspeed-0.14.5}
OUT=${OUT:-/tmp/deepspeed_out}
BUDGET_S=${BUDGET_S:-520}
MIN_START_S=${MIN_START_S:-60}
CASE_TIMEOUT_S=${CASE_TIMEOUT_S:-420}
PREBUILD=${PREBUILD:-1}
STOP_ON_PREBUILD_FAILURE=${STOP_ON_PREBUILD_FAILURE:-1}
STEPS=${STEPS:-}
HARNESS_ARGS=${HARNESS_ARGS:-}

. validate/deepspeed/device_env.sh

left() { echo $((BUDGET_S - ($(date +%s) - START))); }

mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/dsrun.XXXXXX)
W=$WORK/deepspeed_results
mkdir -p "$W/cases" "$W/sources" "$TORCH_EXTENSIONS_DIR"
exec > >(tee "$W/device_run.log") 2>&1

echo "== device_run.sh $* (budget ${BUDGET_S} s, case timeout ${CASE_TIMEOUT_S} s)"
if [ ! -d "$DS_DIR/site/deepspeed" ]; then
  echo "ERROR: no DeepSpeed at $DS_DIR/site/deepspeed (carry .devcarry with deepspeed-0.14.5 in it)"
  exit 2
fi
nvidia-smi -L 2>&1 | tee "$W/nvidia-smi.txt"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1 | tee -a "$W/nvidia-smi.txt"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "repo: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
  echo "ninja: $(ninja --version 2>/dev/null)"
  echo "cpus: $(nproc), memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
  "$PY" - <<'EOF' 2>&1
import os, sys
import torch
print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())))
print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory, "bytes,",
      torch.cuda.device_count(), "visible")
import transformers
print("transformers", transformers.__version__, os.path.dirname(transformers.__file__))
try:
    import deepspeed
    print("deepspeed", deepspeed.__version__, os.path.dirname(deepspeed.__file__))
except Exception as e:
    print("deepspeed import FAILED:", type(e).__name__, e)
for m in ("cpuinfo", "ninja", "pynvml", "accelerate"):
    try:
        __import__(m)
        print(m, "importable")
    except Exception as e:
        print(m, "not importable:", type(e).__name__)
EOF
} | tee "$W/versions.txt"

# The cases asked for, in order, once each.
declare -A SEEN
CASES=()
add_case() {
  local c=$1
  [ -n "$c" ] || return
  if [ ! -f "$HD/cases/$c/case.json" ]; then echo "WARNING: no case $c"; return; fi
  [ -n "${SEEN[$c]:-}" ] && return
  SEEN[$c]=1
  CASES+=("$c")
}
[ $# -gt 0 ] || set -- smoke
for arg in "$@"; do
  IFS=", " read -r -a parts <<< "$arg"  # names, globs (matched against cases/ below), lists, @FILE
  for a in "${parts[@]}"; do
    if [ "$a" = all ]; then
      for d in "$HD"/cases/*/; do add_case "$(basename "$d")"; done
    elif [ "${a#@}" != "$a" ]; then
      while read -r c _; do case "$c" in ''|'#'*) ;; *) add_case "$c" ;; esac; done < "${a#@}"
    elif [ -f "$HD/lists/$a.txt" ]; then
      while read -r c _; do add_case "$c"; done < "$HD/lists/$a.txt"
    else
      matched=0
      for d in "$HD"/cases/$a; do
        if [ -f "$d/case.json" ]; then add_case "$(basename "$d")"; matched=1; fi
      done
      [ $matched = 1 ] || echo "WARNING: nothing matches $a"
    fi
  done
done
echo "== ${#CASES[@]} case(s): ${CASES[*]}"

# The sources the models run, as this machine has them (for zsim's activation model: docs name the version): the
# shared files, Llama's and GPT-2's, and each case's own family (its config.json's model_type): zsim_ds/harness/sources.py.
CASE_DIRS=()
for c in "${CASES[@]}"; do CASE_DIRS+=("cases/$c"); done
(cd "$HD" && "$PY" -m zsim_ds.harness.sources "$W/sources" "${CASE_DIRS[@]}") 2>&1 | tail -3

# Extensions carried from an earlier run (.devcarry/torch_extensions.tar: a tarball keeps the outputs' times, which
# ninja compares with its logs: an output newer than its recorded deps is rebuilt). The carried DeepSpeed sources are
# given an old time, so that no input is newer than the outputs, and no stale build lock is left: torch's JIT load
# then finds them up to date ("ninja: no work to do") instead of compiling again.
if [ -f "$ROOT/.devcarry/torch_extensions.tar" ]; then
  tar xf "$ROOT/.devcarry/torch_extensions.tar" -C "$TORCH_EXTENSIONS_DIR" && echo "== carried extensions unpacked"
fi
find "$DS_DIR" -type f -exec touch -h -d '2000-01-01 00:00:00' {} + 2>/dev/null
find "$TORCH_EXTENSIONS_DIR" -name lock -delete 2>/dev/null

PREBUILD_OK=1
if [ "$PREBUILD" = 1 ] && [ ${#CASES[@]} -gt 0 ]; then
  OPS=()
  need_gpu=0; need_cpu=0
  for c in "${CASES[@]}"; do
    if grep -q '"offload_optimizer"' "$HD/cases/$c/ds_config.json"; then need_cpu=1; else need_gpu=1; fi
  done
  [ $need_gpu = 1 ] && OPS+=(FusedAdamBuilder)
  [ $need_cpu = 1 ] && OPS+=(CPUAdamBuilder)
  for c in "${CASES[@]}"; do
    if grep -q '"zero_quantized_gradients": true' "$HD/cases/$c/ds_config.json"; then OPS+=(QuantizerBuilder); break; fi
  done
  t0=$(date +%s)
  timeout $(( $(left) - 30 > 30 ? $(left) - 30 : 30 )) "$PY" "$HD/zsim_ds/prebuild_ops.py" "${OPS[@]}" \
    > "$W/prebuild.log" 2>&1
  rc=$?
  grep '^PREBUILD' "$W/prebuild.log"
  echo "== prebuild ${OPS[*]}: exit $rc, $(( $(date +%s) - t0 )) s"
  if [ $rc != 0 ]; then
    PREBUILD_OK=0
    tail -25 "$W/prebuild.log"
  fi
fi

NOT_RUN=()
RAN=()
WHY="budget"
if [ $PREBUILD_OK = 0 ] && [ "$STOP_ON_PREBUILD_FAILURE" = 1 ]; then
  echo "== the extension build failed: no case run (STOP_ON_PREBUILD_FAILURE=0 runs them anyway)"
  WHY="the extension build failed"
  NOT_RUN=("${CASES[@]}")
else
  for c in "${CASES[@]}"; do
    l=$(left)
    if [ "$l" -lt "$MIN_START_S" ]; then NOT_RUN+=("$c"); continue; fi
    to=$CASE_TIMEOUT_S
    [ "$to" -gt $((l - 60)) ] && to=$((l - 60))
    [ "$to" -lt 30 ] && to=30
    t0=$(date +%s)
    # The harness kills its ranks at its own timeout and writes the result; the outer timeout is a backstop.
    # shellcheck disable=SC2086
    timeout -k 10 $((to + 45)) ${PIN_CPUS:+taskset -c "$PIN_CPUS"} "$PY" "$HD/harness.py" --case-dir "$HD/cases/$c" --out "$W/cases/$c.json" \
      --log-dir "$W/cases/$c.logs" --timeout "$to" ${STEPS:+--steps $STEPS} $HARNESS_ARGS \
      > "$W/cases/$c.harness.log" 2>&1 < /dev/null
    echo "== $c: exit $?, $(( $(date +%s) - t0 )) s (timeout $to s)"
    tail -1 "$W/cases/$c.harness.log"
    RAN+=("$c")
  done
fi
printf '%s\n' "${NOT_RUN[@]}" > "$W/not_run.txt"

# Pack: the results, the logs, the dumped sources and the built extensions (to carry next time, no build lock).
if [ -d "$TORCH_EXTENSIONS_DIR" ]; then
  # Smaller to carry (the builds use -g); ninja looks at times and commands, not at the objects' contents, so each
  # object keeps its time (a newer one would be rebuilt). To carry: copy torch_extensions.tar into .devcarry/.
  mkdir -p "$W/ext"
  (cd "$TORCH_EXTENSIONS_DIR" && tar cf - --exclude=lock . ) | (cd "$W/ext" && tar xf -)
  find "$W/ext" \( -name '*.o' -o -name '*.so' \) -print0 | while IFS= read -r -d '' f; do
    t=$(stat -c %.9Y "$f"); strip --strip-debug "$f" 2>/dev/null; touch -d "@$t" "$f"
  done
  tar cf "$W/torch_extensions.tar" --format=posix -C "$W/ext" . && rm -rf "$W/ext"
fi
# Profiles (--profile-steps) travel apart, in tarballs of at most ~15 MiB each (the device returns 8 files of 16 MiB).
mkdir -p "$WORK/traces"
find "$W" -name '*.trace.json.gz' | while read -r f; do
  rel=${f#"$W"/}; mkdir -p "$WORK/traces/$(dirname "$rel")"; mv "$f" "$WORK/traces/$rel"
done
part=0; bytes=0; list=$WORK/traces.list.0; : > "$list"
while read -r f; do
  sz=$(stat -c %s "$WORK/traces/$f")
  if [ $bytes -gt 0 ] && [ $((bytes + sz)) -gt $((15 * 1024 * 1024)) ]; then
    part=$((part + 1)); bytes=0; list=$WORK/traces.list.$part; : > "$list"
  fi
  echo "$f" >> "$list"; bytes=$((bytes + sz))
done < <(cd "$WORK/traces" && find . -name '*.trace.json.gz' | sort)
for l in "$WORK"/traces.list.*; do
  [ -s "$l" ] && tar cf "$OUT/deepspeed_traces.${l##*.}.tar" -C "$WORK/traces" -T "$l"
done
tar czf "$OUT/deepspeed_results.tgz" -C "$WORK" deepspeed_results
size=$(stat -c %s "$OUT/deepspeed_results.tgz")
if [ "$size" -gt $((15 * 1024 * 1024)) ]; then  # the device returns files of up to 16 MiB
  gzip -c "$W/torch_extensions.tar" > "$OUT/deepspeed_extensions.tar.gz"
  rm -f "$W/torch_extensions.tar"
  tar czf "$OUT/deepspeed_results.tgz" -C "$WORK" deepspeed_results
  echo "== extensions packed apart: $OUT/deepspeed_extensions.tar.gz"
fi
ls -l "$OUT"

echo "== summary ($(( $(date +%s) - START )) s; peaks are max_memory_allocated / max_memory_reserved per rank)"
for c in "${RAN[@]}"; do
  if [ -f "$W/cases/$c.json" ]; then
    "$PY" "$HD/harness.py" --summary "$W/cases/$c.json"
  else
    echo "$c: no result ($(tail -1 "$W/cases/$c.harness.log" 2>/dev/null))"
  fi
done
[ ${#NOT_RUN[@]} -gt 0 ] && echo "NOT RUN ($WHY): ${NOT_RUN[*]}"
exit 0
