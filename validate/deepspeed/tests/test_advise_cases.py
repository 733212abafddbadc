"""advise_cases.py's and compare_advise.py's pure parts (no zsim, no torch), and the committed advise cases.
Run: cd validate/deepspeed && python3 -m unittest discover -s tests"""
import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from zsim_ds.case_tools import advise_cases as ac  # noqa: E402
from zsim_ds.case_tools import compare_advise as ca  # noqa: E402
from zsim_ds.harness.case import load_case  # noqa: E402

SETTING = {"name": "x", "model": "llama-150m", "seq_len": 1024, "attention": "sdpa", "cap_bytes": 20 << 30,
           "steps": 8, "default": {"stage": 2, "micro_batch": 4, "grad_accum": 1, "checkpointing": "none",
                                   "zero": "-"}, "why": "test"}


class LadderTest(unittest.TestCase):
    def test_lower_micro_batch_then_checkpointing_then_offload(self):
        rows = ac.fitting_ladder(ac.default_row(SETTING))
        steps = [(r["micro_batch"], r["grad_accum"], r["checkpointing"], r["zero"]) for r in rows]
        self.assertEqual(steps, [(2, 2, "none", "-"), (1, 4, "none", "-"),
                                 (4, 1, "full", "-"), (2, 2, "full", "-"), (1, 4, "full", "-"),
                                 (4, 1, "full", "offopt"), (2, 2, "full", "offopt"), (1, 4, "full", "offopt")])
        self.assertTrue(all(r["name"] == "adv-x-fit" for r in rows))
        self.assertEqual(rows[-1]["zero_changes"], [("offload_optimizer.device", "cpu"),
                                                    ("offload_optimizer.pin_memory", True)])

    def test_stage0_and_offloaded_defaults_have_no_offload_step(self):
        for stage, zero in ((0, "-"), (3, "offopt,offparam")):
            s = dict(SETTING, default=dict(SETTING["default"], stage=stage, zero=zero, checkpointing="full"))
            rows = ac.fitting_ladder(ac.default_row(s))
            self.assertEqual([(r["micro_batch"], r["zero"]) for r in rows], [(2, zero), (1, zero)])


class FilesTest(unittest.TestCase):
    def test_advised_ds_config_keeps_the_users_optimizer(self):
        user = {"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": 2}}
        ds = ac.advised_ds_config({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}, user)
        self.assertEqual(ds["optimizer"], user["optimizer"])
        self.assertEqual(ds["zero_optimization"], {"stage": 3})

    def test_scenario_has_the_cap(self):
        text = ac.scenario_text(ac.default_row(SETTING), 20 << 30)
        self.assertIn(f"gpu: {{preset: h200-141gb, hbm_bytes: {20 << 30}}}", text)
        self.assertIn("advise_cases.py", text)
        self.assertIn("ds_config: ds_config.json", text)


def result(status="ok", step=0.5, mb=2, ga=4, seq=1024, kind=None, reserved=10 << 30):
    return {"status": status, "failure_kind": kind,
            "case": {"micro_batch": mb, "grad_accum": ga, "seq_len": seq, "world": 1},
            "ranks": [{"timing": {"median_step_seconds": step if status == "ok" else None},
                       "memory": {"peak_reserved": reserved}}]}


def role(res, fits=True):
    return {"advise": {"zsim_fits_with_margin": fits}, "measured": ca.measured(res) if res else None}


class CompareTest(unittest.TestCase):
    def test_measured_tokens_per_second(self):
        m = ca.measured(result(step=0.5))
        self.assertEqual(m["tokens_per_s"], 2 * 4 * 1024 / 0.5)
        self.assertIsNone(ca.measured(result(status="failed", kind="oom"))["tokens_per_s"])

    def test_verdicts(self):
        oom = result(status="failed", kind="oom")
        ok, text = ca.verdict({"default": role(oom, False), "fit": role(result(step=1.0)),
                               "advised": role(result(step=0.5))})
        self.assertTrue(ok, text)
        self.assertIn("+100.0%", text)
        ok, text = ca.verdict({"default": role(oom, False), "fit": role(result(step=0.4)),
                               "advised": role(result(step=0.5))})
        self.assertFalse(ok)
        ok, text = ca.verdict({"default": role(result(step=0.5)), "advised": role(oom)})
        self.assertFalse(ok)
        self.assertIn("oom", text)
        # the default ran although zsim said it would not: the faster of default and fit is the baseline
        ok, text = ca.verdict({"default": role(result(step=0.3), False), "fit": role(result(step=1.0)),
                               "advised": role(result(step=0.5))})
        self.assertFalse(ok)
        self.assertIn("default's", text)


