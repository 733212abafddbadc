"""fit_host.py: the host figures come back from phases made with them, and what the fit leaves out.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no torch needed)"""
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

from zsim_ds.fit import fit_host as fh  # noqa: E402
from zsim_ds.case_tools import make_cases as mc  # noqa: E402

TRUE = {"forward_fixed_us": 3000, "llama_forward_layer_us": 1500, "gpt2_forward_layer_us": 1000,
        "checkpoint_forward_layer_us": 900, "stage3_forward_module_us": 270,
        "stage3_checkpoint_forward_module_us": 180, "backward_fixed_us": 500, "llama_backward_layer_us": 3500,
        "gpt2_backward_layer_us": 2300, "recompute_layer_us": 2900, "stage3_backward_module_us": 310,
        "stage3_recompute_module_us": 220, "step_fixed_us": 2600, "step_param_us": 43, "stage3_step_param_us": 96,
        "stage12_reduce_param_us": 60, "stage1_reduce_param_us": 8, "stage12_offload_param_us": 150,
        "eager_forward_layer_us": 220,
        "eager_backward_layer_us": 310}
CHECKPOINTING_AT_STAGE_3 = ["stage3_checkpoint_forward_module_us", "stage3_recompute_module_us"]
FIT_CASES = [r["name"] for r in mc.parse_table(open(os.path.join(ROOT, "cases.tsv")).read()) if "fit" in r["lists"]]
CASES = os.path.join(ROOT, "cases")


def host_phases_s(name, figures):
    """The host model's seconds of each phase of a case at `figures`."""
    st = fh.structure(os.path.join(CASES, name))
    return {ph: sum(a * figures[k] for a, k in zip(fh.features(st, ph), fh.FIGURES)) * 1e-6 for ph in fh.PHASES}


ELEMENTS = 110633984  # what the harness records as fitA's model.parameters (the schedule's: 221267968 bytes of bf16)


def copy_down_s(name):
    """At stages 1-2 with the optimizer on the CPU, the backward's fp32 copy down, which no host work hides."""
    st = fh.structure(os.path.join(CASES, name))
    return fh.copy_down_us(st, ELEMENTS) * 1e-6 if fh.offload_backward_only(st) else 0.0


def write_runs(folder, cases, figures, phase_excess=1.0, free_running=True):
    """A harness result per case whose free-running steps have the host model's step at `figures` as their median and
    whose phase medians are the host model's phases times `phase_excess` (what the synchronisations add)."""
    for name in cases:
        model = host_phases_s(name, figures)
        step = sum(model.values()) + copy_down_s(name)
        timing = {"median_phase_seconds": {ph: v * phase_excess for ph, v in model.items()}}
        timing["median_phase_seconds"]["backward"] += copy_down_s(name) * phase_excess
        if free_running:
            timing["step_seconds"] = [step * 1.03, step * 0.98, step, step * 1.2, step * 0.9]
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump({"case": {"name": name}, "ranks": [{"timing": timing, "model": {"parameters": ELEMENTS}}]}, f)


def write_runs_at_host_speeds(folder, cases, figures, loops_s, reference_s, exponent, autograd_loops_s=None):
    """Like write_runs, each run's host slower by (its loop / reference) ^ exponent, its loop timed beside each step
    (None: a run that did not time it, its host at the reference); with autograd_loops_s its backward at autograd's
    thread's loop instead, timed beside each step too."""
    for i, name in enumerate(cases):
        loop = loops_s[i % len(loops_s)]
        autograd = autograd_loops_s[i % len(autograd_loops_s)] if autograd_loops_s else None
        speed = (loop / reference_s) ** exponent if loop else 1.0
        model = {ph: v * speed for ph, v in host_phases_s(name, figures).items()}
        if autograd:
            model["backward"] *= (autograd / reference_s) ** exponent / speed
        model["backward"] += copy_down_s(name)
        step = sum(model.values())
        timing = {"median_phase_seconds": model, "step_seconds": [step] * 3, "step_kinds": ["timed"] * 3}
        if loop:
            timing["host_per_step"] = [{"reference_work_seconds": loop,
                                        **({"autograd_reference_work_seconds": autograd} if autograd else {})}] * 3
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump({"case": {"name": name}, "ranks": [{"timing": timing, "model": {"parameters": ELEMENTS}}]}, f)


def fitted(folder, **kw):
    return dict(zip(fh.FIGURES, fh.fit(fh.load_samples([folder], CASES, **kw))))


