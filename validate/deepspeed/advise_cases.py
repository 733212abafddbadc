#!/usr/bin/env python3
"""Writes the GPU check of `zsim advise` (issue 41): DeepSpeed harness cases for settings where the ds_config a user
starts from does not fit the GPU or runs slowly.

The code: zsim_ds/case_tools/advise_cases.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.case_tools.advise_cases import main

if __name__ == "__main__":
    sys.exit(main())
