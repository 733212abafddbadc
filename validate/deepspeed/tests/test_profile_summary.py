"""profile_summary.py: phases, GPU busy time and kernel classes from a profiler trace.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no torch needed)"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from zsim_ds.fit import profile_summary as ps  # noqa: E402


def X(cat, name, ts, dur, tid=1):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}


class ProfileSummaryTest(unittest.TestCase):
    def test_a_phases_kernels_are_those_that_start_inside_it_and_overlaps_count_once(self):
        events = [X("user_annotation", "zsim.forward", 0, 1000), X("user_annotation", "zsim.backward", 1000, 1000),
                  X("kernel", "ampere_bf16_gemm", 100, 200), X("kernel", "elementwise_kernel", 200, 200),
                  X("kernel", "flash_fwd", 900, 300),  # starts in forward, ends in backward: forward's
                  X("gpu_memcpy", "Memcpy DtoD", 1100, 50),
                  X("cpu_op", "aten::mm", 10, 50), X("cpu_op", "aten::addmm", 20, 5),  # nested: not top level
                  X("cpu_op", "aten::mul", 100, 10),
                  X("user_annotation", "ds.DeepSpeedEngine.forward", 5, 900)]
        s = ps.summarize(events)
        f, b = s["forward"][0], s["backward"][0]
        self.assertEqual(f["kernels"], 3)
        self.assertAlmostEqual(f["gpu_busy_ms"], (400 - 100 + 300) / 1e3)
        self.assertEqual(f["gpu_ms_by_class"], {"attn": 0.3, "gemm": 0.2, "other": 0.2})
        self.assertEqual(f["top_level_ops"], 2)
        self.assertEqual(f["deepspeed_ms"], {"ds.DeepSpeedEngine.forward": 0.9})
        self.assertEqual(b["gpu_ms_by_class"], {"memcpy": 0.05})

    def test_runtime_calls_are_counted_and_timed_by_name_and_each_threads_ops_are_unioned(self):
        events = [X("user_annotation", "zsim.backward", 0, 1000),
                  X("cuda_runtime", "cudaLaunchKernel", 10, 5), X("cuda_runtime", "cudaLaunchKernel", 20, 7),
                  X("cuda_runtime", "cudaMalloc", 30, 400),
                  X("cpu_op", "aten::mm", 100, 100, tid=1), X("cpu_op", "aten::addmm", 150, 100, tid=1),
                  X("cpu_op", "aten::mul", 100, 30, tid=2)]
        b = ps.summarize(events)["backward"][0]
        self.assertEqual(b["runtime_calls"], {"cudaMalloc": {"calls": 1, "ms": 0.4},
                                              "cudaLaunchKernel": {"calls": 2, "ms": 0.012}})
        self.assertEqual(b["thread_busy_ms"], {"1": 0.15, "2": 0.03})

    def test_host_waits_are_the_blocking_runtime_calls_by_the_op_and_method_around_them_on_their_thread(self):
        events = [X("user_annotation", "zsim.backward", 0, 1000),
                  X("user_annotation", "ds.Stage3.reduce", 100, 500, tid=2),
                  X("cpu_op", "aten::item", 150, 100, tid=2), X("cpu_op", "aten::_local_scalar_dense", 160, 80, tid=2),
                  X("cuda_runtime", "cudaMemcpyAsync", 170, 5, tid=2),
                  X("cuda_runtime", "cudaStreamSynchronize", 180, 50, tid=2),  # in .item(), in the method
                  X("cuda_runtime", "cudaEventSynchronize", 700, 30, tid=1),   # on the main thread, no op around it
                  X("cpu_op", "aten::mul", 650, 200, tid=2),                   # another thread's op: not around it
                  X("cuda_runtime", "cudaLaunchKernel", 660, 5, tid=2)]        # launches do not block
        w = ps.summarize(events)["backward"][0]["host_waits"]
        self.assertEqual(w["calls"], 2)
        self.assertAlmostEqual(w["ms"], 0.08)
        self.assertEqual(w["ms_by_op"], {"aten::_local_scalar_dense": 0.05, "cudaEventSynchronize": 0.03})
        self.assertEqual(w["ms_by_deepspeed_method"], {"ds.Stage3.reduce": 0.05, "(no DeepSpeed method)": 0.03})


if __name__ == "__main__":
    unittest.main()
