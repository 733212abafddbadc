"""host_cpu.py: reading a thread's CPU time, switches and CPU from /proc, and ranking threads by CPU spent.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import gc
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from zsim_ds.harness import host_cpu  # noqa: E402

# A /proc/<pid>/task/<tid>/stat line: utime 250, stime 50 (fields 14, 15), last CPU 7 (field 39).
STAT = ("1234 (pt_autograd (0)) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 40 0 100 1000 200 "
        "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 7 0 0 0 0 0")


class ParseStat(unittest.TestCase):
    def test_a_name_with_spaces_and_parentheses_keeps_the_fields_after_it(self):
        self.assertEqual(host_cpu.parse_stat(STAT), ("pt_autograd (0)", 300, 7))

    def test_no_text_is_no_figures(self):
        self.assertIsNone(host_cpu.parse_stat(None))


class TimesAndFaults(unittest.TestCase):
    def test_reads_user_system_and_the_two_fault_counts(self):
        self.assertEqual(host_cpu.parse_times_and_faults(STAT),
                         {"user_ticks": 250, "system_ticks": 50, "minor_faults": 100, "major_faults": 0})

    def test_no_text_is_no_figures(self):
        self.assertIsNone(host_cpu.parse_times_and_faults(None))


class ProcessFigures(unittest.TestCase):
    def test_the_difference_in_seconds_and_faults(self):
        before = {"user_ticks": 100, "system_ticks": 10, "minor_faults": 1000, "major_faults": 1}
        after = {"user_ticks": 150, "system_ticks": 30, "minor_faults": 1600, "major_faults": 1}
        fig = host_cpu.process_figures(before, after)
        self.assertAlmostEqual(fig["process_user_seconds"], 50 / host_cpu.CLOCK_TICKS)
        self.assertAlmostEqual(fig["process_system_seconds"], 20 / host_cpu.CLOCK_TICKS)
        self.assertEqual(fig["process_minor_faults"], 600)
        self.assertEqual(fig["process_major_faults"], 0)

    def test_a_missing_sample_gives_unknown_figures(self):
        self.assertIsNone(host_cpu.process_figures(None, {"user_ticks": 1})["process_user_seconds"])


class GcClockTest(unittest.TestCase):
    def test_a_collection_is_counted_and_timed_and_take_starts_again(self):
        clock = host_cpu.GcClock()
        try:
            clock.take()
            gc.collect()
            first = clock.take()
            self.assertGreaterEqual(first["gc_collections"], 1)
            self.assertGreater(first["gc_seconds"], 0.0)
            self.assertEqual(clock.take(), {"gc_seconds": 0.0, "gc_collections": 0})
        finally:
            clock.close()

    def test_close_stops_the_timing(self):
        clock = host_cpu.GcClock()
        clock.close()
        gc.collect()
        self.assertEqual(clock.take()["gc_collections"], 0)


class SyncClockTest(unittest.TestCase):
    class Stream:
        def synchronize(self):
            time.sleep(0.002)
            return "done"

    def test_a_wrapped_call_is_timed_by_its_label_and_still_returns_its_result(self):
        clock = host_cpu.SyncClock([(self.Stream, "synchronize", "stream"), (self.Stream, "absent", "skipped")])
        try:
            self.assertEqual(self.Stream().synchronize(), "done")
            self.Stream().synchronize()
            out = clock.take()
        finally:
            clock.close()
        self.assertEqual(out["sync_calls"], 2)
        self.assertEqual(out["sync_calls_by_call"], {"stream": 2})
        self.assertGreaterEqual(out["sync_seconds"], 0.004)
        self.assertEqual(clock.take()["sync_calls"], 0)

    def test_close_restores_the_original(self):
        original = self.Stream.__dict__["synchronize"]
        clock = host_cpu.SyncClock([(self.Stream, "synchronize", "stream")])
        self.assertIsNot(self.Stream.__dict__["synchronize"], original)
        clock.close()
        self.assertIs(self.Stream.__dict__["synchronize"], original)


class InvoluntarySwitches(unittest.TestCase):
    def test_reads_the_nonvoluntary_line(self):
        text = "Name:\tpython\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t5\n"
        self.assertEqual(host_cpu.parse_involuntary_switches(text), 5)

    def test_absent_line_is_none(self):
        self.assertIsNone(host_cpu.parse_involuntary_switches("Name:\tpython\n"))


class StepFigures(unittest.TestCase):
    def test_a_thread_that_ran_half_the_wall_time_has_half_a_cpu(self):
        before = {"wall": 10.0, "cpu": 1.0, "involuntary": 3, "on_cpu": 2}
        after = {"wall": 10.2, "cpu": 1.1, "involuntary": 8, "on_cpu": 5}
        fig = host_cpu.step_figures(before, after)
        self.assertAlmostEqual(fig["cpu_seconds"], 0.1)
        self.assertAlmostEqual(fig["cpu_share"], 0.5)
        self.assertEqual(fig["involuntary_switches"], 5)
        self.assertEqual(fig["on_cpu"], 5)

    def test_unknown_switches_stay_unknown(self):
        sample = {"wall": 1.0, "cpu": 1.0, "involuntary": None, "on_cpu": None}
        self.assertIsNone(host_cpu.step_figures(sample, dict(sample, wall=2.0))["involuntary_switches"])


class BusiestThreads(unittest.TestCase):
    def test_ranks_by_cpu_spent_between_the_maps_not_by_total(self):
        before = {"python": 10.0, "pt_autograd": 0.0, "nccl": 5.0}
        after = {"python": 10.5, "pt_autograd": 0.8, "nccl": 5.1, "new": 0.2}
        self.assertEqual(host_cpu.busiest_threads(before, after, top=3),
                         [["pt_autograd", 0.8], ["python", 0.5], ["new", 0.2]])

    def test_a_missing_map_is_none(self):
        self.assertIsNone(host_cpu.busiest_threads(None, {"python": 1.0}))


class CpuSecondsOfThreads(unittest.TestCase):
    def test_sums_what_the_named_threads_spent_between_the_maps(self):
        before = {"python": 10.0, "pt_autograd_0": 2.0, "pt_autograd_1": 1.0}
        after = {"python": 10.5, "pt_autograd_0": 2.3, "pt_autograd_1": 1.1, "nccl": 0.4}
        self.assertAlmostEqual(host_cpu.cpu_seconds_of_threads(before, after, "pt_autograd"), 0.4)

    def test_a_thread_born_between_the_maps_counts_from_zero(self):
        self.assertAlmostEqual(host_cpu.cpu_seconds_of_threads({}, {"pt_autograd_0": 0.2}, "pt_autograd"), 0.2)

    def test_a_missing_map_is_none(self):
        self.assertIsNone(host_cpu.cpu_seconds_of_threads({"pt_autograd_0": 1.0}, None, "pt_autograd"))


class _OneThreadAutograd:
    """Just enough of torch for reference_work_seconds_in_backward: apply() keeps the Function, and backward()
    runs its backward on a thread of its own (as torch's device thread) or, with same_thread, on the caller's."""

    def __init__(self, same_thread=False):
        import threading

        class Function:
            @classmethod
            def apply(cls, x):
                return _Output(cls)

        class _Output:
            def __init__(self, fn):
                self.fn = fn

            def sum(self):
                return self

            def backward(self):
                run = lambda: self.fn.backward(None, 1.0)  # noqa: E731
                if same_thread:
                    run()
                else:
                    t = threading.Thread(target=run)
                    t.start()
                    t.join()

        self.autograd = type("autograd", (), {"Function": Function})

    @staticmethod
    def zeros(*shape, device=None, requires_grad=False):
        return 0.0


class ReferenceWorkInBackward(unittest.TestCase):
    def test_times_the_loop_on_the_thread_the_backward_runs_on(self):
        seconds, elsewhere = host_cpu.reference_work_seconds_in_backward(_OneThreadAutograd(), "cuda:0")
        self.assertGreater(seconds, 0.0)
        self.assertTrue(elsewhere)

    def test_says_so_when_the_backward_ran_on_the_callers_thread(self):
        seconds, elsewhere = host_cpu.reference_work_seconds_in_backward(_OneThreadAutograd(same_thread=True), 0)
        self.assertGreater(seconds, 0.0)
        self.assertFalse(elsewhere)


class ThisProcess(unittest.TestCase):
    @unittest.skipUnless(os.path.isdir("/proc/self/task"), "needs Linux /proc")
    def test_this_thread_is_listed_and_its_sample_moves_forward(self):
        self.assertTrue(host_cpu.threads_cpu_seconds())
        before = host_cpu.main_thread_sample()
        sum(range(200000))
        fig = host_cpu.step_figures(before, host_cpu.main_thread_sample())
        self.assertGreater(fig["cpu_seconds"], 0.0)


class ReferenceWork(unittest.TestCase):
    def test_the_work_is_fixed_and_its_time_positive(self):
        self.assertEqual(host_cpu.reference_work(), host_cpu.reference_work())
        self.assertGreater(host_cpu.reference_work_seconds(repeat=2), 0.0)


if __name__ == "__main__":
    unittest.main()


class MachineSteal(unittest.TestCase):
    STAT = "cpu  100 5 50 1000 20 3 2 40 0 0\ncpu0 50 2 25 500 10 1 1 20 0 0\nintr 1 2 3\n"

    def test_the_cpu_line_gives_steal_idle_and_all_ticks(self):
        self.assertEqual(host_cpu.parse_proc_stat_cpu(self.STAT),
                         {"steal_ticks": 40, "idle_ticks": 1020, "all_ticks": 1220})

    def test_figures_are_the_steal_and_busy_seconds_between_two_samples(self):
        before = host_cpu.parse_proc_stat_cpu(self.STAT)
        after = {"steal_ticks": 40 + host_cpu.CLOCK_TICKS, "idle_ticks": 1020,
                 "all_ticks": 1220 + 3 * host_cpu.CLOCK_TICKS}
        self.assertEqual(host_cpu.machine_figures(before, after),
                         {"machine_steal_seconds": 1.0, "machine_busy_seconds": 3.0})

    def test_a_missing_sample_gives_none(self):
        self.assertEqual(host_cpu.machine_figures(None, None),
                         {"machine_steal_seconds": None, "machine_busy_seconds": None})


class LoopUsLine(unittest.TestCase):
    def test_it_prints_the_median_loop_as_zsims_override(self):
        line = host_cpu.loop_us_line(samples=3)
        self.assertTrue(line.startswith("--set cluster.efficiency.deepspeed_host.loop_us="), line)
        self.assertGreater(int(line.rsplit("=", 1)[1]), 0)


class RunLoops(unittest.TestCase):
    TIMING = {"step_kinds": ["warmup", "timed", "timed", "timed"],
              "host_per_step": [{"reference_work_seconds": 0.009, "autograd_reference_work_seconds": 0.009},
                                {"reference_work_seconds": 0.003, "autograd_reference_work_seconds": 0.001},
                                {"reference_work_seconds": 0.002, "autograd_reference_work_seconds": 0.004},
                                {"reference_work_seconds": 0.004, "autograd_reference_work_seconds": 0.002}]}

    def test_each_threads_loop_is_the_median_over_the_timed_steps(self):
        self.assertEqual(host_cpu.run_loop_seconds(self.TIMING), 0.003)
        self.assertEqual(host_cpu.run_autograd_loop_seconds(self.TIMING), 0.002)

    def test_a_pooled_results_loops_are_its_recorded_ones(self):
        pooled = dict(self.TIMING, reference_loop_seconds=0.005, autograd_reference_loop_seconds=0.006)
        self.assertEqual(host_cpu.run_loop_seconds(pooled), 0.005)
        self.assertEqual(host_cpu.run_autograd_loop_seconds(pooled), 0.006)

    def test_a_run_before_autograds_loop_was_timed_has_none(self):
        timing = {"step_kinds": ["timed"], "host_per_step": [{"reference_work_seconds": 0.003}]}
        self.assertIsNone(host_cpu.run_autograd_loop_seconds(timing))
