#!/usr/bin/env python3
"""Writes the DeepSpeed validation cases from cases.tsv.

The code: zsim_ds/case_tools/make_cases.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.case_tools.make_cases import main

if __name__ == "__main__":
    sys.exit(main())
