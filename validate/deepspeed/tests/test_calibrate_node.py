"""calibrate_node.py: its figures reproduce host-h200.yaml's from the same records, its steps keep to the budget and
stop cleanly with what they have, the profile it writes, and the cases it runs first determine the fit.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no torch needed: the steps' commands are
replaced by a fake runner that writes what each would have written)"""
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from zsim_ds.calibrate import figures as fig  # noqa: E402
from zsim_ds.calibrate import node  # noqa: E402
from zsim_ds.calibrate import profile_yaml as py  # noqa: E402
from zsim_ds.fit import fit_host as fh  # noqa: E402
import test_fit_host as tfh  # noqa: E402  (its synthetic harness results)

RECORDS = os.path.join(ROOT, "..", "results", "h200-deepspeed-steptime", "probes")
CASES = os.path.join(ROOT, "cases")


def load(name):
    with open(os.path.join(RECORDS, name)) as f:
        return json.load(f)


class FiguresFromTheH200RecordsTest(unittest.TestCase):
    """The probes' records that host-h200.yaml's GPU figures were written from give them back."""

    def test_gemm_and_the_misaligned_heads_figures(self):
        gemm, mis = fig.gemm_figures(load("vocab_alignment.json"), 989.4)
        self.assertAlmostEqual(gemm, 0.668, places=3)
        self.assertAlmostEqual(mis["forward"], 0.0958, places=4)
        self.assertAlmostEqual(mis["backward"], 0.1479, places=4)

    def test_hbm_by_kind_against_the_h200s_bandwidth_and_another(self):
        got = fig.hbm_by_kind(load("torch_kernels.json"), 4800)
        want = {"norm": 0.448, "norm_backward": 0.333, "activation": 0.751, "activation_backward": 0.698,
                "softmax": 0.505, "softmax_backward": 0.566, "cross_entropy": 0.456, "cross_entropy_backward": 0.640}
        self.assertEqual(set(got), set(want))
        for k, v in want.items():
            self.assertAlmostEqual(got[k], v, places=3, msg=k)
        half = fig.hbm_by_kind(load("torch_kernels.json"), 9600)  # the profile's bandwidth, not the probe's guess
        self.assertAlmostEqual(half["norm"], got["norm"] / 2)

    def test_the_copies(self):
        pcie, d2h, h2d = fig.copy_figures(load(os.path.join("cross_copy-1", "cross_copy.json")))
        self.assertAlmostEqual(d2h, 0.0294, places=4)
        self.assertAlmostEqual(h2d, 0.0955, places=4)
        self.assertAlmostEqual(pcie, (55.31 + 55.304) / 4 + 55.367 / 2, places=2)

    def test_cpu_adam(self):
        self.assertEqual({k: float(f"{v:.4g}") for k, v in fig.cpu_adam_figures(load("cpu_adam-1.json")).items()},
                         {"threads_1": 8.795e8, "threads_2": 1.643e9, "threads_4": 2.291e9, "threads_8": 2.987e9,
                          "threads_16": 5.197e9})

    def test_gpu_presets_by_name(self):
        self.assertEqual(fig.gpu_preset("NVIDIA H100 80GB HBM3", 85e9), "h100-80gb")
        self.assertEqual(fig.gpu_preset("NVIDIA H200", 150e9), "h200-141gb")
        self.assertEqual(fig.gpu_preset("NVIDIA A100-SXM4-80GB", 85e9), "a100-80gb")
        self.assertEqual(fig.gpu_preset("NVIDIA A100-SXM4-40GB", 42e9), "a100-40gb")
        self.assertIsNone(fig.gpu_preset("NVIDIA H100 PCIe", 85e9))  # other clocks and bandwidth than the SXM part
        self.assertIsNone(fig.gpu_preset("NVIDIA GeForce RTX 4090", 25e9))

    def test_outside_allocator_and_the_stack_from_harness_results(self):
        runs = [{"versions": {"torch": "2.11.0+cu130", "deepspeed": "0.14.5"},
                 "ranks": [{"memory": {"device": {"used_outside_this_allocator": 1389166592}}}]},
                {"versions": {"transformers": "5.17.0"},
                 "ranks": [{"memory": {"device": {"used_outside_this_allocator": 1816985600}}}]},
                {"ranks": [{"memory": {}}]}]
        self.assertEqual(fig.outside_allocator_bytes(runs), 1816985600)
        self.assertIsNone(fig.outside_allocator_bytes([{"ranks": [{}]}]))
        self.assertEqual(fig.stack_of(runs, {"python": "3.12.3", "torch": "9.9"}),
                         {"deepspeed": "0.14.5", "torch": "2.11.0+cu130", "transformers": "5.17.0", "python": "3.12.3"})


