#!/usr/bin/env python3
"""Writes the GPU check of `zsim advise` (issue 41): DeepSpeed harness cases for settings where the ds_config a user
starts from does not fit the GPU or runs slowly.

    python3 advise_cases.py [--zsim build/bin/zsim] [--margin 0.05]    # (re)write cases/adv-*/, lists/advise.txt
    bash validate/deepspeed/device_run.sh advise                        # on the GPU machine (README.md)
    python3 compare_advise.py deepspeed_results/cases                   # the verdict per setting

For each setting (a model, a sequence, the batch per GPU to keep, a GPU memory cap, the user's ds_config) it writes
up to three cases, one rank each, on one H200 capped to the setting's memory (case.json `gpu_memory_cap_bytes`,
scenario `cluster.gpu.hbm_bytes` the same bytes):
  adv-<setting>-default   the user's ds_config as written;
  adv-<setting>-fit       what a user does when zsim says the default does not fit (with `--margin` of the GPU kept
                          free, advise's own test): the same config with the micro-batch lowered and the accumulation
                          raised (same batch) to the largest micro-batch that fits; where none does, checkpointing
                          on, then the optimizer on the CPU, each again from the default's micro-batch down. Left
                          out when the default fits (the default is then its own fitting variant);
  adv-<setting>-advised   `zsim advise`'s ds_config (its `--out`), with the user's `optimizer` block (advise decides
                          the ZeRO keys and the batch split; the optimizer stays the user's) and advise's activation
                          checkpointing as the case's checkpointing.
Each case.json carries `generator: advise_cases.py` (make_cases.py leaves such folders alone) and an `advise` block:
the setting, the role, and zsim's prediction of that case (fits, GPU peak, tokens/s), read back from the case's own
scenario.yaml; the advised case's must equal advise's winner (the ds_config reads back to the same prediction), or
the script stops. Re-run it after zsim's step-time model changes (the ranking may change); commit what it writes.
Standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from .. import ROOT as HERE  # validate/deepspeed/
REPO = os.path.dirname(os.path.dirname(HERE))

from . import make_cases as mc  # noqa: E402

GENERATOR = "advise_cases.py"
LIST = "advise"
GiB = 1 << 30

# The settings. `default` is the user's ds_config in make_cases's terms (stage, micro_batch, grad_accum,
# checkpointing, zero tokens). Each is one rank on the capped H200; the steps keep a case under a minute.
SETTINGS = [
    {
        "name": "l1.3b-s2048-cap24g",
        "model": "llama-1.3b", "seq_len": 2048, "attention": "sdpa", "cap_bytes": 24 * GiB, "steps": 8,
        "default": {"stage": 2, "micro_batch": 8, "grad_accum": 1, "checkpointing": "none", "zero": "-"},
        "why": "Llama 1.3B on a 24 GiB GPU, ZeRO-2 at micro-batch 8 without checkpointing: the activations of 8 x 2048 "
               "tokens do not fit beside 21 GB of model states",
    },
    {
        "name": "g124m-eager-s4096-cap8g",
        "model": "gpt2-124m", "seq_len": 4096, "attention": "eager", "cap_bytes": 8 * GiB, "steps": 8,
        "default": {"stage": 2, "micro_batch": 4, "grad_accum": 1, "checkpointing": "none", "zero": "-"},
        "why": "GPT-2 124M with eager attention at sequence 4096 on an 8 GiB GPU, ZeRO-2 at micro-batch 4: eager "
               "attention keeps 12 heads x 4096 x 4096 scores per layer and sequence",
    },
    {
        "name": "l150m-s2048-offload",
        "model": "llama-150m", "seq_len": 2048, "attention": "sdpa", "cap_bytes": 40 * GiB, "steps": 8,
        "default": {"stage": 3, "micro_batch": 1, "grad_accum": 16, "checkpointing": "full",
                    "zero": "offopt,offparam"},
        "why": "Llama 150M with a ZeRO-Infinity template (stage 3, optimizer and parameters on the CPU, checkpointing, "
               "micro-batch 1 x 16) on a 40 GiB GPU: it fits, slowly",
    },
]


class AdviseCasesError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------------------------------
# Pure parts (tested without zsim)

def row_for(setting, name, stage, micro_batch, grad_accum, checkpointing, zero):
    """A make_cases row of one case of the setting."""
    return {
        "name": name, "model": setting["model"], "stage": stage, "world": 1, "micro_batch": micro_batch,
        "seq_len": setting["seq_len"], "attention": setting["attention"], "checkpointing": checkpointing,
        "grad_accum": grad_accum, "zero": zero, "zero_changes": mc.parse_zero_tokens(zero),
        "steps": setting["steps"], "lists": [LIST], "expect": "ok", "note": "",
    }


def default_row(setting):
    d = setting["default"]
    return row_for(setting, f"adv-{setting['name']}-default", d["stage"], d["micro_batch"], d["grad_accum"],
                   d["checkpointing"], d["zero"])


def fitting_ladder(row):
    """What a user tries, in order, when the default does not fit: the batch per GPU kept, the micro-batch lowered
    (each divisor below the default's, largest first); then checkpointing on; then the optimizer on the CPU (stages
    1-3), each from the default's micro-batch down. Rows named <setting>-fit."""
    batch = row["micro_batch"] * row["grad_accum"]
    micro = [m for m in range(row["micro_batch"], 0, -1) if batch % m == 0]
    name = row["name"].rsplit("-", 1)[0] + "-fit"
    ckpts = [row["checkpointing"]] + (["full"] if row["checkpointing"] == "none" else [])
    zeros = [row["zero"]]
    if row["stage"] > 0 and "offopt" not in row["zero"]:
        zeros.append("offopt" if row["zero"] in ("", "-") else row["zero"] + ",offopt")
    out = []
    for z in zeros:
        for ck in (ckpts if z == row["zero"] else ckpts[-1:]):
            for m in micro:
                if z == row["zero"] and ck == row["checkpointing"] and m == row["micro_batch"]:
                    continue  # the default itself
                r = dict(row, name=name, micro_batch=m, grad_accum=batch // m, checkpointing=ck, zero=z,
                         zero_changes=mc.parse_zero_tokens(z))
                out.append(r)
    return out


