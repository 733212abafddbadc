#!/usr/bin/env python3
"""One command on your GPU machine: measure it under the DeepSpeed, torch and transformers found there and write ONE
zsim hardware profile that `cluster.profile` loads (docs/deepspeed-time.md, "Predicting your own machine"):

    python3 validate/deepspeed/calibrate_node.py --out my-node.yaml [--budget-s 600] [--zrun build/bin/zrun]

The code: zsim_ds/calibrate/node.py (its docstring says what it runs); this file is the command docs cite."""
import sys

from zsim_ds.calibrate.node import main

if __name__ == "__main__":
    sys.exit(main())
