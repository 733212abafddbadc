#!/usr/bin/env bash
# The GPU machine's driver for calibrate_node.py (issue 59): one machine's profile in one budget, written as
# $OUT/NAME.yaml and packed with every measurement and log into $OUT/calibration.tgz.
#
# Usage (from the repository root, with .devcarry/deepspeed-0.14.5 carried, as device_run.sh):
#   bash validate/deepspeed/device_calibrate.sh [NAME]          # NAME.yaml (default: node)
# Environment: BUDGET_S (calibrate_node.py's --budget-s, default 540: the command's 600 s less the packing and the
# machine's look), CAL_ARGS (more calibrate_node.py options, e.g. "--loop-speed-exponent fit"), DS_DIR, OUT.
# The extensions it builds stay in .devcarry/torch_extensions for device_run.sh's cases on the same machine, and come
# back as $OUT/torch_extensions.tar (put it in .devcarry/ to carry them to a fresh one).
set -u
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
NAME=${1:-node}
DS_DIR=${DS_DIR:-$ROOT/.devcarry/deepspeed-0.14.5}
OUT=${OUT:-/tmp/deepspeed_out}
BUDGET_S=${BUDGET_S:-540}
CAL_ARGS=${CAL_ARGS:-}

# The environment device_run.sh gives the cases (the same interpreter, DeepSpeed, NCCL and extension folder).
. validate/deepspeed/device_env.sh

mkdir -p "$OUT" "$TORCH_EXTENSIONS_DIR"
WORK=$(mktemp -d /tmp/dscal.XXXXXX)
W=$WORK/calibration
mkdir -p "$W"
exec > >(tee "$W/device_calibrate.log") 2>&1

echo "== device_calibrate.sh $NAME (budget ${BUDGET_S} s)"
if [ ! -d "$DS_DIR/site/deepspeed" ]; then
  echo "ERROR: no DeepSpeed at $DS_DIR/site/deepspeed (carry .devcarry with deepspeed-0.14.5 in it)"
  exit 2
fi
nvidia-smi -L 2>&1
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "repo: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
echo "cpus: $(nproc), memory: $(free -g 2>/dev/null | awk '/Mem:/ {print $2 " GiB"}')"
# As device_run.sh: the carried DeepSpeed sources older than any extension built from them, no stale build lock.
find "$DS_DIR" -type f -exec touch -h -d '2000-01-01 00:00:00' {} + 2>/dev/null
find "$TORCH_EXTENSIONS_DIR" -name lock -delete 2>/dev/null

t0=$(date +%s)
# shellcheck disable=SC2086
"$PY" validate/deepspeed/calibrate_node.py --out "$W/$NAME.yaml" --work "$W/$NAME.d" --budget-s "$BUDGET_S" \
  --python "$PY" $CAL_ARGS
rc=$?
echo "== calibrate_node.py: exit $rc, $(( $(date +%s) - t0 )) s"
[ -f "$W/$NAME.yaml" ] && cp "$W/$NAME.yaml" "$OUT/$NAME.yaml"
# The extensions it built, as device_run.sh packs them (stripped, their times kept): copied to .devcarry/ as
# torch_extensions.tar, a later device_run.sh on a fresh machine unpacks them instead of building again.
if [ -d "$TORCH_EXTENSIONS_DIR" ]; then
  mkdir -p "$WORK/ext"
  (cd "$TORCH_EXTENSIONS_DIR" && tar cf - --exclude=lock . ) | (cd "$WORK/ext" && tar xf -)
  find "$WORK/ext" \( -name '*.o' -o -name '*.so' \) -print0 | while IFS= read -r -d '' f; do
    t=$(stat -c %.9Y "$f"); strip --strip-debug "$f" 2>/dev/null; touch -d "@$t" "$f"
  done
  tar cf "$OUT/torch_extensions.tar" --format=posix -C "$WORK/ext" . && rm -rf "$WORK/ext"
fi
tar czf "$OUT/calibration.tgz" -C "$WORK" calibration
ls -l "$OUT"
exit 0
