#!/usr/bin/env python3
"""Summarises the harness's profiles (--profile-steps): per phase of the profiled step, the host's wall time, the GPU's
busy time and its kernels by class, the kernels launched, the top-level torch ops, and DeepSpeed's annotated
methods.

The code: zsim_ds/fit/profile_summary.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.fit.profile_summary import main

if __name__ == "__main__":
    sys.exit(main())
