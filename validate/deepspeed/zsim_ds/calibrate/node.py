"""One command on a GPU machine: measure it under the DeepSpeed, torch and transformers found there and write ONE zsim
hardware profile that `cluster.profile` loads (issue 59; docs/deepspeed-time.md, "Predicting your own machine").

    python3 validate/deepspeed/calibrate_node.py --out my-node.yaml [--budget-s 600] [--zrun build/bin/zrun]

In one time budget (default 600 s; every step is cut to what is left, and the profile is written with whatever
finished), from the repository root, with torch, transformers and DeepSpeed importable:
  1. the machine: torch's view of the GPU (name, memory, count), the versions, the host's CPUs and memory; the GPU's
     zsim preset by its name (H100 SXM, H200, A100, V100; another GPU needs --gpu-peak-tflops and --gpu-hbm-GBps);
  2. DeepSpeed's JIT extensions the cases need (FusedAdam, CPUAdam), built once;
  3. with --zrun, `zrun calibrate` (zrun's links, NVMe and collectives; its own kernels' figures are left out:
     docs/hardware-profiles.md);
  4. torch's GPU figures (validate/deepspeed/probes/): the aligned and misaligned GEMMs (probe_vocab_alignment.py),
     transformers' memory-bound kernels per kind (probe_torch_kernels.py), the converting copies across PCIe
     (probe_cross_copy.py), DeepSpeedCPUAdam (probe_cpu_adam.py);
  5. the fit's micro-runs (CASES below, from lists fit / fit2 / fit3; never a validation case) through the harness,
     phase-timed, one after another while the budget lasts;
  6. the host's figures fitted from them (fit_host.py's fit, eager figures included, at the runs' host speed: the
     reference loop the median of their main-thread loops, the exponent host-h200.yaml's unless
     --loop-speed-exponent fit), a figure the finished runs do not determine taken from host-h200.yaml scaled to this
     host's loop (said so beside it); the memory outside the allocator (the runs' largest); the profile written.
The work folder (--work, default OUT's name + ".d/") keeps every measurement, log and `calibration.json`.
Exit status: 0 with the host's figures fitted, 1 a profile without them (no fit run finished), 2 nothing written.
"""
import argparse
import datetime
import glob
import json
import os
import signal
import subprocess
import sys
import time

from .. import ROOT  # validate/deepspeed/
from ..fit import fit_host as fh
from . import figures as fig
from . import profile_yaml as py
from .host_fit import COMMITTED_PROFILE, committed_host, fit_host_figures, read_json  # noqa: F401 (COMMITTED_PROFILE: node's API)

DEFAULT_BUDGET_S = 600
RESERVE_S = 20  # kept for the fit and the profile at the end
MIN_CASE_START_S = 25  # no fit case starts with less than this left beyond the reserve
CASE_TIMEOUT_S = 90
STEPS = 20  # as the tenth session's fit runs (session-15-fit.txt, STEPS=20)
HARNESS_ARGS = ["--no-memory-history", "--inventory", "off", "--phase-steps", "3"]