class TheCasesRunFirstDetermineTheFitTest(unittest.TestCase):
    def test_every_case_exists_and_is_a_one_rank_fit_case_never_a_validation_case(self):
        with open(os.path.join(ROOT, "lists", "steptime.txt")) as f:
            steptime = f.read().split()
        for c in node.CASES:
            self.assertTrue(os.path.isfile(os.path.join(CASES, c, "case.json")), c)
            self.assertTrue(c.startswith("fit"), c)
            self.assertNotIn(c, steptime)
            self.assertIn("-w1-", c)
        self.assertEqual(len(set(node.CASES)), len(node.CASES))

    def test_the_first_min_cases_determine_every_figure_and_give_them_back(self):
        with tempfile.TemporaryDirectory() as d:
            tfh.write_runs(d, node.CASES[:node.MIN_CASES], tfh.TRUE)
            samples = fh.load_samples([d], CASES)
            self.assertTrue(all(fh.sampled(samples)))
            got = dict(zip(fh.FIGURES, fh.fit(samples)))
        for k, v in tfh.TRUE.items():
            self.assertAlmostEqual(got[k], v, delta=1e-6 * v, msg=k)


PROBE_RECORDS = {"probe_vocab_alignment": "vocab_alignment.json", "probe_torch_kernels": "torch_kernels.json",
                 "probe_cross_copy": os.path.join("cross_copy-1", "cross_copy.json"),
                 "probe_cpu_adam": "cpu_adam-1.json"}


def write_probe_result(name, out):
    """What a probe writes into OUT: its H200 record."""
    dst = {"probe_cpu_adam": "cpu_adam.json"}.get(name, os.path.basename(PROBE_RECORDS[name]))
    shutil.copy(os.path.join(RECORDS, PROBE_RECORDS[name]), os.path.join(out, dst))


ENVIRONMENT = {"python": "3.12.3", "cpus": 16, "memory_bytes": 134 << 30, "torch": "2.11.0+cu130", "cuda": "13.0",
               "gpu_count": 1, "gpu": "NVIDIA H100 80GB HBM3", "gpu_total_memory": 85029158912,
               "transformers": "5.17.0", "deepspeed": "0.14.5"}


