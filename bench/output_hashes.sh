#!/usr/bin/env bash
# Prints a sha256 per output of every bundled scenario (terminal, --json, --trace, --csv for 1-3 steps;
# terminal and --json again without --trace / --csv, which is where zsim prices repeated micro-steps once
# when grad_accum >= 16; `zsim plan --emit-schedule`), for before/after diffs of speed changes:
#   bench/output_hashes.sh OLD_ZSIM > old.txt; bench/output_hashes.sh build/bin/zsim > new.txt; diff old.txt new.txt
set -euo pipefail
zsim="$(realpath "${1:?usage: bench/output_hashes.sh ZSIM_BINARY}")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for f in scenarios/*.yaml; do
  b="$(basename "$f" .yaml)"
  for st in 1 2 3; do
    "$zsim" "$f" --steps "$st" --json "$tmp/$b.$st.json" --trace "$tmp/$b.$st.trace.json" --csv "$tmp/$b.$st.csv" \
      > "$tmp/$b.$st.txt" 2>&1
    "$zsim" "$f" --steps "$st" --json "$tmp/$b.$st.plain.json" > "$tmp/$b.$st.plain.txt" 2>&1
  done
  "$zsim" plan "$f" --emit-schedule "$tmp/$b.sched.json" > /dev/null 2>&1
  (cd "$tmp" && sha256sum "$b".* && rm -f "$b".*)
done
