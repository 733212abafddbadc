#!/usr/bin/env bash
# The include rules of docs/architecture.md ("Which folder may include which"): every #include "..." of a file
# outside tests names a folder its layer may use. Run by CTest (layers_test); prints each violation, exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

# layer -> the folders its non-test files may include (besides their own).
declare -A allowed=(
  [sim/common]=""
  [cost_models]="sim/common"
  [sim/schedule]="sim/common"
  [sim/scenario]="sim/common cost_models"
  [sim/topology]="sim/common sim/scenario"
  [sim/sweep]="sim/common"
  [sim/plan]="sim/common sim/scenario sim/schedule"
  [sim/report]="sim/common sim/scenario sim/schedule sim/plan"
  [sim/engine]="sim/common sim/scenario sim/schedule sim/topology sim/report cost_models"
  [sim/advise]="sim/common sim/scenario sim/schedule sim/topology sim/plan sim/report sim/engine sim/sweep cost_models"
  [sim/cli]="sim/common sim/scenario sim/schedule sim/topology sim/plan sim/report sim/engine sim/sweep sim/advise cost_models"
  [kernels]=""
  [validate]="sim/common sim/scenario sim/schedule sim/topology sim/plan sim/report sim/engine sim/advise sim/cli cost_models"
  [runtime]="sim/common sim/scenario sim/schedule sim/topology sim/plan sim/report sim/engine cost_models kernels"
  [apps]="sim/cli validate"
  [bench]="sim/common sim/scenario sim/schedule sim/topology sim/plan sim/report sim/engine sim/sweep sim/advise sim/cli cost_models"
)
# Tests (*_test.cpp, tests/ folders) may include test helpers and the layers below the top: nothing above sim/ from
# inside it, and cost_models' tests only sim/common.
layer_of() {
  case "$1" in
    sim/*/*) echo "${1%%/*}/$(echo "$1" | cut -d/ -f2)" ;;
    *) echo "${1%%/*}" ;;
  esac
}
bad=0
while IFS= read -r f; do
  from=$(layer_of "$f")
  [ -n "${allowed[$from]+x}" ] || continue
  while IFS= read -r inc; do
    to=$(layer_of "$inc")
    [ "$to" = "$from" ] && continue
    case "$f" in
      *_test.cpp|*_test.cu|*/tests/*|*test_*.hpp)
        if [[ ($from == sim/* && ($to == validate || $to == runtime || $to == apps)) ||
              ($from == cost_models && $to != sim/common) ]]; then
          echo "$f: a test of $from includes $inc (docs/architecture.md)"; bad=1
        fi
        continue ;;
    esac
    ok=0
    for a in ${allowed[$from]}; do [ "$a" = "$to" ] && ok=1; done
    if [ $ok = 0 ]; then echo "$f: $from may not include $inc (docs/architecture.md)"; bad=1; fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
[ $bad = 0 ] && echo "layers: every include follows docs/architecture.md"
exit $bad
