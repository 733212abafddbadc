"""compare_calls.py: how a record's calls map onto the schedule's collectives, and the per-key sums.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no zsim needed for these)"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from zsim_ds.case_tools import compare_calls as cc  # noqa: E402


def run_with(calls):
    return {"ranks": [{"collectives": {"calls": calls}}]}


class MeasuredCallsTest(unittest.TestCase):
    def test_an_all_gather_counts_its_output_and_a_reduce_scatter_its_input(self):
        run = run_with([
            {"phase": "forward", "op": "all_gather_into_tensor", "group_size": 2, "input_bytes": 10, "output_bytes": 20,
             "dtype": "bfloat16", "count": 3},
            {"phase": "backward", "op": "reduce_scatter_tensor", "group_size": 2, "input_bytes": 40, "output_bytes": 20,
             "dtype": "bfloat16", "count": 1},
            {"phase": "step", "op": "all_reduce", "group_size": 2, "input_bytes": 8, "output_bytes": 8,
             "dtype": "float64", "count": 1},
        ])
        self.assertEqual(cc.measured_calls(run), [("forward", "all_gather", 2, 20, "bf16", 3),
                                                  ("backward", "reduce_scatter", 2, 40, "bf16", 1),
                                                  ("step", "all_reduce", 2, 8, "fp64", 1)])

    def test_a_run_without_a_collectives_step_has_no_calls(self):
        self.assertIsNone(cc.measured_calls({"ranks": [{"collectives": {"init": None}}]}))
        self.assertIsNone(cc.measured_calls({"ranks": []}))

    def test_calls_and_bytes_sum_per_phase_op_and_group(self):
        keyed = cc.by_key([("forward", "all_gather", 2, 20, "bf16", 3), ("forward", "all_gather", 2, 6, "bf16", 1)])
        self.assertEqual(dict(keyed), {("forward", "all_gather", 2): [4, 66]})


if __name__ == "__main__":
    unittest.main()
