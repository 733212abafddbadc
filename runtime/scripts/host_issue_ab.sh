#!/usr/bin/env bash
# The issuing thread's time per step (measured.host_issue_s) and the step time of suite cases under two zrun builds,
# run alternately (A, B, A, B, ...) so that the machine's drift falls on both: e.g. before and after a change to the
# executor's host work (B alone: one build). One GPU is enough (the 1g- cases); 2-GPU cases need 2. The reports (with
# their per-op host times, measured.host_issue_ops, for `zsim validate`) come back in $OUT/runs.tgz.
# Usage: A=.devcarry/base B=build/bin CASES="1g-small-s3 1g-medium-s3-ckpt" ROUNDS=2 bash runtime/scripts/host_issue_ab.sh
set -u
source "$(dirname "$0")/device_env.sh"
B=${B:?B: the folder of a zrun} A=${A:-}
BUILDS="A B"; [ -n "$A" ] || BUILDS=B
CASES=${CASES:-1g-small-s0 1g-small-s3 1g-medium-s3-ckpt}
ROUNDS=${ROUNDS:-2}
mkdir -p /tmp/zrun-nvme
for c in $CASES; do
  line=$(awk -F'\t' -v n="$c" '$1 == n' validate/suite/suite.tsv)
  [ -n "$line" ] || { echo "no case $c in validate/suite/suite.tsv"; continue; }
  gpus=$(cut -f2 <<< "$line"); scen=$(cut -f3 <<< "$line"); sets=$(cut -f5 <<< "$line")
  args=(); for s in $sets; do args+=(--set "$s"); done
  for r in $(seq "$ROUNDS"); do
    for v in $BUILDS; do
      dir=${!v}
      json="$OUT/$c.$v.$r.json"
      timeout 180 "$dir/zrun" "$scen" --here --nproc-per-node "$gpus" "${args[@]}" --steps 5 --warmup 2 --json "$json" \
        > "$OUT/$c.$v.$r.log" 2>&1 || { echo "$c $v round $r: zrun failed"; tail -3 "$OUT/$c.$v.$r.log"; continue; }
      $PY -c "import json,sys; m=json.load(open(sys.argv[1]))['measured']; print(f\"{sys.argv[2]:22s} {sys.argv[3]} round {sys.argv[4]}: host issue {m['host_issue_s']*1e3:7.3f} ms, step {m['step_time_s']*1e3:8.3f} ms\")" \
        "$json" "$c" "$v" "$r"
    done
  done
done
(cd "$OUT" && tar czf runs.tgz ./*.json ./*.log && rm -f ./*.json ./*.log)
