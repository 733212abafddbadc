"""probe_torch_kernels.py's figures for a profile, without torch: both families' rows pooled by bytes and times.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probes"))

import probe_torch_kernels as ptk  # noqa: E402


def row(family, kind, fwd_bytes, fwd_ms, bwd_bytes, bwd_ms):
    return {"family": family, "kind": kind, "zsim_forward_bytes": fwd_bytes, "forward_ms": fwd_ms,
            "zsim_backward_bytes": bwd_bytes, "backward_ms": bwd_ms}


class PooledFigures(unittest.TestCase):
    def test_families_pool_by_their_bytes_over_their_times(self):
        result = {"hbm_bytes_per_s": 1e12, "rows": [row("llama", "norm", 3e9, 2.0, 1e9, 2.0),
                                                    row("gpt2", "norm", 1e9, 6.0, 1e9, 2.0)]}
        figures = ptk.pooled_figures(result)
        self.assertAlmostEqual(figures["norm"], 4e9 / 8e-3 / 1e12)
        self.assertAlmostEqual(figures["norm_backward"], 2e9 / 4e-3 / 1e12)

    def test_a_failed_row_is_left_out_and_a_kind_without_rows_has_no_key(self):
        failed = {"family": "gpt2", "kind": "softmax", "zsim_forward_bytes": 1e9, "zsim_backward_bytes": 1e9,
                  "error": "OutOfMemoryError"}
        result = {"hbm_bytes_per_s": 1e12, "rows": [row("llama", "softmax", 2e9, 4.0, 2e9, 8.0), failed]}
        figures = ptk.pooled_figures(result)
        self.assertAlmostEqual(figures["softmax"], 0.5)
        self.assertAlmostEqual(figures["softmax_backward"], 0.25)
        self.assertNotIn("norm", figures)


if __name__ == "__main__":
    unittest.main()
