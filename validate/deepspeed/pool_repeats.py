#!/usr/bin/env python3
"""Pools the repeated runs of a record folder's DeepSpeed cases into one result per case.

The code: zsim_ds/fit/pool_repeats.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.fit.pool_repeats import main

if __name__ == "__main__":
    sys.exit(main())