class FakeMachine:
    """The runner calibrate_node's steps call: each command takes `seconds` of a fake clock (by step kind) and writes
    what the real one would have (the environment's JSON line, the probes' records, a harness result per fit case
    made by the host model at tfh.TRUE, at a host loop of 2.0 ms); `fail` names steps that exit 1."""

    def __init__(self, seconds=None, fail=(), environment=ENVIRONMENT):
        self.now, self.calls = 0.0, []
        self.seconds = {"environment": 5, "prebuild": 40, "probe": 10, "case": 20, "zrun": 60, **(seconds or {})}
        self.fail, self.environment = set(fail), environment

    def clock(self):
        return self.now

    def __call__(self, cmd, timeout_s, env, log_path):
        kind, name = self.kind(cmd)
        self.calls.append((name, timeout_s))
        took = self.seconds[kind]
        if took > timeout_s:
            self.now += timeout_s
            return None
        self.now += took
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        with open(log_path, "w") as f:
            if kind == "environment":
                f.write("some warning\n" + json.dumps(self.environment) + "\n")
        if name in self.fail:
            return 1
        if kind == "probe":
            write_probe_result(name, env["OUT"])
        elif kind == "case":
            out = cmd[cmd.index("--out") + 1]
            d = tempfile.mkdtemp()
            tfh.write_runs_at_host_speeds(d, [name], tfh.TRUE, [0.002], 0.0025, 0.35)
            with open(os.path.join(d, name + ".json")) as f:
                r = json.load(f)
            shutil.rmtree(d)
            r.update({"format": "zsim.deepspeed_run", "status": "ok", "case": {"name": name},
                      "versions": {**{k: self.environment[k] for k in ("python", "torch", "cuda", "gpu",
                                                                        "transformers", "deepspeed")},
                                   "gpu_total_memory": self.environment.get("gpu_total_memory"),
                                   "gpu_count_visible": 1}})
            r["ranks"][0]["memory"] = {"device": {"used_outside_this_allocator": 1300000000 + len(name)}}
            with open(out, "w") as f:
                json.dump(r, f)
        elif kind == "zrun":
            shutil.copy(os.path.join(ROOT, "..", "results", "h200", "calibrated-h200.yaml"),
                        cmd[cmd.index("--out") + 1])
        return 0

    @staticmethod
    def kind(cmd):
        if cmd[1:2] == ["-c"]:
            return "environment", "environment"
        if cmd[1].endswith("prebuild_ops.py"):
            return "prebuild", "prebuild"
        if cmd[1:2] == ["calibrate"]:
            return "zrun", "zrun-calibrate"
        if cmd[1].endswith("harness.py"):
            return "case", os.path.basename(cmd[cmd.index("--case-dir") + 1])
        return "probe", os.path.basename(cmd[1])[:-3]


def calibrate(machine, *argv):
    d = tempfile.mkdtemp()
    out = os.path.join(d, "my-node.yaml")
    args = node.parse_args(["--out", out, "--python", "python3", *argv])
    log = []
    with contextlib.redirect_stdout(io.StringIO()):
        rc = node.Calibration(args, runner=machine, clock=machine.clock, log=log.append).run()
    text = None
    if os.path.isfile(out):
        with open(out) as f:
            text = f.read()
    with open(os.path.join(d, "my-node.d", "calibration.json")) as f:
        record = json.load(f)
    shutil.rmtree(d)
    return rc, text, record, log


def yaml_of(text):
    import yaml  # PyYAML where present: the profile is YAML (zsim's reader is yaml-cpp); skipped without it
    return yaml.safe_load(text)


