#!/usr/bin/env python3
"""A session's DeepSpeed runs predicted with a machine's own profile (calibrate_node.py's), beside the committed H200
profile on the run's GPU preset:

    python3 validate/deepspeed/predict_node.py RESULTS_DIR [...] --profile my-node.yaml [--zsim build/bin/zsim]

The code: zsim_ds/calibrate/predict.py; this file is the command docs cite."""
import sys

from zsim_ds.calibrate.predict import main

if __name__ == "__main__":
    sys.exit(main())
