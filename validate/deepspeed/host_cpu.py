#!/usr/bin/env python3
"""Times the reference loop on this host and prints the zsim override that predicts a DeepSpeed step at this host's
speed (zsim_ds/harness/host_cpu.py; docs/deepspeed-time.md, "The host's speed"):

    python3 validate/deepspeed/host_cpu.py [--samples N]
"""
import sys

from zsim_ds.harness.host_cpu import main

if __name__ == "__main__":
    sys.exit(main())
