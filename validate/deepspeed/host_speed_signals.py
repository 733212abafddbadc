#!/usr/bin/env python3
"""Which per-step host figure follows a DeepSpeed case's step time (issue 39: the host's speed moves within a run).

The code: zsim_ds/fit/host_speed_signals.py (its docstring says how to run it); this file is the command docs cite."""
import sys

from zsim_ds.fit.host_speed_signals import main

if __name__ == "__main__":
    sys.exit(main())