# The fit's cases in the order they run, so that the budget's cut drops the least needed (each ~20 s on the H200,
# most of it the processes' start): the first MIN_CASES determine every figure of fit_host.FIGURES (two Llama depths
# at stage 0; stages 1, 2 and 3; checkpointing at stages 2 and 3; eager; GPT-2; the offloaded backward), the rest
# add samples of other widths, depths and stages. tests/test_calibrate_node.py checks that the first MIN_CASES
# determine the fit.
CASES = [
    "fitD-z0-w1-mb1-s512-sdpa", "fitC-z0-w1-mb1-s512-sdpa", "fitD-z2-w1-mb1-s512-sdpa", "fitD-z3-w1-mb1-s512-sdpa",
    "fitG-z0-w1-mb2-s1024-sdpa", "fitD-z2-w1-mb1-s512-sdpa-ckpt", "fitD-z0-w1-mb1-s512-eager",
    "fitD-z3-w1-mb1-s512-sdpa-ckpt", "fitA-z1-w1-mb2-s2048-sdpa", "fitC-z3-w1-mb1-s512-sdpa",
    "fitA-z2-w1-mb4-s2048-sdpa-offopt",
    "fitD-z2-w1-mb1-s512-eager", "fitH-z3-w1-mb1-s512-eager", "fitA-z0-w1-mb2-s2048-sdpa",
    "fitE-z3-w1-mb1-s512-sdpa-ckpt", "fitC-z3-w1-mb1-s512-sdpa-ckpt", "fitB-z2-w1-mb1-s512-sdpa",
    "fitG-z2-w1-mb2-s1024-eager", "fitA-z3-w1-mb2-s2048-sdpa-ckpt", "fitE-z2-w1-mb1-s512-sdpa",
    "fitB-z1-w1-mb1-s512-sdpa-ckpt", "fitH-z2-w1-mb1-s512-eager-ckpt", "fitE-z0-w1-mb1-s512-sdpa",
    "fitG-z3-w1-mb1-s1024-eager-ckpt",
]
MIN_CASES = 11

# (probe script, cap seconds, result file): torch's GPU figures, each a process of its own.
PROBES = [("probe_vocab_alignment.py", 90, "vocab_alignment.json"),
          ("probe_torch_kernels.py", 120, "torch_kernels.json"),
          ("probe_cross_copy.py", 120, "cross_copy.json"),
          ("probe_cpu_adam.py", 120, "cpu_adam.json")]

