"""host_speed_signals.py: which per-step host figure follows the step.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from zsim_ds.fit import host_speed_signals as hs  # noqa: E402


def timing(steps, loops, autograd_loops=None):
    kinds = ["warmup"] + ["timed"] * len(steps)
    hosts = [{"reference_work_seconds": 9.0}]  # the warm-up step's, never read
    for i, loop in enumerate(loops):
        h = {"reference_work_seconds": loop, "cpu_seconds": 0.01}
        if autograd_loops is not None:
            h["autograd_reference_work_seconds"] = autograd_loops[i]
        hosts.append(h)
    return {"step_seconds": steps, "step_kinds": kinds, "host_per_step": hosts}


class Correlation(unittest.TestCase):
    def test_a_figure_that_rises_with_the_step_correlates_fully(self):
        self.assertAlmostEqual(hs.correlation([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)

    def test_one_that_falls_correlates_negatively(self):
        self.assertAlmostEqual(hs.correlation([1, 2, 3], [3, 2, 1]), -1.0)

    def test_a_constant_figure_has_no_correlation(self):
        self.assertIsNone(hs.correlation([1, 2, 3], [5, 5, 5]))


class SignalsOf(unittest.TestCase):
    def test_pairs_each_timed_step_with_its_own_figures(self):
        rs, steps = hs.signals_of(timing([0.10, 0.20, 0.30], [1.0, 2.0, 3.0], autograd_loops=[3.0, 2.0, 1.0]))
        self.assertEqual(steps, [0.10, 0.20, 0.30])
        self.assertAlmostEqual(rs["main loop"], 1.0)
        self.assertAlmostEqual(rs["autograd loop"], -1.0)
        self.assertIsNone(rs["main cpu"])  # constant

    def test_a_figure_the_result_lacks_is_none(self):
        rs, _ = hs.signals_of(timing([0.1, 0.2, 0.3], [1.0, 2.0, 4.0]))
        self.assertIsNone(rs["autograd loop"])
        self.assertIsNone(rs["autograd cpu"])


if __name__ == "__main__":
    unittest.main()
