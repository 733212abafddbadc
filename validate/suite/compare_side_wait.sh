#!/usr/bin/env bash
# zsim against the measured runs of a results folder twice: with the side kernels' wait for the running GEMM
# (efficiency.beside_compute_wait, the rate after it and the GEMMs' loss after it: calibrate's fit since 2026-11-29)
# and without (one fraction per side kind at its largest size, as before), both refitted from the folder's own
# calibrate record, nothing fitted on the runs. Needs a record that has the GEMM's time beside each side call (calibrate
# since 2026-11-29); runs on any machine (no GPU).
#
#   validate/suite/compare_side_wait.sh validate/results/h200/one-gpu-wait h200
#
# Prints, for each: the summary's targets, and per op kind the median |error| and median signed error over every op of
# every run (collectives, copies, compute). Leaves both folders' validations in $TMPDIR (the last line says where).
set -eu
cd "$(dirname "$0")/../.."
SRC=${1:?usage: compare_side_wait.sh RESULTS_DIR GPU_TAG}
TAG=${2:?usage: compare_side_wait.sh RESULTS_DIR GPU_TAG}
BIN=${ZSIM_BIN_DIR:-build/bin}
PROFILE="$SRC/calibrated-$TAG.yaml"
[ -f "$PROFILE" ] || { echo "compare_side_wait.sh: no $PROFILE" >&2; exit 2; }
WORK=$(mktemp -d)
for mode in wait no-wait; do
  mkdir -p "$WORK/$mode"
  ln -s "$(realpath "$SRC/runs")" "$WORK/$mode/runs"
  "$BIN/zrun" calibrate --refit "$PROFILE" --out "$WORK/$mode/calibrated-$TAG.yaml" \
    $([ $mode = no-wait ] && echo --no-side-wait) > "$WORK/$mode/refit.log"
  # KEEP_OPS_CSV: each run's per-op times stay beside its plots.
  RESULTS="$WORK/$mode" GPU_TAG=$TAG ZSIM_BIN_DIR=$BIN KEEP_OPS_CSV=1 validate/suite/run_suite.sh --validate-only \
    > "$WORK/$mode/validate.log" 2>&1
done
grep -q "beside_compute_wait" "$WORK/wait/calibrated-$TAG.yaml" ||
  echo "compare_side_wait.sh: the record has no GEMM time beside the side calls: both fits are the same"
for mode in wait no-wait; do
  echo "== $mode: $(grep -c . "$WORK/$mode/calibrated-$TAG.yaml") profile lines, $(ls "$WORK/$mode/validation" | grep -c '\.calibrated\.json$') runs"
  grep -E '^\| (step time|per-collective|exposed)' "$WORK/$mode/summary.md" || true
  # Per op kind over every run: each op's signed error from the validation's per-op CSV (zsim validate --plots).
  cat "$WORK/$mode"/plots/*/ops.csv | awk -F, '$1 != "id" && $6 > 0 { print $3, ($5 - $6) / $6 }' |
    sort -k1,1 -k2,2g | awk '
      function report(k,   m, a, i, j, t) {
        m = (n % 2) ? e[(n + 1) / 2] : (e[n / 2] + e[n / 2 + 1]) / 2
        for (i = 1; i <= n; i++) a[i] = e[i] < 0 ? -e[i] : e[i]
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        printf "  %-24s %6d ops  median |error| %6.1f%%  median %+6.1f%%\n", k, n, 100 * ((n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), 100 * m
      }
      $1 != kind { if (n) report(kind); kind = $1; n = 0 }
      { e[++n] = $2 }
      END { if (n) report(kind) }'
done
echo "(validations in $WORK)"
