#!/usr/bin/env python3
"""The verdict of `zsim advise`'s GPU check (issue 41) from the harness's results of the advise cases.

The code: zsim_ds/case_tools/compare_advise.py (its docstring: how to run it); this file is the command docs cite."""
import sys

from zsim_ds.case_tools.compare_advise import main

if __name__ == "__main__":
    sys.exit(main())