ENV_SCRIPT = r"""
import json, os, sys
out = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
try:
    out["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (ValueError, OSError, AttributeError):
    pass
import torch
out["torch"] = torch.__version__
out["cuda"] = torch.version.cuda
out["gpu_count"] = torch.cuda.device_count()
if out["gpu_count"]:
    p = torch.cuda.get_device_properties(0)
    out["gpu"], out["gpu_total_memory"] = torch.cuda.get_device_name(0), p.total_memory
for m in ("transformers", "deepspeed"):
    try:
        from importlib import metadata
        out[m] = metadata.version(m)
    except Exception:
        try:
            out[m] = __import__(m).__version__
        except Exception as e:
            out[m + "_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""

PREBUILD_SCRIPT = os.path.join(ROOT, "zsim_ds", "prebuild_ops.py")  # device_run.sh runs it too


# The efficiencies zsim reads as fractions of the GPU's data-sheet figures, in (0, 1].
FRACTION_KEYS = ("gemm", "torch_misaligned_gemm", "hbm_by_kind", "pageable_pcie_fraction", "pageable_h2d_pcie_fraction")


def capped_fractions(value):
    """A fraction (or a map of them) with each value above 1 made 1 (None stays None)."""
    if isinstance(value, dict):
        return {k: min(v, 1.0) for k, v in value.items()}
    return None if value is None else min(value, 1.0)


def run_process(cmd, timeout_s, env=None, log_path=None):
    """Runs cmd (its own process group, stdout and stderr into log_path) for at most timeout_s seconds; returns its exit
    status, or None where it was stopped at the timeout (the group TERMed, then KILLed 10 s later)."""
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    try:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            return p.wait(timeout=max(timeout_s, 1))
        except subprocess.TimeoutExpired:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            return None
    finally:
        if log is not subprocess.DEVNULL:
            log.close()


class Budget:
    """Seconds left of the total, on `clock`."""

    def __init__(self, total_s, clock=time.monotonic):
        self.total_s, self.clock, self.start = total_s, clock, clock()

    def elapsed(self):
        return self.clock() - self.start

    def left(self):
        return self.total_s - self.elapsed()


class Calibration:
    """The steps of the module docstring, each cut to the budget; `runner` runs a command (run_process's signature),
    `clock` times the budget (both replaced by the tests)."""

    def __init__(self, args, runner=run_process, clock=time.monotonic, log=print):
        self.args, self.runner, self.log = args, runner, log
        self.budget = Budget(args.budget_s, clock)
        self.work = args.work or (os.path.splitext(args.out)[0] + ".d")
        self.stages, self.environment, self.zrun_profile = [], {}, None
        self.gpu = None  # {"preset", "name", "hbm_GBps", "peak_tflops", "hbm_bytes"}
        self.cases_run, self.cases_not_run = [], []
        self.started_at = datetime.datetime.now(datetime.timezone.utc)

    # -- the steps --------------------------------------------------------------------------------------------------

    def stage(self, name, cmd, cap_s, minimum_s=5, log_name=None, env=None):
        """Runs one step's command within min(cap, what is left less the reserve); records and returns its status:
        "ok", "failed" (exit status), "timeout", or "skipped" (less than minimum_s left)."""
        left = self.budget.left() - RESERVE_S
        if left < minimum_s:
            self.stages.append({"stage": name, "status": "skipped", "why": "budget", "seconds": 0})
            self.log(f"== {name}: skipped (budget: {self.budget.left():.0f} s left)")
            return "skipped"
        t0 = self.budget.elapsed()
        rc = self.runner(cmd, min(cap_s, left), env, os.path.join(self.work, log_name or f"{name}.log"))
        seconds = self.budget.elapsed() - t0
        status = "ok" if rc == 0 else "timeout" if rc is None else "failed"
        self.stages.append({"stage": name, "status": status, "exit": rc, "seconds": round(seconds, 1)})
        self.log(f"== {name}: {status}{'' if rc in (0, None) else f' (exit {rc})'}, {seconds:.0f} s")
        return status

    def look_at_the_machine(self):
        status = self.stage("environment", [self.args.python, "-c", ENV_SCRIPT], 120, log_name="environment.log")
        out = {}
        try:
            with open(os.path.join(self.work, "environment.log")) as f:
                lines = [line for line in f.read().splitlines() if line.startswith("{")]
            out = json.loads(lines[-1]) if lines else {}
        except (OSError, ValueError):
            pass
        self.environment = out
        if status != "ok" or not out.get("gpu"):
            return "no GPU seen through torch (environment.log)" if status == "ok" else \
                f"the look at the machine {status} (environment.log)"
        return self.resolve_gpu()

    def resolve_gpu(self):
        """self.gpu from the environment's GPU: its preset (or the peaks given); the reason where neither is."""
        out = self.environment
        preset = self.args.gpu_preset or fig.gpu_preset(out["gpu"], out.get("gpu_total_memory", 0))
        if preset:
            if preset not in fig.PRESETS:
                return f"--gpu-preset {preset}: not one of zsim's ({', '.join(fig.PRESETS)})"
            hbm_GBps, peak = fig.PRESETS[preset]
        elif self.args.gpu_peak_tflops and self.args.gpu_hbm_GBps:
            hbm_GBps, peak = self.args.gpu_hbm_GBps, self.args.gpu_peak_tflops
        else:
            return (f"zsim has no preset for {out['gpu']!r}: give its data sheet's --gpu-peak-tflops (dense bf16) and "
                    f"--gpu-hbm-GBps, or --gpu-preset")
        self.gpu = {"preset": preset, "name": out["gpu"], "hbm_GBps": float(hbm_GBps), "peak_tflops": float(peak),
                    "hbm_bytes": out.get("gpu_total_memory")}
        self.log(f"== GPU {out['gpu']} ({out.get('gpu_count')} visible): " +
                 (f"preset {preset}" if preset else f"peaks given: {peak} TFLOPS, {hbm_GBps} GB/s") +
                 f"; torch {out.get('torch')}, transformers {out.get('transformers')}, "
                 f"deepspeed {out.get('deepspeed')}, python {out.get('python')}, {out.get('cpus')} CPUs")
        return None

    def prebuild(self):
        self.stage("prebuild", [self.args.python, PREBUILD_SCRIPT, "FusedAdamBuilder", "CPUAdamBuilder"], 240)

    def zrun_calibrate(self):
        if not self.args.zrun:
            return
        out = os.path.join(self.work, "zrun-calibrate.yaml")
        if self.stage("zrun-calibrate", [self.args.zrun, "calibrate", "--out", out, *self.args.zrun_args], 300) == "ok" \
                and os.path.isfile(out):
            with open(out) as f:
                self.zrun_profile = f.read()

    def probes(self):
        env = dict(os.environ, OUT=os.path.join(self.work, "probes"))
        os.makedirs(env["OUT"], exist_ok=True)
        for script, cap, _ in PROBES:
            self.stage(script[:-3], [self.args.python, os.path.join(ROOT, "probes", script)], cap, env=env,
                       log_name=os.path.join("probes", script[:-3] + ".log"))

    def cases(self):
        runs = os.path.join(self.work, "runs")
        os.makedirs(runs, exist_ok=True)
        for c in self.args.cases:
            left = self.budget.left() - RESERVE_S
            if left < MIN_CASE_START_S:
                self.cases_not_run.append(c)
                continue
            to = int(min(self.args.case_timeout_s, left - 10))
            cmd = [self.args.python, os.path.join(ROOT, "harness.py"), "--case-dir", os.path.join(ROOT, "cases", c),
                   "--out", os.path.join(runs, c + ".json"), "--log-dir", os.path.join(runs, c + ".logs"),
                   "--timeout", str(to), "--steps", str(self.args.steps), *HARNESS_ARGS]
            self.stage(c, cmd, to + 30, minimum_s=MIN_CASE_START_S, log_name=os.path.join("runs", c + ".harness.log"))
            self.cases_run.append(c)
        if self.cases_not_run:
            self.log(f"== not run (budget): {' '.join(self.cases_not_run)}")

    # -- the profile ------------------------------------------------------------------------------------------------

    def results(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.work, "runs", "*.json"))):
            r = read_json(path)
            if r and r.get("format") == "zsim.deepspeed_run":
                out.append(r)
        return out

    def probe(self, name):
        return read_json(os.path.join(self.work, "probes", name))

    def write(self):
        """Fits, writes the profile and calibration.json; returns the exit status."""
        results = self.results()
        ok = [r for r in results if r.get("status") == "ok"]
        committed = committed_host()
        host = fit_host_figures(os.path.join(self.work, "runs"), os.path.join(ROOT, "cases"),
                                self.args.loop_speed_exponent, committed, self.args.prior_weight)
        stack = fig.stack_of(ok, self.environment)
        stack["date"] = self.started_at.strftime("%Y-%m-%d")
        g = self.gpu
        eff, notes = {}, []
        va, tk, cc, ca = (self.probe(n) for n in ("vocab_alignment.json", "torch_kernels.json", "cross_copy.json",
                                                  "cpu_adam.json"))
        gemm, misaligned = fig.gemm_figures(va, g["peak_tflops"]) if va else (None, None)
        eff["gemm"] = (gemm, f"torch's aligned bf16 GEMMs over {g['peak_tflops']:g} TFLOPS (probe_vocab_alignment.py: "
                             f"the 50,304-wide head's forward and backward)")
        eff["torch_misaligned_gemm"] = (misaligned, "the 50,257-wide head's (GPT-2's) forward and backward GEMMs over "
                                                    "the peak (probe_vocab_alignment.py)")
        kinds = fig.hbm_by_kind(tk, g["hbm_GBps"]) if tk else None
        eff["hbm_by_kind"] = (kinds or None, f"transformers' memory-bound kernels under torch, zsim's bytes over their "
                                             f"time over {g['hbm_GBps']:g} GB/s (probe_torch_kernels.py, Llama's and "
                                             f"GPT-2's rows pooled)")
        pcie, d2h, h2d = fig.copy_figures(cc) if cc else (None, None, None)
        eff["pageable_pcie_fraction"] = (d2h, "torch's converting copies GPU -> CPU over the pinned ones "
                                              "(probe_cross_copy.py)")
        eff["pageable_h2d_pcie_fraction"] = (h2d, "the same CPU -> GPU")
        adam = fig.cpu_adam_figures(ca) if ca else None
        eff["cpu_adam_measured"] = ({"ranks_1": adam} if adam else None,
                                    "DeepSpeedCPUAdam over 128M parameters per thread count (probe_cpu_adam.py)")
        outside = fig.outside_allocator_bytes(ok)
        eff["outside_allocator_bytes"] = (outside, f"the largest over the {len(ok)} fit runs of the GPU memory outside "
                                                   f"PyTorch's caching allocator after the steps (harness "
                                                   f"memory.device)")
        if host:
            ds = list(host["figures"])
            if host["reference_loop_us"]:
                ds.append(("reference_loop_us", round(host["reference_loop_us"]),
                           f"this host's reference loop (host_cpu.py): the median of the {host['timed_runs']} fit "
                           f"runs' main-thread loops" + (f"; autograd's thread's {host['autograd_loop_us']:.0f}"
                                                          if host["autograd_loop_us"] else "")))
                ds.append(("loop_speed_exponent", round(host["exponent"], 2),
                           "fitted on these runs" if host["exponent_fitted"] else
                           "host-h200.yaml's (ten sessions' fit), not fitted on one session"))
            eff["deepspeed_host"] = (ds, f"fit_host.py's fit over {host['samples']} phase samples of "
                                         f"{len(host['cases'])} fit cases: residual rms {host['rms_percent']:.1f}%")
        else:
            notes.append("no fit run finished: no efficiency.deepspeed_host figures (zsim says the host is not "
                         "priced)")
        for key, (value, comment) in list(eff.items()):  # zsim takes efficiencies in (0, 1]: above, the preset is off
            capped = capped_fractions(value) if key in FRACTION_KEYS else value
            if capped != value:
                eff[key] = (capped, comment + f"; measured {py.flow(value) if isinstance(value, dict) else value}, "
                                              f"capped at 1 (above the preset's data-sheet figure: is it this GPU's?)")
                notes.append(f"efficiency.{key}: measured above 1 of the preset's figure, capped at 1")
        for key, (value, _) in eff.items():
            if value is None and key != "deepspeed_host":
                notes.append(f"efficiency.{key}: not measured (its probe did not finish): zsim's default")
        cluster = [("gpus_per_node", self.environment.get("gpu_count") or 1, "GPUs visible (a scenario sets its own)"),
                   ("gpu", {k: v for k, v in ({"preset": g["preset"], "hbm_bytes": g["hbm_bytes"]} if g["preset"] else
                                              {"name": g["name"], "hbm_bytes": g["hbm_bytes"], "hbm_GBps": g["hbm_GBps"],
                                               "peak_tflops": g["peak_tflops"]}).items() if v is not None},
                    (f"the preset of {g['name']} (its data sheet's peaks, which the efficiencies are measured "
                     f"against); hbm_bytes torch's total_memory") if g["preset"] else
                    f"{g['name']}: no zsim preset, the data sheet's peaks as given; hbm_bytes torch's total_memory"),
                   ("host", {k: v for k, v in (("memory_bytes", self.environment.get("memory_bytes")),
                                               ("cores", self.environment.get("cpus"))) if v},
                    "os.sysconf, os.cpu_count"),
                   ("links", {"pcie_GBps": round(pcie, 2)} if pcie else None,
                    "pinned copies GPU <-> CPU (probe_cross_copy.py)"),
                   ("fitted_under", stack, "the versions the fit runs ran under")]
        cluster = [c for c in cluster if c[1]]
        elapsed = self.budget.elapsed()
        versions = ", ".join(f"{label} {stack[k]}" for k, label in (("deepspeed", "DeepSpeed"), ("torch", "torch"),
                                                                    ("transformers", "transformers")) if k in stack)
        description = f"{g['name']} under {versions}: calibrated by validate/deepspeed/calibrate_node.py"
        how = (f"refitted by validate/deepspeed/calibrate_node.py --refit on "
               f"{self.started_at.strftime('%Y-%m-%dT%H:%M:%SZ')} from the measurements in {self.work}"
               if self.args.refit else
               f"written by validate/deepspeed/calibrate_node.py on {self.started_at.strftime('%Y-%m-%dT%H:%M:%SZ')} "
               f"in {elapsed:.0f} s of a {self.args.budget_s:.0f} s budget")
        cpus = f", {self.environment['cpus']} CPUs" if self.environment.get("cpus") else ""
        head = [f"zsim hardware profile of one machine for DeepSpeed (issue 59), {how}: {g['name']}{cpus}; "
                f"{versions}; python {stack.get('python')}.",
                "Load it with cluster.profile: NAME (this file as NAME.yaml in the scenario's folder, its hardware/, or "
                "a folder given to --profile-dir). docs/deepspeed-time.md, \"Predicting your own machine\".",
                "The figures hold for the DeepSpeed, torch and transformers above (cluster.fitted_under): zsim "
                "validate warns where a run's differ."]
        if host:
            head.append(f"Host: {len(host['cases'])} fit cases, {host['samples']} phase samples, residual rms "
                        f"{host['rms_percent']:.1f}%, worst {host['worst']['percent']:+.1f}% ({host['worst']['case']} "
                        f"{host['worst']['phase']}).")
        head += notes
        if self.cases_not_run:
            head.append(f"Not run (budget): {' '.join(self.cases_not_run)}.")
        record = {"tool": "validate/deepspeed/calibrate_node.py", "date": self.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "budget_s": float(self.args.budget_s), "elapsed_s": round(elapsed, 1),
                  "gpu": g["name"], "preset": g["preset"] or "", "stack": stack,
                  "cases_ok": [r["case"]["name"] for r in ok],
                  "cases_failed": [r["case"]["name"] for r in results if r.get("status") != "ok"],
                  "cases_not_run": self.cases_not_run,
                  "stages": {s["stage"]: s["status"] for s in self.stages}}
        if host:
            record.update({"fit_samples": host["samples"], "fit_rms_percent": round(host["rms_percent"], 2),
                           "taken_from_committed": host["taken_from_committed"]})
        if self.zrun_profile:
            text = py.merge_zrun_profile(self.zrun_profile, description, cluster, eff, record, head)
        else:
            text = py.profile_text(head, description, cluster, eff, record)
        tmp = self.args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.args.out)
        with open(os.path.join(self.work, "calibration.json"), "w") as f:
            json.dump({"record": record, "environment": self.environment, "gpu": g, "stages": self.stages,
                       "host_fit": host, "notes": notes}, f, indent=1)
            f.write("\n")
        self.log(f"== wrote {self.args.out} ({elapsed:.0f} s of {self.args.budget_s:.0f}); "
                 + (f"host: {len(host['cases'])} cases, {host['samples']} samples, rms {host['rms_percent']:.1f}%"
                    if host else "no host figures"))
        for n in notes:
            self.log(f"   {n}")
        return 0 if host else 1

    def refit(self):
        """--refit: the profile again from the work folder's measurements (its runs/, probes/, zrun-calibrate.yaml),
        with this command's fit options; the machine as calibration.json recorded it, else as the runs' versions
        do (GPU, memory, count, versions; the host's CPUs and memory then left out)."""
        record = read_json(os.path.join(self.work, "calibration.json")) or {}
        self.environment = record.get("environment") or {}
        if not self.environment.get("gpu"):
            for r in self.results():
                v = r.get("versions") or {}
                if v.get("gpu"):
                    self.environment = {"gpu": v["gpu"], "gpu_total_memory": v.get("gpu_total_memory"),
                                        "gpu_count": v.get("gpu_count_visible"),
                                        **{k: v[k] for k in fig.STACK_KEYS if v.get(k) and k != "gpu"}}
                    break
        if not self.environment.get("gpu"):
            self.log(f"calibrate_node: --refit: no machine recorded in {self.work} (calibration.json, runs/)")
            return 2
        why = self.resolve_gpu()
        if why:
            self.log(f"calibrate_node: {why}; nothing written")
            return 2
        zrun = os.path.join(self.work, "zrun-calibrate.yaml")
        if os.path.isfile(zrun):
            with open(zrun) as f:
                self.zrun_profile = f.read()
        self.stages = [{"stage": "refit", "status": "ok", "seconds": 0}]
        return self.write()

    def run(self):
        os.makedirs(self.work, exist_ok=True)
        if self.args.refit:
            return self.refit()
        why = self.look_at_the_machine()
        if why:
            self.log(f"calibrate_node: {why}; nothing written")
            with open(os.path.join(self.work, "calibration.json"), "w") as f:
                json.dump({"error": why, "environment": self.environment, "stages": self.stages}, f, indent=1)
            return 2
        self.prebuild()
        self.zrun_calibrate()
        if not self.args.skip_probes:
            self.probes()
        self.cases()
        return self.write()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the profile to write (NAME.yaml: cluster.profile NAME loads it)")
    ap.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                    help=f"seconds for everything (default {DEFAULT_BUDGET_S}); the profile is written with what finished")
    ap.add_argument("--work", help="the folder of measurements and logs (default: OUT's name + .d)")
    ap.add_argument("--zrun", help="a zrun binary: run `zrun calibrate` too (links, NVMe, collectives)")
    ap.add_argument("--zrun-args", nargs=argparse.REMAINDER, default=[],
                    help="more arguments for zrun calibrate (last on the line), e.g. --quick")
    ap.add_argument("--cases", nargs="+", default=CASES,
                    help="fit cases to run, in order (default: the module's CASES, most needed first)")
    ap.add_argument("--steps", type=int, default=STEPS, help=f"steps per fit case (default {STEPS})")
    ap.add_argument("--case-timeout-s", type=float, default=CASE_TIMEOUT_S)
    ap.add_argument("--loop-speed-exponent", default=None, metavar="X|fit",
                    help="the host speed's exponent (default: host-h200.yaml's, fitted over ten sessions; 'fit': fit "
                         "it on this session's runs)")
    ap.add_argument("--prior-weight", type=float, default=0.0,
                    help="pseudo-samples a figure of host-h200.yaml's figures (at this host's loop) weigh in the fit "
                         "(default 0: the session's runs alone)")
    ap.add_argument("--gpu-preset", help="zsim's GPU preset (default: by the GPU's name)")
    ap.add_argument("--gpu-peak-tflops", type=float, help="a GPU without a preset: its dense bf16 TFLOPS")
    ap.add_argument("--gpu-hbm-GBps", type=float, help="a GPU without a preset: its HBM GB/s")
    ap.add_argument("--skip-probes", action="store_true", help="no GPU probes (the data sheet's GPU figures)")
    ap.add_argument("--refit", action="store_true",
                    help="measure nothing: write the profile again from --work's measurements (runs/, probes/) with "
                         "this command's fit options (another --loop-speed-exponent, --prior-weight)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with torch (default: this one)")
    args = ap.parse_args(argv)
    if args.loop_speed_exponent is None:
        args.loop_speed_exponent = committed_host().get("loop_speed_exponent", 0.0)
    return args


def main(argv=None):
    args = parse_args(argv)
    return Calibration(args).run()


if __name__ == "__main__":
    sys.exit(main())