def advised_ds_config(advised, user_ds):
    """advise's ds_config with the user's optimizer block (advise does not choose the optimizer)."""
    ds = dict(advised)
    if "optimizer" in user_ds and "optimizer" not in ds:
        ds["optimizer"] = user_ds["optimizer"]
    return ds


def scenario_text(row, cap_bytes):
    """make_cases's scenario of the row on an H200 whose memory is the cap."""
    text = mc.scenario_for(row)
    plain = "  gpu: h200-141gb\n"
    if plain not in text:
        raise AdviseCasesError("make_cases.scenario_for no longer writes '  gpu: h200-141gb': update scenario_text")
    # set_per_process_memory_fraction caps what the caching allocator reserves, not what the process holds outside
    # it (CUDA context, NCCL): the verdict compares the reserved peak alone with the cap (profile's outside figure 0).
    text = text.replace(plain, f"  gpu: {{preset: h200-141gb, hbm_bytes: {cap_bytes}}}  # the harness's cap "
                               f"(case.json gpu_memory_cap_bytes)\n")
    outside = f"    outside_allocator_bytes: {mc.outside_allocator_bytes()}\n"
    if outside not in text:
        raise AdviseCasesError("make_cases.scenario_for no longer writes efficiency.outside_allocator_bytes: update "
                               "scenario_text")
    text = text.replace(outside, "    outside_allocator_bytes: 0  # the cap limits the allocator alone\n")
    return text.replace("(generated by validate/deepspeed/make_cases.py from cases.tsv:\n# edit the table, not this file)",
                        "(generated by validate/deepspeed/advise_cases.py:\n# edit its SETTINGS, not this file)")


def case_json(row, setting, role, prediction, configuration):
    c = mc.case_json_for(row)
    c["generator"] = GENERATOR
    c["gpu_memory_cap_bytes"] = setting["cap_bytes"]
    c["expect"] = "ok" if prediction["fits"] else "failed"  # zsim's prediction: as_expected says whether it held
    c["note"] = f"{setting['why']}; {role}: {configuration}"
    c["advise"] = {"setting": setting["name"], "role": role, "configuration": configuration,
                   "zsim_fits": prediction["fits"], "zsim_fits_with_margin": prediction["fits_with_margin"],
                   "zsim_gpu_peak_bytes": prediction["gpu_peak_bytes"],
                   "zsim_gpu_verdict_bytes": prediction["gpu_verdict_bytes"],
                   "zsim_tokens_per_s": prediction["tokens_per_s"]}
    return c


def describe_row(row):
    z = "" if row["zero"] in ("", "-") else f", {row['zero']}"
    return (f"stage {row['stage']}, micro-batch {row['micro_batch']} x {row['grad_accum']}, "
            f"{'checkpointing' if row['checkpointing'] == 'full' else 'no checkpointing'}{z}")


# ------------------------------------------------------------------------------------------------------------------
# zsim

def run_zsim(zsim, args, cwd):
    p = subprocess.run([zsim, *args], cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write_case_files(d, row, ds, setting):
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(HERE, "models", row["model"], "config.json"), os.path.join(d, "config.json"))
    with open(os.path.join(d, "ds_config.json"), "w") as f:
        f.write(mc.dump_json(ds))
    with open(os.path.join(d, "scenario.yaml"), "w") as f:
        f.write(scenario_text(row, setting["cap_bytes"]))


