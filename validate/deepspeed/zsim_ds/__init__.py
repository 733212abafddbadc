"""validate/deepspeed's code, by part (README.md beside this folder says what a user runs):

    harness/     running one case: the parent (run_case), a rank (worker), memory, buffers, collectives, timing
                 (host_cpu, sync_debug, the profiler), the case folder and the run JSON
    case_tools/  the cases and lists: make_cases, advise_cases; zsim's calls and advice against the records
    fit/         zsim's host figures fitted from the phase-timed runs, repeats pooled, profiles summarised
    calibrate/   one machine's profile in one budget (calibrate_node.py), and a session predicted with it

The scripts validate/deepspeed/*.py are thin entries into these modules (the commands docs and records cite).
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # validate/deepspeed/