class CalibrationStepsTest(unittest.TestCase):
    def test_in_a_full_budget_every_step_runs_and_the_profile_holds_every_figure(self):
        m = FakeMachine()
        rc, text, record, log = calibrate(m)
        self.assertEqual(rc, 0, log)
        names = [n for n, _ in m.calls]
        self.assertEqual(names[:6], ["environment", "prebuild", "probe_vocab_alignment", "probe_torch_kernels",
                                     "probe_cross_copy", "probe_cpu_adam"])
        ran = names[6:]
        self.assertEqual(ran, node.CASES[:len(ran)])
        self.assertGreaterEqual(len(ran), 20)  # 600 s: 85 s of the rest, then cases of 20 s while 45 s are left
        self.assertLessEqual(m.now, 600)
        for key in ("gemm:", "torch_misaligned_gemm:", "hbm_by_kind:", "pageable_pcie_fraction:",
                    "pageable_h2d_pcie_fraction:", "cpu_adam_measured:", "outside_allocator_bytes:", "deepspeed_host:",
                    "reference_loop_us: 2000", "loop_speed_exponent: 0.35", "fitted_under:", "gpu: {preset: "
                    "\"h100-80gb\", hbm_bytes: 85029158912}", "links: {pcie_GBps: 55.34}"):
            self.assertIn(key, text)
        self.assertIn('fitted_under: {deepspeed: "0.14.5", torch: "2.11.0+cu130", transformers: "5.17.0", '
                      'python: "3.12.3", cuda: "13.0", gpu: "NVIDIA H100 80GB HBM3", date: "', text)
        self.assertEqual(record["record"]["cases_not_run"], node.CASES[len(ran):])
        # The host model's figures at its host speed come back at the runs' reference loop.
        host = dict((n, v) for n, v, _ in record["host_fit"]["figures"])
        for k, v in tfh.TRUE.items():
            self.assertAlmostEqual(host[k], v * (0.002 / 0.0025) ** 0.35, delta=1e-3 * v, msg=k)
        self.assertEqual(record["host_fit"]["taken_from_committed"], [])

    def test_the_profile_is_yaml_that_a_profile_may_hold(self):
        _, text, _, _ = calibrate(FakeMachine())
        try:
            y = yaml_of(text)
        except ImportError:
            self.skipTest("no PyYAML")
        self.assertEqual(set(y), {"description", "cluster", "calibration"})
        self.assertNotIn("nodes", y["cluster"])
        self.assertEqual(y["cluster"]["fitted_under"]["transformers"], "5.17.0")
        self.assertEqual(len(y["cluster"]["efficiency"]["deepspeed_host"]), len(fh.FIGURES) + 2)
        self.assertIsInstance(y["cluster"]["efficiency"]["outside_allocator_bytes"], int)

    def test_a_short_budget_stops_starting_cases_and_keeps_the_reserve(self):
        m = FakeMachine()
        rc, text, record, log = calibrate(m, "--budget-s", "330")
        ran = [n for n, _ in m.calls if n.startswith("fit")]
        self.assertEqual(ran, node.CASES[:len(ran)])
        self.assertLess(len(ran), len(node.CASES))
        self.assertLessEqual(m.now, 330 - node.RESERVE_S)
        self.assertEqual(rc, 0)
        self.assertIn("Not run (budget): " + " ".join(node.CASES[len(ran):]), text)
        for _, timeout in m.calls:
            self.assertLessEqual(timeout, 330)

    def test_figures_no_finished_run_determines_come_from_the_committed_profile_scaled_and_said_so(self):
        m = FakeMachine()
        rc, text, record, _ = calibrate(m, "--budget-s", "600", "--cases", *node.CASES[:3])
        self.assertEqual(rc, 0)
        taken = record["host_fit"]["taken_from_committed"]
        self.assertIn("stage12_offload_param_us", taken)
        self.assertIn("gpt2_forward_layer_us", taken)
        committed = node.committed_host()
        scale = (2000 / committed["reference_loop_us"]) ** 0.35
        host = dict((n, v) for n, v, _ in record["host_fit"]["figures"])
        self.assertAlmostEqual(host["gpt2_forward_layer_us"], committed["gpt2_forward_layer_us"] * scale)
        self.assertRegex(text, r"gpt2_forward_layer_us: [0-9.]+  # no run sampled it: host-h200.yaml's 514.9 x ")

    def test_a_step_over_its_time_is_stopped_at_its_cap_and_the_rest_go_on(self):
        m = FakeMachine(seconds={"probe": 500})
        rc, text, record, _ = calibrate(m)
        caps = {script[:-3]: cap for script, cap, _ in node.PROBES}
        for name, timeout in m.calls:
            if name in caps:
                self.assertEqual(timeout, caps[name])
                self.assertEqual(record["record"]["stages"][name], "timeout")
        self.assertEqual(rc, 0)  # cases ran in what was left
        self.assertIn("efficiency.hbm_by_kind: not measured", text)
        self.assertIn("deepspeed_host:", text)

    def test_when_no_fit_run_finishes_the_profile_has_no_host_figures_and_says_so(self):
        m = FakeMachine(seconds={"case": 1000})  # every case runs past its timeout: stopped, no result
        rc, text, record, _ = calibrate(m)
        ran = [n for n, _ in m.calls if n.startswith("fit")]
        self.assertGreater(len(ran), 2)
        self.assertTrue(all(record["record"]["stages"][c] == "timeout" for c in ran))
        self.assertLessEqual(m.now, 600 - node.RESERVE_S)
        self.assertEqual(rc, 1)
        self.assertIn("no fit run finished", text)
        self.assertNotIn("deepspeed_host:", text)
        self.assertIn("fitted_under:", text)  # from the look at the machine

    def test_an_efficiency_above_the_presets_figure_is_capped_at_one_and_said_so(self):
        # The H200's kernels against an H100's data-sheet bandwidth (3350 GB/s): some kinds come out above 1.
        rc, text, _, _ = calibrate(FakeMachine())
        self.assertEqual(rc, 0)
        self.assertRegex(text, r"hbm_by_kind: \{[^}]*activation: 1,")
        self.assertIn("capped at 1 (above the preset's data-sheet figure", text)
        with_h200 = dict(ENVIRONMENT, gpu="NVIDIA H200", gpu_total_memory=150109880320)
        _, text, _, _ = calibrate(FakeMachine(environment=with_h200))
        self.assertNotIn("capped at 1", text)
        self.assertIn("hbm_by_kind: {norm: 0.4485, norm_backward: 0.3328, activation: 0.7509", text)

    def test_failed_probes_leave_the_data_sheets_figures_and_say_so(self):
        rc, text, _, _ = calibrate(FakeMachine(fail={"probe_torch_kernels", "probe_vocab_alignment"}))
        self.assertEqual(rc, 0)
        self.assertNotIn("    hbm_by_kind:", text)
        self.assertIn("efficiency.hbm_by_kind: not measured", text)
        self.assertIn("efficiency.gemm: not measured", text)

    def test_a_failed_case_is_recorded_and_the_fit_goes_on_without_it(self):
        rc, _, record, _ = calibrate(FakeMachine(fail={node.CASES[1]}), "--budget-s", "400")
        self.assertEqual(rc, 0)
        self.assertNotIn(node.CASES[1], record["record"]["cases_ok"])
        self.assertEqual(record["record"]["stages"][node.CASES[1]], "failed")

    def test_no_gpu_writes_nothing(self):
        env = dict(ENVIRONMENT)
        del env["gpu"]
        rc, text, record, log = calibrate(FakeMachine(environment=env))
        self.assertEqual(rc, 2)
        self.assertIsNone(text)
        self.assertIn("no GPU", record["error"])

    def test_a_gpu_without_a_preset_needs_its_peaks(self):
        env = dict(ENVIRONMENT, gpu="NVIDIA GeForce RTX 4090", gpu_total_memory=25e9)
        rc, _, record, _ = calibrate(FakeMachine(environment=env))
        self.assertEqual(rc, 2)
        self.assertIn("--gpu-peak-tflops", record["error"])
        rc, text, _, _ = calibrate(FakeMachine(environment=env), "--gpu-peak-tflops", "165", "--gpu-hbm-GBps", "1008")
        self.assertEqual(rc, 0)
        self.assertIn('gpu: {name: "NVIDIA GeForce RTX 4090", hbm_bytes: 2.5e+10, hbm_GBps: 1008, peak_tflops: 165}',
                      text)

    def test_with_zrun_its_profile_is_the_base_without_its_own_kernels_figures(self):
        m = FakeMachine()
        rc, text, _, _ = calibrate(m, "--zrun", "/bin/zrun", "--zrun-args", "--quick")
        self.assertEqual(rc, 0)
        self.assertIn(("zrun-calibrate", 300), m.calls)
        self.assertIn("nvlink_busbw:", text)  # zrun's measured collectives stay
        self.assertIn("pcie_GBps: 55.0692", text)  # and its links
        self.assertNotIn("gemm_model:", text)  # its cuBLASLt GEMM model does not price torch's GEMMs
        self.assertNotIn("launch_us:", text)
        self.assertIn("left out of zrun's: hbm, launch_us, host_issue", text)
        self.assertIn("  fitted_under: {deepspeed", text)
        self.assertIn("\n  deepspeed:\n    tool: \"validate/deepspeed/calibrate_node.py\"", text)
        self.assertEqual(len(re.findall(r"^    gemm: ", text, re.M)), 1)
        try:
            y = yaml_of(text)
        except ImportError:
            return
        self.assertEqual(set(y), {"description", "cluster", "calibration"})
        self.assertAlmostEqual(y["cluster"]["efficiency"]["gemm"], 0.668, places=3)
        self.assertIn("deepspeed_host", y["cluster"]["efficiency"])
        self.assertIn("gemm", y["calibration"])  # zrun's record kept


