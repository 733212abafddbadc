#!/usr/bin/env bash
# The suite on the lent GPU machine (whose checkout is main's, without this folder): the binaries and the suite
# are carried in CARRY (default .devcarry/calibrate: bin/zrun, suite/), placed where run_suite.sh expects them,
# measured (--measure-only), and packed into $OUT/results.tgz (the device tool returns few files). Validate on
# the host afterwards: tar xzf results.tgz -C validate/results && GPU_TAG=h100 validate/suite/run_suite.sh --validate-only
set -u
CARRY=${CARRY:-.devcarry/calibrate}
source runtime/scripts/device_env.sh
mkdir -p validate/suite
cp "$CARRY"/suite/* validate/suite/
export ZRUN_BIN_DIR=$CARRY/bin
TAG=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | grep -oE 'h200|h100|a100|v100' | head -1)
export RESULTS=$OUT/results/$TAG
nvidia-smi -L > "$OUT/suite.log"
bash validate/suite/run_suite.sh --measure-only "$@" >> "$OUT/suite.log" 2>&1
echo "run_suite.sh exit $?" >> "$OUT/suite.log"
tar czf "$OUT/results.tgz" -C "$OUT/results" "$TAG"
ls -la "$RESULTS" "$RESULTS/runs" >> "$OUT/suite.log"
