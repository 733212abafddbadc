"""probe_cpu_adam.py's figures for a profile, without torch or DeepSpeed.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probes"))

import probe_cpu_adam as pca  # noqa: E402


class ProfileFigures(unittest.TestCase):
    def test_each_thread_count_that_ran_gives_its_rate_in_thread_order(self):
        result = {"rows": [{"threads": 4, "params_per_s": 2e9}, {"threads": 1, "params_per_s": 6e8},
                           {"threads": 2, "error": "RuntimeError: build failed"}]}
        self.assertEqual(pca.profile_figures(result), {"threads_1": 6e8, "threads_4": 2e9})

    def test_summarize_prints_the_profile_block(self):
        result = {"params": 1024, "cpus": 16, "default_threads": 16,
                  "rows": [{"threads": 16, "params_per_s": 3.5e9}]}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cpu_adam.json")
            with open(path, "w") as f:
                json.dump(result, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(pca.main(["--summarize", path]), 0)
        self.assertIn("    cpu_adam_measured: {ranks_1: {threads_16: 3.5e+09}}\n", out.getvalue())


if __name__ == "__main__":
    unittest.main()
