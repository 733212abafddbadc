#!/usr/bin/env python3
"""Fits zsim's DeepSpeed host model (efficiency.deepspeed_host) from the harness's phase-timed micro-runs.

The code: zsim_ds/fit/fit_host.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.fit.fit_host import main

if __name__ == "__main__":
    sys.exit(main())