def configured(r, stage=2, offload=None, **zero):
    z = {"stage": stage, **zero}
    if offload:
        z["offload_optimizer"] = {"device": offload}
    r["case"] = {"model": "m", "seq_len": 1024, "micro_batch": 8, "grad_accum": 1, "checkpointing": "full"}
    r["ds_config"] = {"train_micro_batch_size_per_gpu": 8, "zero_optimization": z}
    return r


class SameConfigurationTest(unittest.TestCase):
    def test_keys_written_out_at_their_defaults_are_the_same_configuration(self):
        user = configured({}, offload="cpu")
        advised = configured({}, offload="cpu", sub_group_size=1000000000)
        advised["ds_config"]["zero_optimization"]["offload_optimizer"]["ratio"] = 1.0
        self.assertTrue(ca.same_configuration(advised, user))

    def test_another_stage_offload_or_batch_split_is_not(self):
        user = configured({}, offload="cpu")
        self.assertFalse(ca.same_configuration(configured({}, stage=1, offload="cpu"), user))
        self.assertFalse(ca.same_configuration(configured({}, offload="none"), user))
        other = configured({}, offload="cpu")
        other["case"]["micro_batch"] = 2
        self.assertFalse(ca.same_configuration(other, user))

    def test_an_advice_that_is_the_fitting_variant_passes_as_it_with_both_runs_printed(self):
        oom = result(status="failed", kind="oom")
        fit = configured(role(result(step=0.50)), offload="cpu")
        advised = configured(role(result(step=0.51)), offload="cpu", sub_group_size=1000000000)
        ok, text = ca.verdict({"default": role(oom, False), "fit": fit, "advised": advised})
        self.assertTrue(ok, text)
        self.assertIn("the fitting variant's configuration", text)
        self.assertIn("-2.0%, run to run", text)
        slower = configured(role(result(step=0.51)), stage=1, offload="cpu")
        ok, text = ca.verdict({"default": role(oom, False), "fit": fit, "advised": slower})
        self.assertFalse(ok, text)


class CommittedCasesTest(unittest.TestCase):
    def test_every_advise_case_loads_and_is_complete(self):
        with open(os.path.join(ROOT, "lists", "advise.txt")) as f:
            names = [ln.strip() for ln in f if ln.strip()]
        self.assertTrue(names)
        settings = {}
        for n in names:
            case_dir, case, ds, _ = load_case(os.path.join(ROOT, "cases", n))
            self.assertEqual(case["generator"], "advise_cases.py")
            self.assertEqual(case["world"], 1)
            a = case["advise"]
            settings.setdefault(a["setting"], set()).add(a["role"])
            self.assertEqual(n, f"adv-{a['setting']}-{a['role']}")
            with open(os.path.join(case_dir, "scenario.yaml")) as f:
                text = f.read()
            self.assertEqual(int(re.search(r"hbm_bytes: (\d+)", text).group(1)), case["gpu_memory_cap_bytes"])
            self.assertIn(f"activation_checkpointing: {case['checkpointing']}", text)
            self.assertIn("optimizer", ds)
            self.assertEqual(case["expect"], "ok" if a["zsim_fits"] else "failed")
            if a["role"] != "default":
                self.assertTrue(a["zsim_fits_with_margin"], n)
        self.assertEqual(len(settings), len(ac.SETTINGS))
        for s, roles in settings.items():
            self.assertIn("default", roles)
            self.assertIn("advised", roles)
            if "fit" not in roles:  # no fitting variant: the default fits
                with open(os.path.join(ROOT, "cases", f"adv-{s}-default", "case.json")) as f:
                    self.assertTrue(json.load(f)["advise"]["zsim_fits_with_margin"], s)


if __name__ == "__main__":
    unittest.main()