class RefitTest(unittest.TestCase):
    def test_refit_writes_the_profile_again_from_the_work_folder_without_measuring(self):
        m = FakeMachine()
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "node.yaml")
            with contextlib.redirect_stdout(io.StringIO()):
                node.Calibration(node.parse_args(["--out", out, "--python", "python3", "--budget-s", "330"]),
                                 runner=m, clock=m.clock, log=lambda *a: None).run()
            os.remove(os.path.join(d, "node.d", "calibration.json"))  # the machine from the runs' versions
            calls = len(m.calls)
            log = []
            with contextlib.redirect_stdout(io.StringIO()):
                rc = node.Calibration(node.parse_args(["--out", os.path.join(d, "again.yaml"), "--work",
                                                       os.path.join(d, "node.d"), "--refit", "--loop-speed-exponent",
                                                       "0.5"]), runner=m, clock=m.clock, log=log.append).run()
            self.assertEqual(rc, 0, log)
            self.assertEqual(len(m.calls), calls)  # nothing run
            with open(os.path.join(d, "again.yaml")) as f:
                text = f.read()
            self.assertIn("refitted by validate/deepspeed/calibrate_node.py --refit", text)
            self.assertIn("loop_speed_exponent: 0.5", text)
            self.assertIn('gpu: {preset: "h100-80gb", hbm_bytes: 85029158912}', text)
            self.assertIn("    gemm: 0.668", text)  # the probes' results kept in the work folder
        finally:
            shutil.rmtree(d)


