#!/usr/bin/env bash
# Record DS-M (issue 57) on one H200 in one device call (timeout_s 570, carry [".devcarry"]): list 'moe' of
# validate/deepspeed in three device_run.sh lanes. The multi-rank cases (their memory per rank and their collectives
# are the record; ranks sharing one GPU time no multi-GPU step) run in two lanes side by side, the second starting
# once the first has JIT-built FusedAdam; each lane runs its cases with leaf modules first, and each stage-3 case
# without them right after its twin with them. Then the one-rank cases run alone, one after another, so that their
# step times are those of an otherwise idle GPU and host. Each lane packs $OUT/<lane>/deepspeed_results.tgz.
#
#   bash validate/results/h200-deepspeed-moe/session-1.sh        # from the repository root (this tree's root: the
#                                                                  # folder three levels above this file)
# Environment: DS_DIR (default ROOT/.devcarry/deepspeed-0.14.5), OUT (default /tmp/deepspeed_out), END_S (default 515:
# the one-rank lane's budget ends this many seconds after the start), MULTI_S (default 285: the multi-rank lanes'
# budget, from the start). device_run.sh gives a case at most what its lane has left less 60 s and starts none with
# less than MIN_START_S (100 here) left: each case started gets 40 s or more (a 4-rank stage-3 Mixtral case about 55 s
# by DS-A's 150M times scaled), and a lane ends about 40 s before its budget, the last one by about 475 s.
ROOT=$(cd "$(dirname "$0")/../../.." && pwd) || exit 2
cd "$ROOT" || exit 2
export DS_DIR=${DS_DIR:-$ROOT/.devcarry/deepspeed-0.14.5} MIN_START_S=100 CASE_TIMEOUT_S=150
OUT=${OUT:-/tmp/deepspeed_out}
END_S=${END_S:-515}
MULTI_S=${MULTI_S:-285}
L=validate/deepspeed/lists/moe.txt
T=$(mktemp -d /tmp/dsm.XXXXXX)
# The lanes by name (Mixtral's 443M in m1, Qwen3-MoE's 288M in m2: about even); any case of the list not named
# here goes to the lane it belongs to by its world (a check that the list and this script agree).
cat > "$T/m1.txt" <<'LANE'
mixtral-z3-w4-mb1-s1024-sdpa-ckpt-leaf
mixtral-z3-w2-mb2-s1024-sdpa-leaf
mixtral-z3-w2-mb2-s1024-sdpa
mixtral-z2-w2-mb2-s2048-sdpa-ckpt
LANE
cat > "$T/m2.txt" <<'LANE'
qwen3moe-z3-w4-mb1-s1024-sdpa-leaf
qwen3moe-z3-w4-mb1-s1024-sdpa
qwen3moe-z3-w2-mb2-s2048-sdpa-ckpt-leaf
qwen3moe-z2-w4-mb1-s1024-sdpa
LANE
grep -- '-w1-' $L > "$T/one.txt"
for c in $(grep -v -- '-w1-' $L); do
  grep -qx -- "$c" "$T/m1.txt" "$T/m2.txt" || { echo "== $c: in list moe but in no lane: added to m2"; echo "$c" >> "$T/m2.txt"; }
done
for c in $(cat "$T/m1.txt" "$T/m2.txt"); do
  grep -qx -- "$c" $L || echo "== WARNING: lane case $c is not in list moe (device_run.sh warns and skips a missing one)"
done
echo "== lanes: m1 $(tr '\n' ' ' < "$T/m1.txt")| m2 $(tr '\n' ' ' < "$T/m2.txt")| w1 $(tr '\n' ' ' < "$T/one.txt")"
BUDGET_S=$MULTI_S OUT=$OUT/m1 bash validate/deepspeed/device_run.sh "@$T/m1.txt" > "$T/m1.log" 2>&1 &
for _ in $(seq 120); do
  find .devcarry/torch_extensions -name 'fused_adam*.so' 2>/dev/null | grep -q . && break; sleep 1
done
sleep 3
echo "== m2 starts at ${SECONDS} s"
PREBUILD=0 BUDGET_S=$((MULTI_S + 5 - SECONDS)) OUT=$OUT/m2 bash validate/deepspeed/device_run.sh "@$T/m2.txt" > "$T/m2.log" 2>&1 &
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
