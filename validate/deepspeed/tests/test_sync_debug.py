"""sync_debug.py: counting the host's waits for the GPU that torch's sync debug mode reports, by the line that made
them. Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import os
import sys
import types
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from zsim_ds.harness import sync_debug  # noqa: E402


class FakeCuda:
    def __init__(self):
        self.modes = []

    def set_sync_debug_mode(self, mode):
        self.modes.append(mode)


def a_deepspeed_line():
    warnings.warn("called a synchronizing CUDA operation")


class SyncDebugTest(unittest.TestCase):
    def setUp(self):
        self.cuda = FakeCuda()
        self.torch = types.SimpleNamespace(cuda=self.cuda)

    def test_each_warning_counts_once_at_the_line_that_made_the_call(self):
        with sync_debug.SyncDebug(self.torch) as sd:
            for _ in range(3):
                a_deepspeed_line()
        sites = sd.sites()
        self.assertEqual(sites[0]["calls"], 3)
        self.assertIn("a_deepspeed_line", sites[0]["site"])
        self.assertEqual(sites[0]["message"], "called a synchronizing CUDA operation")

    def test_the_mode_is_on_inside_and_back_to_default_after(self):
        with sync_debug.SyncDebug(self.torch):
            self.assertEqual(self.cuda.modes, ["warn"])
        self.assertEqual(self.cuda.modes, ["warn", "default"])

    def test_the_warning_machinery_is_restored(self):
        before = (warnings.showwarning, list(warnings.filters))
        with sync_debug.SyncDebug(self.torch):
            a_deepspeed_line()
        self.assertEqual((warnings.showwarning, list(warnings.filters)), before)

    def test_frames_inside_torch_are_skipped_for_the_caller(self):
        stack = [types.SimpleNamespace(filename="/x/deepspeed/runtime/zero/stage3.py", lineno=12, name="step"),
                 types.SimpleNamespace(filename=os.sep.join(["", "x", "torch", "cuda", "__init__.py"]), lineno=3,
                                       name="synchronize")]
        self.assertEqual(sync_debug._site(stack), "/x/deepspeed/runtime/zero/stage3.py:12 step")

    def test_the_sync_clock_wrapper_is_skipped_for_the_caller(self):
        host_cpu = os.path.join(os.path.dirname(os.path.abspath(sync_debug.__file__)), "host_cpu.py")
        stack = [types.SimpleNamespace(filename="/x/deepspeed/runtime/zero/stage3.py", lineno=12, name="step"),
                 types.SimpleNamespace(filename=host_cpu, lineno=40, name="timed"),
                 types.SimpleNamespace(filename=os.sep.join(["", "x", "torch", "cuda", "__init__.py"]), lineno=3,
                                       name="synchronize")]
        self.assertEqual(sync_debug._site(stack), "/x/deepspeed/runtime/zero/stage3.py:12 step")


if __name__ == "__main__":
    unittest.main()