class PriorTest(unittest.TestCase):
    """--prior-weight: the committed figures (at this host's loop) as pseudo-samples beside the session's runs."""

    def fit(self, weight, cases):
        with tempfile.TemporaryDirectory() as d:
            tfh.write_runs_at_host_speeds(d, cases, tfh.TRUE, [0.002], 0.002, 0.35)
            committed = dict(node.committed_host(), reference_loop_us=2000.0)
            with contextlib.redirect_stdout(io.StringIO()):
                host = node.fit_host_figures(d, CASES, 0.35, committed, weight)
        return dict((n, v) for n, v, _ in host["figures"]), host, committed

    def test_without_weight_the_runs_alone_give_their_figures_back(self):
        got, host, _ = self.fit(0.0, node.CASES[:node.MIN_CASES])
        for k, v in tfh.TRUE.items():
            self.assertAlmostEqual(got[k], v, delta=1e-6 * v, msg=k)
        self.assertEqual(host["prior_weight"], 0.0)

    def test_with_weight_the_figures_move_toward_the_prior_and_an_unsampled_one_is_the_prior(self):
        import math
        plain, _, committed = self.fit(0.0, node.CASES[:node.MIN_CASES])
        pulled, _, _ = self.fit(3.0, node.CASES[:node.MIN_CASES])

        def distance(got):
            return sum(abs(math.log(got[k] / committed[k])) for k in tfh.TRUE if got[k] > 0 and committed[k] > 0)
        self.assertLess(distance(pulled), distance(plain))
        few, host, _ = self.fit(3.0, node.CASES[:3])  # stages 0 and 2 only: nothing samples stage 3's figures
        self.assertAlmostEqual(few["stage3_forward_module_us"], committed["stage3_forward_module_us"])
        self.assertIn("stage3_forward_module_us", host["taken_from_committed"])


class ProfileTextTest(unittest.TestCase):
    def test_strings_are_quoted_and_numbers_are_not(self):
        self.assertEqual(py.flow({"a": "5.17", "b": 0.66812, "c": 3, "d": {"e": True}}),
                         '{a: "5.17", b: 0.6681, c: 3, d: {e: true}}')


if __name__ == "__main__":
    unittest.main()


