"""pool_repeats.py: pooling repeated runs' timed steps into one result per case.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from zsim_ds.fit import pool_repeats as pr  # noqa: E402


def result(steps_per_rank, status="ok", peak=100):
    """A small harness-like result: one rank per list of step seconds."""
    ranks = [{"rank": r, "memory": {"peak_reserved": peak + r},
              "timing": {"step_seconds": steps, "median_step_seconds": statistics.median(steps),
                         "step_kinds": ["timed"] * len(steps)}}
             for r, steps in enumerate(steps_per_rank)]
    return {"case": {"name": "c"}, "status": status, "ranks": ranks}


class PoolRepeatsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.record = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def put(self, folder, case, obj):
        os.makedirs(os.path.join(self.record, folder), exist_ok=True)
        with open(os.path.join(self.record, folder, f"{case}.json"), "w") as f:
            json.dump(obj, f)

    def get(self, case, folder="runs"):
        with open(os.path.join(self.record, folder, f"{case}.json")) as f:
            return json.load(f)

    def pool(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = pr.main([self.record, *argv])
        return rc, out.getvalue(), err.getvalue()

    def test_pooling_concatenates_steps_in_folder_order_and_recomputes_median(self):
        self.put("runs-1", "a", result([[0.04, 0.05, 0.06], [0.1, 0.2]]))
        self.put("runs-2", "a", result([[0.01, 0.02], [0.3]]))
        rc, out, _ = self.pool("runs-1", "runs-2")
        self.assertEqual(rc, 0)
        got = self.get("a")
        t0, t1 = got["ranks"][0]["timing"], got["ranks"][1]["timing"]
        self.assertEqual(t0["step_seconds"], [0.04, 0.05, 0.06, 0.01, 0.02])
        self.assertEqual(t0["median_step_seconds"], 0.04)
        self.assertEqual(t1["step_seconds"], [0.1, 0.2, 0.3])
        self.assertEqual(t1["median_step_seconds"], 0.2)
        self.assertEqual(t0["pooled_from"], [
            {"run": "runs-1/a.json", "median_step_seconds": 0.05, "timed_steps": 3, "reference_loop_seconds": None,
             "autograd_reference_loop_seconds": None},
            {"run": "runs-2/a.json", "median_step_seconds": 0.015, "timed_steps": 2, "reference_loop_seconds": None,
             "autograd_reference_loop_seconds": None}])
        self.assertNotIn("reference_loop_seconds", t0)
        self.assertNotIn("autograd_reference_loop_seconds", t0)
        self.assertEqual(got["pooled"], {"runs": ["runs-1", "runs-2"], "rule": pr.RULE, "left_out": []})
        self.assertIn("a  runs-1 150.00  runs-2 300.00  -> pooled 200.00 ms", out)

    def test_the_pooled_host_speed_is_the_median_of_the_runs_that_timed_their_loop(self):
        def timed_loop(steps, loops):
            r = result([steps])
            r["ranks"][0]["timing"]["host_per_step"] = [{"reference_work_seconds": x} for x in loops]
            return r
        first = timed_loop([0.04, 0.05, 0.06], [0.0016, 0.0015, 0.0017])  # its loop: 1.6 ms
        first["ranks"][0]["timing"]["step_kinds"] = ["timed", "timed", "timed"]
        self.put("runs-1", "a", first)
        self.put("runs-2", "a", result([[0.07]]))                         # no loop timed: not counted
        self.put("runs-3", "a", timed_loop([0.08], [0.0032]))
        self.put("runs-4", "a", timed_loop([0.06], [0.0030]))
        self.pool("runs-1", "runs-2", "runs-3", "runs-4")
        t0 = self.get("a")["ranks"][0]["timing"]
        self.assertEqual([p["reference_loop_seconds"] for p in t0["pooled_from"]], [0.0016, None, 0.0032, 0.0030])
        self.assertEqual(t0["reference_loop_seconds"], 0.0030)

    def test_the_pooled_autograd_loop_takes_a_run_without_one_at_its_main_threads(self):
        def timed(steps, loops, autograd=None):
            r = result([steps])
            r["ranks"][0]["timing"]["host_per_step"] = [
                {"reference_work_seconds": x, **({"autograd_reference_work_seconds": autograd} if autograd else {})}
                for x in loops]
            return r
        self.put("runs-1", "a", timed([0.04], [0.0020], autograd=0.0040))
        self.put("runs-2", "a", timed([0.05], [0.0030]))  # autograd's loop not timed: its main loop, 3.0 ms
        self.put("runs-3", "a", timed([0.06], [0.0010], autograd=0.0012))
        self.pool("runs-1", "runs-2", "runs-3")
        t0 = self.get("a")["ranks"][0]["timing"]
        self.assertEqual([p["autograd_reference_loop_seconds"] for p in t0["pooled_from"]], [0.0040, None, 0.0012])
        self.assertEqual(t0["autograd_reference_loop_seconds"], 0.0030)
        self.assertEqual(t0["reference_loop_seconds"], 0.0020)

    def test_no_pooled_autograd_loop_where_no_run_timed_it(self):
        r = result([[0.04]])
        r["ranks"][0]["timing"]["host_per_step"] = [{"reference_work_seconds": 0.002}]
        self.put("runs-1", "a", r)
        self.pool("runs-1")
        self.assertNotIn("autograd_reference_loop_seconds", self.get("a")["ranks"][0]["timing"])

    def test_a_steps_loop_counts_only_where_the_step_was_timed(self):
        r = result([[0.04, 0.05]])
        r["ranks"][0]["timing"]["step_kinds"] = ["warmup", "timed"]
        r["ranks"][0]["timing"]["host_per_step"] = [{"reference_work_seconds": 0.009},
                                                    {"reference_work_seconds": 0.002}]
        self.assertEqual(pr.own_loop(r, 0), 0.002)

    def test_memory_and_other_keys_come_from_the_first_run(self):
        first = result([[0.04]], peak=100)
        first["ranks"][0]["collectives"] = {"n": 1}
        first["extra"] = "first"
        second = result([[0.05]], peak=999)
        second["ranks"][0]["collectives"] = {"n": 2}
        second["extra"] = "second"
        self.put("runs-1", "a", first)
        self.put("runs-2", "a", second)
        self.pool("runs-1", "runs-2")
        got = self.get("a")
        self.assertEqual(got["extra"], "first")
        self.assertEqual(got["ranks"][0]["memory"], {"peak_reserved": 100})
        self.assertEqual(got["ranks"][0]["collectives"], {"n": 1})
        self.assertEqual(got["ranks"][0]["timing"]["step_kinds"], ["timed"])

    def test_non_ok_later_run_is_left_out_and_named(self):
        self.put("runs-1", "a", result([[0.04, 0.06]]))
        self.put("runs-2", "a", result([[9.0]], status="oom"))
        self.put("runs-3", "a", result([[0.08]]))
        self.pool("runs-1", "runs-2", "runs-3")
        got = self.get("a")
        self.assertEqual(got["ranks"][0]["timing"]["step_seconds"], [0.04, 0.06, 0.08])
        self.assertEqual(got["pooled"]["runs"], ["runs-1", "runs-3"])
        self.assertEqual(got["pooled"]["left_out"], [{"run": "runs-2/a.json", "status": "oom"}])

    def test_non_ok_first_run_is_copied_unchanged_but_for_pooled(self):
        first = result([[0.04]], status="error")
        self.put("runs-1", "a", first)
        self.put("runs-2", "a", result([[0.05]]))
        self.pool("runs-1", "runs-2")
        got = self.get("a")
        self.assertEqual(got["pooled"]["left_out"], [{"run": "runs-1/a.json", "status": "error"}])
        del got["pooled"]
        self.assertEqual(got, first)

    def test_case_only_in_later_folder_is_skipped(self):
        self.put("runs-1", "a", result([[0.04]]))
        self.put("runs-2", "a", result([[0.05]]))
        self.put("runs-2", "b", result([[0.05]]))
        rc, _, err = self.pool("runs-1", "runs-2")
        self.assertEqual(rc, 0)
        self.assertEqual(os.listdir(os.path.join(self.record, "runs")), ["a.json"])
        self.assertIn("runs-2/b.json", err)

    def test_stale_output_files_are_removed(self):
        self.put("runs-1", "a", result([[0.04]]))
        self.put("runs", "old", result([[1.0]]))
        os.makedirs(os.path.join(self.record, "runs", "sub"))
        with open(os.path.join(self.record, "runs", "notes.txt"), "w") as f:
            f.write("kept")
        self.pool("runs-1")
        self.assertEqual(sorted(os.listdir(os.path.join(self.record, "runs"))), ["a.json", "notes.txt", "sub"])

    def test_output_is_indented_json_with_trailing_newline(self):
        self.put("runs-1", "a", result([[0.04]]))
        self.pool("runs-1")
        with open(os.path.join(self.record, "runs", "a.json")) as f:
            text = f.read()
        self.assertEqual(text, json.dumps(json.loads(text), indent=1) + "\n")

    def test_refuses_out_equal_to_a_run_folder(self):
        self.put("runs-1", "a", result([[0.04]]))
        self.put("runs-2", "a", result([[0.05]]))
        rc, _, err = self.pool("runs-1", "runs-2", "--out", "runs-2")
        self.assertEqual(rc, 2)
        self.assertIn(os.path.join(self.record, "runs-2"), err)
        self.assertFalse(os.path.exists(os.path.join(self.record, "runs")))

    def test_missing_folder_is_an_error_naming_it(self):
        self.put("runs-1", "a", result([[0.04]]))
        rc, _, err = self.pool("runs-1", "runs-9")
        self.assertEqual(rc, 2)
        self.assertIn(os.path.join(self.record, "runs-9"), err)
        self.assertFalse(os.path.exists(os.path.join(self.record, "runs")))

    def test_no_folder_given_is_an_error(self):
        rc, _, err = self.pool()
        self.assertEqual(rc, 2)
        self.assertIn("no run folder", err)


if __name__ == "__main__":
    unittest.main()