def predict(zsim, d, cap_bytes, margin):
    """zsim's report of the case folder d: fits, fits with the margin, GPU peak, tokens/s."""
    code, out, err = run_zsim(zsim, ["scenario.yaml", "--json", "report.json"], d)
    if code != 0:
        raise AdviseCasesError(f"{d}/scenario.yaml: zsim exited {code}: {err.strip()}")
    with open(os.path.join(d, "report.json")) as f:
        r = json.load(f)
    os.remove(os.path.join(d, "report.json"))
    gpu = r["memory"]["gpu"]
    peak = int(gpu["peak"])
    need = int(gpu.get("verdict_bytes", peak))  # reserved + outside the allocator: what zsim's verdict reads
    fits = bool(r["fits"])
    return {"fits": fits, "fits_with_margin": fits and need <= (1 - margin) * cap_bytes, "gpu_peak_bytes": peak,
            "gpu_verdict_bytes": need, "tokens_per_s": float(r["time"]["tokens_per_s"])}


def build_setting(zsim, setting, out_dir, margin):
    """Writes the setting's cases under out_dir/cases; returns their names."""
    default = default_row(setting)
    user_ds = mc.ds_config_for(default)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "default")
        write_case_files(d, default, user_ds, setting)
        pred = predict(zsim, d, setting["cap_bytes"], margin)
        cases = [(default, user_ds, "default", pred, describe_row(default))]
        if not pred["fits_with_margin"]:
            for r in fitting_ladder(default):
                d = os.path.join(tmp, f"try-{len(os.listdir(tmp))}")
                ds = mc.ds_config_for(r)
                write_case_files(d, r, ds, setting)
                p = predict(zsim, d, setting["cap_bytes"], margin)
                if p["fits_with_margin"]:
                    cases.append((r, ds, "fit", p, describe_row(r)))
                    break
            else:
                print(f"advise_cases: {setting['name']}: no fitting variant of the default on the ladder",
                      file=sys.stderr)
        # zsim advise on the default's scenario
        d = os.path.join(tmp, "default")
        code, out, err = run_zsim(zsim, ["advise", "scenario.yaml", "--out", "advised.json", "--json", "a.json",
                                         "--margin", str(margin)], d)
        if code != 0:
            raise AdviseCasesError(f"{setting['name']}: zsim advise exited {code}: {err.strip()}")
        with open(os.path.join(d, "a.json")) as f:
            a = json.load(f)
        with open(os.path.join(d, "advised.json")) as f:
            advised = json.load(f)
        top = a["top"][0]
        ck = a["activation_checkpointing"]
        row = row_for(setting, f"adv-{setting['name']}-advised", advised["zero_optimization"]["stage"],
                      advised["train_micro_batch_size_per_gpu"], advised["gradient_accumulation_steps"], ck, "-")
        ds = advised_ds_config(advised, user_ds)
        d = os.path.join(tmp, "advised")
        write_case_files(d, row, ds, setting)
        p = predict(zsim, d, setting["cap_bytes"], margin)
        if abs(p["tokens_per_s"] - top["tokens_per_s"]) > 1e-9 * top["tokens_per_s"]:
            raise AdviseCasesError(f"{setting['name']}: the advised ds_config reads back to {p['tokens_per_s']} "
                                   f"tokens/s, advise said {top['tokens_per_s']}")
        cases.append((row, ds, "advised", p, top["configuration"]))

        for r, ds, role, p, conf in cases:
            dst = os.path.join(out_dir, "cases", r["name"])
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            write_case_files(dst, r, ds, setting)
            with open(os.path.join(dst, "case.json"), "w") as f:
                f.write(mc.dump_json(case_json(r, setting, role, p, conf)))
            written.append(r["name"])
            print(f"  {r['name']}: {conf}: zsim {'fits' if p['fits'] else 'OOM'}, "
                  f"GPU peak {p['gpu_peak_bytes'] / GiB:.1f} GiB, reserved {p['gpu_verdict_bytes'] / GiB:.2f} GiB "
                  f"of {setting['cap_bytes'] / GiB:.0f}, "
                  f"{p['tokens_per_s']:.0f} tokens/s")
    return written


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zsim", default=os.path.join(REPO, "build", "bin", "zsim"), help="the zsim binary")
    ap.add_argument("--margin", type=float, default=0.05, help="the GPU share kept free (zsim advise --margin)")
    ap.add_argument("--root", default=HERE, help="the validate/deepspeed folder to write into (default: this one)")
    args = ap.parse_args(argv)
    if not os.access(args.zsim, os.X_OK):
        print(f"advise_cases: no zsim binary at {args.zsim} (build it, or --zsim PATH)", file=sys.stderr)
        return 2
    zsim = os.path.abspath(args.zsim)
    cases_dir = os.path.join(args.root, "cases")
    for old in sorted(mc.foreign_cases(cases_dir)):  # this script's earlier cases
        with open(os.path.join(cases_dir, old, "case.json")) as f:
            if json.load(f).get("generator") == GENERATOR:
                shutil.rmtree(os.path.join(cases_dir, old))
    names = []
    try:
        for s in SETTINGS:
            print(f"{s['name']}: {s['why']}")
            names += build_setting(zsim, s, args.root, args.margin)
    except AdviseCasesError as e:
        print(f"advise_cases: {e}", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(args.root, "lists"), exist_ok=True)
    with open(os.path.join(args.root, "lists", f"{LIST}.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    print(f"advise_cases: {len(names)} cases, list lists/{LIST}.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