class PredictNodeTest(unittest.TestCase):
    """predict_node.py's pure parts (zsim validate does the predicting: its own tests, and the lead's session)."""

    def test_the_case_scenario_keeps_all_but_its_cluster_which_names_the_profile(self):
        from zsim_ds.calibrate import predict
        with open(os.path.join(CASES, "l150m-z2-w1-mb4-s2048-sdpa", "scenario.yaml")) as f:
            text = predict.case_scenario_with_profile(f.read(), "h100-node", 1)
        self.assertIn("cluster: {profile: h100-node, nodes: 1, gpus_per_node: 1}\ndeepspeed:\n  ds_config: ds_config.json\n",
                      text)
        self.assertIn("  hf_config: config.json\n", text)
        for gone in ("h200-141gb", "deepspeed_host", "efficiency", "fitted_under"):
            self.assertNotIn(gone, text)

    def test_only_ok_one_rank_results_are_predicted(self):
        from zsim_ds.calibrate import predict
        with tempfile.TemporaryDirectory() as d:
            for name, status, world in (("a", "ok", 1), ("b", "failed", 1), ("c", "ok", 2)):
                with open(os.path.join(d, name + ".json"), "w") as f:
                    json.dump({"format": "zsim.deepspeed_run", "status": status, "case": {"name": name, "world": world}},
                              f)
            with open(os.path.join(d, "x.json"), "w") as f:
                f.write("{not json")
            self.assertEqual([r["case"]["name"] for _, r in predict.results_of([d])], ["a"])

    def test_the_summary_is_the_median_magnitude_and_the_signed_worst(self):
        from zsim_ds.calibrate import predict
        med, worst = predict.summary([0.05, -0.2, 0.1])
        self.assertAlmostEqual(med, 10.0)
        self.assertAlmostEqual(worst, -20.0)
        self.assertEqual(predict.summary([]), (None, None))


FAKES = os.path.join(HERE, "fakes")
ZSIM = os.environ.get("ZSIM") or os.path.join(ROOT, "..", "..", "build", "bin", "zsim")


class FakeStackCalibrationTest(unittest.TestCase):
    """calibrate_node.py's real steps (its own processes, the harness's whole run) on the fakes of torch, DeepSpeed and
    transformers (tests/fakes): everything but the numbers. The probes and the extension build fail there (the fakes
    have no CUDA events nor op builders), and the profile is written with what finished."""

    def test_the_real_steps_on_the_fake_stack_write_a_profile_zsim_loads(self):
        import subprocess
        d = tempfile.mkdtemp()
        env = dict(os.environ, PYTHONPATH=FAKES + os.pathsep + os.environ.get("PYTHONPATH", ""))
        try:
            out = os.path.join(d, "node.yaml")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "calibrate_node.py"), "--out", out, "--budget-s",
                                "200", "--steps", "8", "--cases", *node.CASES[:3]], env=env, capture_output=True,
                               text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(out) as f:
                text = f.read()
            with open(os.path.join(d, "node.d", "calibration.json")) as f:
                record = json.load(f)
            self.assertEqual(record["record"]["cases_ok"], sorted(node.CASES[:3]))
            self.assertEqual(record["record"]["stages"]["probe_vocab_alignment"], "failed")
            self.assertIn('fitted_under: {deepspeed: "0.14.5+fake"', text)
            self.assertIn("deepspeed_host:", text)
            self.assertIn("reference_loop_us:", text)
            self.assertIn("outside_allocator_bytes:", text)
            if not os.path.isfile(ZSIM):
                return  # zsim not built here: the C++ side loads its fixture of this format (external_files_test)
            with open(os.path.join(d, "my.yaml"), "w") as f:
                f.write("model: {preset: llama2-7b}\ntraining: {micro_batch: 1, seq_len: 2048}\n"
                        "cluster: {profile: node, nodes: 1, gpus_per_node: 1}\ndeepspeed: {zero_optimization: {stage: 2}}\n")
            z = subprocess.run([ZSIM, os.path.join(d, "my.yaml")], capture_output=True, text=True, timeout=120)
            self.assertEqual(z.returncode, 0, z.stderr)
            self.assertIn("  profile           node\n", z.stdout)
            self.assertIn("fitted under      DeepSpeed 0.14.5+fake", z.stdout)
            self.assertIn("host              efficiency.deepspeed_host", z.stdout)
        finally:
            shutil.rmtree(d)
