#!/usr/bin/env bash
# Record DS-F (issue 56) on one H200 in one device call (timeout_s 530, carry [".devcarry"]): list 'families' of
# validate/deepspeed in three device_run.sh lanes. The multi-rank cases (their memory per rank and their collectives
# are the record; ranks sharing one GPU time no multi-GPU step) run in two lanes side by side, the second starting
# once the first has JIT-built FusedAdam; then the one-rank cases run alone, one after another, so that their step
# times are those of an otherwise idle GPU and host. Each lane packs $OUT/<lane>/deepspeed_results.tgz.
#
#   bash validate/results/h200-deepspeed-families/session-1.sh        # from the repository root (this tree's root:
#                                                                       # the folder three levels above this file)
# Environment: DS_DIR (default ROOT/.devcarry/deepspeed-0.14.5), OUT (default /tmp/deepspeed_out), END_S (default 470:
# the one-rank lane's budget ends this many seconds after the start).
ROOT=$(cd "$(dirname "$0")/../../.." && pwd) || exit 2
cd "$ROOT" || exit 2
export DS_DIR=${DS_DIR:-$ROOT/.devcarry/deepspeed-0.14.5} MIN_START_S=30 CASE_TIMEOUT_S=100
OUT=${OUT:-/tmp/deepspeed_out}
END_S=${END_S:-470}
L=validate/deepspeed/lists/families.txt
T=$(mktemp -d /tmp/dsf.XXXXXX)
grep -- '-w[24]-' $L > "$T/multi.txt"; grep -- '-w1-' $L > "$T/one.txt"
n=$(wc -l < "$T/multi.txt"); h=$(( (n + 1) / 2 ))
head -n $h "$T/multi.txt" > "$T/m1.txt"; tail -n +$((h + 1)) "$T/multi.txt" > "$T/m2.txt"
echo "== lanes: m1 $(tr '\n' ' ' < "$T/m1.txt")| m2 $(tr '\n' ' ' < "$T/m2.txt")| w1 $(tr '\n' ' ' < "$T/one.txt")"
BUDGET_S=230 OUT=$OUT/m1 bash validate/deepspeed/device_run.sh "@$T/m1.txt" > "$T/m1.log" 2>&1 &
for _ in $(seq 120); do
  find .devcarry/torch_extensions -name 'fused_adam*.so' 2>/dev/null | grep -q . && break; sleep 1
done
sleep 3
echo "== m2 starts at ${SECONDS} s"
PREBUILD=0 BUDGET_S=$((235 - SECONDS)) OUT=$OUT/m2 bash validate/deepspeed/device_run.sh "@$T/m2.txt" > "$T/m2.log" 2>&1 &
wait
echo "== w1 starts at ${SECONDS} s"
PREBUILD=0 BUDGET_S=$((END_S - SECONDS)) OUT=$OUT/w1 bash validate/deepspeed/device_run.sh "@$T/one.txt" > "$T/w1.log" 2>&1
echo "== done at ${SECONDS} s"
for l in m1 m2 w1; do
  echo "=== lane $l"
  grep -E '^== |PREBUILD' "$T/$l.log" | grep -v '^== summary' | cut -c1-200
  sed -n '/^== summary/,$p' "$T/$l.log"
done
ls -lR "$OUT"
