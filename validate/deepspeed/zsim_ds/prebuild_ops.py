"""JIT-builds (loads) the DeepSpeed ops named on the command line, e.g. FusedAdamBuilder CPUAdamBuilder, one line each:
`PREBUILD <name>: ok in <s> s` or `... FAILED ...` after its traceback; exit 1 if any failed. Run by device_run.sh
and calibrate_node.py before the cases, so that no case pays for a build. Standalone: DeepSpeed on the Python path."""
import sys
import time
import traceback

import deepspeed.ops.op_builder as ob

bad = 0
for name in sys.argv[1:]:
    t = time.time()
    try:
        getattr(ob, name)().load()
        print(f"PREBUILD {name}: ok in {time.time() - t:.1f} s", flush=True)
    except Exception as e:  # noqa: BLE001 (reported per op)
        bad += 1
        traceback.print_exc()
        print(f"PREBUILD {name}: FAILED in {time.time() - t:.1f} s: {type(e).__name__}: {e}", flush=True)
sys.exit(1 if bad else 0)
