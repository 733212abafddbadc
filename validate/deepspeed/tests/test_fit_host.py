"""fit_host.py: the host figures come back from phases made with them, and what the fit leaves out.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests   (no torch needed)"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

import fit_host as fh  # noqa: E402
import make_cases as mc  # noqa: E402

TRUE = {"forward_fixed_us": 3000, "llama_forward_layer_us": 1500, "gpt2_forward_layer_us": 1000,
        "checkpoint_forward_layer_us": 900, "stage3_forward_module_us": 270, "backward_fixed_us": 500,
        "llama_backward_layer_us": 3500, "gpt2_backward_layer_us": 2300, "recompute_layer_us": 2900,
        "stage3_backward_module_us": 310, "step_fixed_us": 2600, "step_param_us": 43, "stage3_step_param_us": 96}
FIT_CASES = [r["name"] for r in mc.parse_table(open(os.path.join(ROOT, "cases.tsv")).read()) if "fit" in r["lists"]]


def write_runs(folder, cases, figures, scale=1.0):
    """A harness result per case whose phase medians are the host model at `figures` (times `scale`)."""
    for name in cases:
        st = fh.structure(os.path.join(ROOT, "cases", name))
        phases = {ph: scale * sum(a * figures[k] for a, k in zip(fh.features(st, ph), fh.FIGURES)) * 1e-6
                  for ph in ("forward", "backward", "step")}
        with open(os.path.join(folder, name + ".json"), "w") as f:
            json.dump({"case": {"name": name}, "ranks": [{"timing": {"median_phase_seconds": phases}}]}, f)


class FitHostTest(unittest.TestCase):
    def test_the_figures_come_back_from_phases_made_with_them(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            samples = fh.load_samples([d], os.path.join(ROOT, "cases"))
            got = dict(zip(fh.FIGURES, fh.fit(samples)))
        for k, v in TRUE.items():
            self.assertAlmostEqual(got[k], v, delta=1e-6 * v, msg=k)

    def test_offloaded_runs_are_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            cases = {s["case"] for s in fh.load_samples([d], os.path.join(ROOT, "cases"))}
        self.assertTrue(any("off" in c for c in FIT_CASES))
        self.assertFalse(any("off" in c for c in cases))

    def test_a_figure_that_fits_negative_is_dropped_and_the_rest_refitted(self):
        figures = dict(TRUE, backward_fixed_us=-800)
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, figures)
            got = dict(zip(fh.FIGURES, fh.fit(fh.load_samples([d], os.path.join(ROOT, "cases")))))
        self.assertEqual(got["backward_fixed_us"], 0.0)
        self.assertTrue(all(v >= 0 for v in got.values()))

    def test_the_profile_it_writes_is_what_make_cases_copies_into_the_scenarios(self):
        with tempfile.TemporaryDirectory() as d:
            write_runs(d, FIT_CASES, TRUE)
            profile = os.path.join(d, "host.yaml")
            self.assertEqual(fh.main([d, "--profile", profile]), 0)
            pairs = dict(p.split(": ") for p in mc.host_figures(profile).split(", "))
        self.assertEqual(set(pairs), set(fh.FIGURES))
        self.assertAlmostEqual(float(pairs["llama_forward_layer_us"]), 1500, delta=0.1)

    def test_the_committed_cases_carry_the_committed_figures(self):
        with open(os.path.join(ROOT, "cases", "l150m-z2-w1-mb4-s2048-sdpa", "scenario.yaml")) as f:
            self.assertIn("deepspeed_host: {" + mc.host_figures() + "}", f.read())


if __name__ == "__main__":
    unittest.main()
