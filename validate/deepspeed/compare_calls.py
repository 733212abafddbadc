#!/usr/bin/env python3
"""zsim's collective calls against DeepSpeed's, per (phase, op, group size), on the recorded multi-rank cases.

The code: zsim_ds/case_tools/compare_calls.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.case_tools.compare_calls import main

if __name__ == "__main__":
    sys.exit(main())