def run_main(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = fh.main(argv)
    return rc, out.getvalue()


class FitHostTest(unittest.TestCase):
    def assert_figures(self, got, scale=1.0, but=()):
        """Every figure of TRUE (but those named) fitted back, times `scale`, to one part in a million."""
        for k, v in TRUE.items():
            if k in but:
                continue
            self.assertAlmostEqual(got[k], scale * v, delta=1e-6 * v, msg=k)

    def test_the_host_speeds_exponent_and_the_figures_at_the_reference_come_back(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs_at_host_speeds(d, FIT_CASES, TRUE, [0.0016, 0.0024, 0.0036], 0.0024, 0.5)
            samples = fh.load_samples([d], CASES)
            self.assertEqual(sorted({s["loop_s"] for s in samples}), [0.0016, 0.0024, 0.0036])
            with contextlib.redirect_stdout(io.StringIO()):
                kept, speed = fh.loop_speed(samples, "fit")
        self.assertAlmostEqual(speed["exponent"], 0.5)
        self.assertAlmostEqual(speed["reference_loop_s"], 0.0024)
        self.assertLess(speed["tried"][0.5], 1e-6)
        self.assertGreater(speed["tried"][0.0], 5)  # taking every host at one speed misses by more than 5% rms
        self.assert_figures(dict(zip(fh.FIGURES, speed["figures"])))

    def test_the_backward_is_taken_at_autograds_loop_and_the_rest_at_the_main_threads(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs_at_host_speeds(d, FIT_CASES, TRUE, [0.0016, 0.0024, 0.0036], 0.0024, 0.5,
                                      autograd_loops_s=[0.0040, 0.0020, 0.0012, 0.0030])
            samples = fh.load_samples([d], CASES)
            backward = {s["loop_s"] for s in samples if s["phase"] == "backward"}
            rest = {s["loop_s"] for s in samples if s["phase"] != "backward"}
            with contextlib.redirect_stdout(io.StringIO()):
                _, speed = fh.loop_speed(samples, "fit")
        self.assertEqual(sorted(backward), [0.0012, 0.0020, 0.0030, 0.0040])
        self.assertEqual(sorted(rest), [0.0016, 0.0024, 0.0036])
        self.assertAlmostEqual(speed["reference_loop_s"], 0.0024)  # the main threads' median
        self.assertAlmostEqual(speed["exponent"], 0.5)
        self.assertLess(speed["tried"][0.5], 1e-6)
        self.assert_figures(dict(zip(fh.FIGURES, speed["figures"])))

    def test_a_run_without_autograds_loop_takes_its_backward_at_its_main_threads(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs_at_host_speeds(d, FIT_CASES[:3], TRUE, [0.0016], 0.0024, 0.5)
            samples = fh.load_samples([d], CASES)
        self.assertEqual({s["loop_s"] for s in samples}, {0.0016})

    def test_a_run_that_did_not_time_its_loop_is_taken_at_the_reference_speed(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs_at_host_speeds(d, FIT_CASES, TRUE, [0.0016, None, 0.0036], 0.0024, 1.0)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                kept, speed = fh.loop_speed(fh.load_samples([d], CASES), "1.0")
        self.assertIn("no timed reference loop: taken at the reference", out.getvalue())
        timed = sorted([0.0016, None, 0.0036][i % 3] for i in range(len(FIT_CASES)) if i % 3 != 1)
        self.assertAlmostEqual(speed["reference_loop_s"], statistics.median(timed))
        self.assertEqual(len(speed["untimed"]), len(FIT_CASES[1::3]))
        self.assertTrue(all(s["loop_s"] for s in kept))  # each untimed sample now at the reference

    def test_the_profile_carries_the_reference_loop_and_the_exponent(self):
        with tempfile.TemporaryDirectory() as d:
            runs = os.path.join(d, "runs")
            os.makedirs(runs)
            write_runs_at_host_speeds(runs, FIT_CASES, TRUE, [0.0016, 0.0024, 0.0036], 0.0024, 0.5)
            profile = os.path.join(d, "host.yaml")
            rc, _ = run_main([runs, "--eager-figures", "--loop-speed-exponent", "fit", "--profile", profile])
            self.assertEqual(rc, 0)
            text = open(profile).read()
        self.assertIn("      reference_loop_us: 2400  #", text)
        self.assertIn("      loop_speed_exponent: 0.50  #", text)
        self.assertIn("--loop-speed-exponent fit", text)

    def test_the_figures_come_back_from_phases_made_with_them(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            got = fitted(d)
        self.assert_figures(got)

    def test_phases_longer_than_the_free_running_step_are_scaled_down_to_it(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE, phase_excess=1.1)
            got = fitted(d)
        self.assert_figures(got)

    def test_raw_phases_fits_the_phases_as_timed(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE, phase_excess=1.1)
            got = fitted(d, raw_phases=True)
        # the offloaded backward's copy down is taken off as the case's PCIe gives it, unscaled
        self.assert_figures(got, scale=1.1, but=("stage12_offload_param_us",))

    def test_each_runs_ratio_is_its_median_free_running_step_over_its_phases_sum_and_is_printed(self):
        name = "fitA-z2-w1-mb2-s2048-sdpa-ckpt"
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, [name], TRUE, phase_excess=1.25)
            runs = []
            samples = fh.load_samples([d], CASES, runs=runs)
            _, printed = run_main([d])
        self.assertEqual([r["case"] for r in runs], [name])
        self.assertAlmostEqual(runs[0]["ratio"], 1 / 1.25, places=12)
        self.assertTrue(all(s["phase_scale"] == runs[0]["ratio"] for s in samples))
        self.assertRegex(printed, rf"{name}\.json +{1 / 1.25:.3f}\n")

    def test_a_run_without_free_running_steps_is_left_out_unless_phases_are_raw(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES[:1], TRUE, free_running=False)
            runs = []
            self.assertEqual(fh.load_samples([d], CASES, runs=runs), [])
            self.assertIsNone(runs[0]["ratio"])
            self.assertEqual(len(fh.load_samples([d], CASES, raw_phases=True)), 3)

    def test_stage3_with_checkpointing_counts_its_layers_hooks_apart_from_the_models_own(self):
        name = "fitA-z3-w1-mb2-s2048-sdpa-ckpt"
        st = fh.structure(os.path.join(CASES, name))
        forward = dict(zip(fh.FIGURES, fh.features(st, "forward")))
        backward = dict(zip(fh.FIGURES, fh.features(st, "backward")))
        layer_modules = fh.HOOKS_PER_LAYER * st["layers"]
        self.assertEqual(forward["stage3_checkpoint_forward_module_us"], layer_modules)
        self.assertEqual(forward["stage3_forward_module_us"], st["model_modules"])
        self.assertEqual(backward["stage3_recompute_module_us"], layer_modules)
        self.assertEqual(backward["stage3_forward_module_us"], 0)
        self.assertEqual(backward["stage3_backward_module_us"], layer_modules + st["model_modules"])

    def test_stage3_without_checkpointing_counts_every_modules_hooks_at_the_forwards_figure(self):
        st = fh.structure(os.path.join(CASES, "fitA-z3-w1-mb2-s2048-sdpa"))
        forward = dict(zip(fh.FIGURES, fh.features(st, "forward")))
        backward = dict(zip(fh.FIGURES, fh.features(st, "backward")))
        self.assertEqual(forward["stage3_forward_module_us"], fh.HOOKS_PER_LAYER * st["layers"] + st["model_modules"])
        for k in CHECKPOINTING_AT_STAGE_3:
            self.assertEqual(forward[k], 0, k)
            self.assertEqual(backward[k], 0, k)

    def test_a_figure_no_run_samples_is_not_fitted_and_left_out_of_the_profile(self):
        no_z3_ckpt = [c for c in FIT_CASES if not ("-z3-" in c and "-ckpt" in c)]
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, no_z3_ckpt, TRUE)
            got = fitted(d)
            profile = os.path.join(d, "host.yaml")
            rc, printed = run_main([d, "--profile", profile, "--eager-figures"])
            pairs = dict(p.split(": ") for p in mc.host_figures(profile).split(", "))
        self.assertEqual(rc, 0)
        for k in CHECKPOINTING_AT_STAGE_3:
            self.assertEqual(got[k], 0.0, k)
            self.assertNotIn(k, pairs)
            self.assertRegex(printed, k + r" .*no sample: left out \(zsim: stage3_forward_module_us\)")
        for k in set(TRUE) - set(CHECKPOINTING_AT_STAGE_3):
            self.assertAlmostEqual(float(pairs[k]), TRUE[k], delta=0.1, msg=k)

    def test_without_eager_figures_the_eager_figures_are_left_out_and_the_rest_fitted(self):
        figures = dict(TRUE, eager_forward_layer_us=0, eager_backward_layer_us=0)
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, figures)
            profile = os.path.join(d, "host.yaml")
            rc, printed = run_main([d, "--profile", profile])
            pairs = dict(p.split(": ") for p in mc.host_figures(profile).split(", "))
        self.assertEqual(rc, 0)
        for k in fh.EAGER_FIGURES:
            self.assertNotIn(k, pairs)
            self.assertRegex(printed, k + r" .*no sample: left out \(zsim: 0\)")
        for k in set(TRUE) - set(fh.EAGER_FIGURES):
            self.assertAlmostEqual(float(pairs[k]), TRUE[k], delta=0.1, msg=k)

    def test_of_offloaded_runs_only_the_optimizer_offload_at_stages_1_2_gives_its_backward(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            samples = fh.load_samples([d], CASES)
        offloaded = {(s["case"], s["phase"]) for s in samples if "off" in s["case"]}
        self.assertTrue(any("-z3-" in c and "off" in c for c in FIT_CASES))
        self.assertEqual(offloaded, {("fitA-z2-w1-mb4-s2048-sdpa-offopt", "backward")})

    def test_the_copy_down_is_taken_off_an_offloaded_backward_at_the_cases_pcie_rate(self):
        name = "fitA-z2-w1-mb4-s2048-sdpa-offopt"
        st = fh.structure(os.path.join(CASES, name))
        self.assertEqual(st["pcie_GBps"], 55)
        self.assertAlmostEqual(fh.copy_down_us(st, ELEMENTS), 4 * ELEMENTS / 55e9 * 1e6, places=6)
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, [name], TRUE)
            backward = [s for s in fh.load_samples([d], CASES, raw_phases=True) if s["phase"] == "backward"]
        self.assertAlmostEqual(backward[0]["measured_us"], host_phases_s(name, TRUE)["backward"] * 1e6, places=3)

    def test_a_figure_that_fits_negative_is_dropped_and_the_rest_refitted(self):
        figures = dict(TRUE, backward_fixed_us=-800)
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, figures)
            got = fitted(d)
        self.assertEqual(got["backward_fixed_us"], 0.0)
        self.assertTrue(all(v >= 0 for v in got.values()))

    def test_the_profile_it_writes_is_what_make_cases_copies_into_the_scenarios(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            profile = os.path.join(d, "host.yaml")
            self.assertEqual(run_main([d, "--profile", profile, "--eager-figures"])[0], 0)
            pairs = dict(p.split(": ") for p in mc.host_figures(profile).split(", "))
        self.assertEqual(set(pairs), set(fh.FIGURES))
        self.assertAlmostEqual(float(pairs["llama_forward_layer_us"]), 1500, delta=0.1)

    def test_rewriting_a_profile_keeps_the_figures_it_does_not_fit(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            profile, fresh = os.path.join(d, "host.yaml"), os.path.join(d, "fresh.yaml")
            with open(profile, "w") as f:
                f.write("cluster:\n  efficiency:\n    deepspeed_host:\n      forward_fixed_us: 1.0\n"
                        "    # measured apart\n    outside_allocator_bytes: 7\n")
            self.assertEqual(run_main([d, "--profile", profile, "--eager-figures"])[0], 0)
            self.assertEqual(run_main([d, "--profile", fresh, "--eager-figures"])[0], 0)
            with open(profile) as f:
                text = f.read()
            pairs = dict(p.split(": ") for p in mc.host_figures(profile).split(", "))
            fresh_outside = mc.outside_allocator_bytes(fresh)
        self.assertTrue(text.endswith("\n    # measured apart\n    outside_allocator_bytes: 7\n"), text[-200:])
        self.assertAlmostEqual(float(pairs["forward_fixed_us"]), TRUE["forward_fixed_us"], delta=0.1)
        self.assertEqual(fresh_outside, mc.outside_allocator_bytes())  # a new file: the committed profile's

    def test_the_committed_cases_carry_the_committed_figures(self):
        with open(os.path.join(ROOT, "cases", "l150m-z2-w1-mb4-s2048-sdpa", "scenario.yaml")) as f:
            self.assertIn("deepspeed_host: {" + mc.host_figures() + "}", f.read())


if __name__ == "__main__":
    unittest.main()
