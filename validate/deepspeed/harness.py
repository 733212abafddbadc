#!/usr/bin/env python3
"""Runs one case of real DeepSpeed and records what zsim predicts (zsim_ds/harness/run_case.py says how):

    python3 validate/deepspeed/harness.py --case-dir cases/<name> --out result.json [--world W] [--steps N]
    python3 validate/deepspeed/harness.py --summary result.json [...]

Each rank is this file again with --worker (the parent launches `sys.executable harness.py --worker ...`)."""
import sys

from zsim_ds.harness.run_case import main

if __name__ == "__main__":
    sys.exit(main())
