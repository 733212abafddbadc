#!/usr/bin/env python3
"""Writes the DeepSpeed validation cases from cases.tsv.

    python3 make_cases.py            # (re)write cases/<name>/ and lists/*.txt; remove case folders not in the table
                                     # (but those another script wrote: case.json's "generator", e.g. advise_cases.py)
    python3 make_cases.py --check    # exit 1 (naming the files) if what is committed differs from what it would write

Each case folder holds what the harness and zsim both read:
  config.json     the model's Hugging Face config (a copy of models/<model>/config.json)
  ds_config.json  the DeepSpeed config, written as a user writes one (ZeRO keys at DeepSpeed 0.14.5's defaults
                  unless the case changes them)
  case.json       what the harness needs beyond those two files (micro-batch, sequence, world, attention, ...)
  scenario.yaml   the zsim scenario of the same run (model.hf_config: config.json, deepspeed.ds_config: ds_config.json)
Standard library only (no torch): the unit tests run it on any machine.
"""
import argparse
import functools
import json
import os
import re
import shutil
import sys

from .. import ROOT as HERE  # validate/deepspeed/

COLUMNS = ["name", "model", "stage", "world", "micro_batch", "seq_len", "attention", "checkpointing", "grad_accum",
           "zero", "steps", "lists", "expect", "note"]
INT_COLUMNS = ("stage", "world", "micro_batch", "seq_len", "grad_accum")
ATTENTIONS = ("sdpa", "eager")
CHECKPOINTING = ("full", "none")
EXPECT = ("ok", "failed")

# DeepSpeed 0.14.5's defaults (runtime/zero/config.py), written out as users write them.
STAGE12_DEFAULTS = {
    "overlap_comm": False,
    "contiguous_gradients": True,
    "reduce_scatter": True,
    "reduce_bucket_size": 500000000,
    "allgather_bucket_size": 500000000,
}
STAGE3_DEFAULTS = {
    "overlap_comm": True,
    "contiguous_gradients": True,
    "reduce_bucket_size": 500000000,
    "stage3_prefetch_bucket_size": 50000000,
    "stage3_param_persistence_threshold": 100000,
    "stage3_max_live_parameters": 1000000000,
    "stage3_max_reuse_distance": 1000000000,
    "sub_group_size": 1000000000,
}
# The machine the cases run on: one H200 (141 GB), 16 CPU cores, 128 GiB host memory; its ranks share the GPU.
# efficiency.deepspeed_host: the host's figures of a DeepSpeed step on it (issue 39), as fit_host.py fitted them into
# HOST_FIGURES (a profile-format file; docs/deepspeed-time.md).
CLUSTER_YAML = """cluster:
  nodes: {nodes}
  gpus_per_node: {gpus_per_node}{world_note}
  gpu: h200-141gb
  host: {{memory_bytes: 128GiB, cores: 16}}
  links: {{nvlink_GBps: 370, pcie_GBps: 55{ib}}}
{fitted}  efficiency:  # validate/deepspeed/host-h200.yaml: DeepSpeed's host (fit_host.py) and memory outside the allocator
    outside_allocator_bytes: {outside}
{gemm}    deepspeed_host: {{{host}}}
{misaligned}{kinds}{cpu_adam}"""
HOST_FIGURES = os.path.join(HERE, "host-h200.yaml")


@functools.lru_cache(maxsize=None)
def _profile_lines(path):
    """The profile's lines without comments (read once per path: every case's scenario copies its figures)."""
    with open(path) as f:
        return tuple((line.split("#", 1)[0].rstrip(), line) for line in f)


def efficiency_scalar(key, path=HOST_FIGURES):
    """The text of the profile's scalar efficiency.<key> (four spaces in), or None where it has none."""
    for s, _ in _profile_lines(path):
        if s.startswith(f"    {key}:"):
            return s.partition(":")[2].strip()
    return None


# The profile's measured scalar figures a case's scenario copies: torch's GEMM efficiency, and its pageable copies'
# fractions of PCIe (torch's converting copies across devices: probe_cross_copy.py).
SCALAR_FIGURES = ("gemm", "pageable_pcie_fraction", "pageable_h2d_pcie_fraction")


def gemm_line(path=HOST_FIGURES):
    """The profile's SCALAR_FIGURES as scenario lines (none where it has none)."""
    values = [(key, efficiency_scalar(key, path)) for key in SCALAR_FIGURES]
    return "".join(f"    {key}: {float(value)}\n" for key, value in values if value is not None)


_THREADS_RATE = r"threads_\d+: [0-9.e+]+"
_RANKS_BLOCK = rf"ranks_\d+: \{{\s*{_THREADS_RATE}(,\s*{_THREADS_RATE})*\s*\}}"
CPU_ADAM_MEASURED = re.compile(rf"\{{\s*{_RANKS_BLOCK}(,\s*{_RANKS_BLOCK})*\s*\}}")


def cpu_adam_line(path=HOST_FIGURES):
    """The profile's efficiency.cpu_adam_measured (DeepSpeedCPUAdam's rates, probe_cpu_adam.py --summarize: one flow
    mapping {ranks_R: {threads_T: params/s, ...}}) as a scenario line ("" where it has none)."""
    value = efficiency_scalar("cpu_adam_measured", path)
    if value is None:
        return ""
    if not CPU_ADAM_MEASURED.fullmatch(value):
        raise CaseTableError(f"{path}: efficiency.cpu_adam_measured must be one line "
                             f"{{ranks_R: {{threads_T: params/s, ...}}}} (probe_cpu_adam.py --summarize), not {value!r}")
    return f"    cpu_adam_measured: {value}\n"


def fitted_under_line(path=HOST_FIGURES):
    """The profile's cluster.fitted_under (the stack its figures were fitted under, one flow mapping two spaces in) as
    a scenario line ("" where it has none): zsim validate warns where a run's versions differ from it."""
    for s, _ in _profile_lines(path):
        if s.startswith("  fitted_under:"):
            return s + "\n"
    return ""


def outside_allocator_bytes(path=HOST_FIGURES):
    """The profile's efficiency.outside_allocator_bytes (0 where it has none)."""
    value = efficiency_scalar("outside_allocator_bytes", path)
    return int(value) if value is not None else 0


def block_line(block, path=HOST_FIGURES):
    """One efficiency block of the profile as a scenario line in flow style ("" where the profile has none)."""
    pairs = block_pairs(block, path)
    return f"    {block}: {{{', '.join(pairs)}}}\n" if pairs else ""


def host_figures(path=HOST_FIGURES):
    """The `deepspeed_host:` block of a fit_host.py profile, as "key: value" pairs in file order (stdlib only)."""
    pairs = block_pairs("deepspeed_host", path)
    if not pairs:
        raise CaseTableError(f"{path}: no deepspeed_host figures (write it with fit_host.py --profile)")
    return ", ".join(pairs)


def block_pairs(block, path=HOST_FIGURES):
    """The "key: value" pairs of one efficiency block of a profile (keys six spaces in), in file order."""
    pairs, inside = [], False
    for s, line in _profile_lines(path):
        if s.strip() == block + ":":
            inside = True
            continue
        if inside:
            if not s.strip():
                continue
            if not line.startswith("      "):
                break
            key, _, value = s.strip().partition(":")
            pairs.append(f"{key.strip()}: {float(value)}")
    return pairs


def foreign_cases(cases_dir):
    """Case folders another script wrote (case.json names a `generator` other than make_cases.py, e.g. the advise
    cases of advise_cases.py): make_cases neither checks nor removes them."""
    out = set()
    if not os.path.isdir(cases_dir):
        return out
    for d in os.listdir(cases_dir):
        p = os.path.join(cases_dir, d, "case.json")
        if os.path.isfile(p):
            try:
                with open(p) as f:
                    gen = json.load(f).get("generator", "make_cases.py")
            except (ValueError, AttributeError):
                continue
            if gen != "make_cases.py":
                out.add(d)
    return out


def foreign_lists(lists_dir, foreign):
    """lists/*.txt (as 'lists/NAME.txt') that name only foreign cases: another script's lists."""
    out = set()
    if not os.path.isdir(lists_dir):
        return out
    for n in os.listdir(lists_dir):
        if n.endswith(".txt"):
            with open(os.path.join(lists_dir, n)) as f:
                names = [ln.split()[0] for ln in f if ln.strip()]
            if names and all(x in foreign for x in names):
                out.add(f"lists/{n}")
    return out


class CaseTableError(ValueError):
    pass


def _value(text):
    """A key=value token's value: true/false, an integer, a number, else the text."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        v = float(text)
        return int(v) if v.is_integer() else v
    except ValueError:
        return text


def parse_table(text, source="cases.tsv"):
    """Rows of the case table as dicts (ints converted, '-' = absent); raises CaseTableError naming the line."""
    rows, names, header = [], set(), None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = line.rstrip("\n").split("\t")
        where = f"{source}:{lineno}"
        if header is None:
            if cells != COLUMNS:
                raise CaseTableError(f"{where}: the header must be the columns {COLUMNS}, got {cells}")
            header = cells
            continue
        if len(cells) != len(COLUMNS):
            raise CaseTableError(f"{where}: {len(cells)} cells, expected {len(COLUMNS)} (tab-separated)")
        row = dict(zip(COLUMNS, (c.strip() for c in cells)))
        for col in INT_COLUMNS:
            try:
                row[col] = int(row[col])
            except ValueError:
                raise CaseTableError(f"{where}: column {col} must be an integer, got {row[col]!r}") from None
        row["steps"] = None if row["steps"] == "-" else int(row["steps"])
        row["note"] = "" if row["note"] == "-" else row["note"]
        row["lists"] = [x for x in row["lists"].split(",") if x and x != "-"]
        name = row["name"]
        if not name or any(not (ch.isalnum() or ch in "._-") for ch in name):
            raise CaseTableError(f"{where}: case name {name!r}: letters, digits, '.', '_' and '-' only")
        if name in names:
            raise CaseTableError(f"{where}: duplicate case {name}")
        names.add(name)
        if row["stage"] not in (0, 1, 2, 3):
            raise CaseTableError(f"{where}: stage must be 0-3")
        if row["world"] < 1 or row["micro_batch"] < 1 or row["seq_len"] < 1 or row["grad_accum"] < 1:
            raise CaseTableError(f"{where}: world, micro_batch, seq_len and grad_accum must be >= 1")
        if row["attention"] not in ATTENTIONS:
            raise CaseTableError(f"{where}: attention must be one of {ATTENTIONS}")
        if row["checkpointing"] not in CHECKPOINTING:
            raise CaseTableError(f"{where}: checkpointing must be one of {CHECKPOINTING}")
        if row["expect"] not in EXPECT:
            raise CaseTableError(f"{where}: expect must be one of {EXPECT}")
        try:
            row["z3_leaf_modules"], zero_text = split_leaf_tokens(row["zero"])
            row["zero_changes"] = parse_zero_tokens(zero_text)
        except ValueError as e:
            raise CaseTableError(f"{where}: zero: {e}") from None
        if row["z3_leaf_modules"] and row["stage"] != 3:
            raise CaseTableError(f"{where}: zero: leaf=... (deepspeed.utils.set_z3_leaf_modules) acts at stage 3 only, "
                                 f"this case is stage {row['stage']}")
        rows.append(row)
    if header is None:
        raise CaseTableError(f"{source}: no header line")
    return rows


LEAF_TOKEN = "leaf="


def split_leaf_tokens(text):
    """(the leaf module classes the zero column names, the column's other tokens as text). `leaf=<Class>` is no
    ds_config key: the rank calls deepspeed.utils.set_z3_leaf_modules(model, [<Class>]) (DeepSpeed >= 0.13,
    utils/z3_leaf_module.py) on the class of that name among the model's modules, after building the model and before
    deepspeed.initialize, as a user of a mixture of experts does (`leaf=MixtralSparseMoeBlock`); case.json's
    `z3_leaf_modules` and the scenario's `model.z3_leaf_modules` say it. One class per case (zsim's key takes one)."""
    if text in ("", "-"):
        return [], text
    leaves, rest = [], []
    for tok in text.split(","):
        tok = tok.strip()
        if tok.startswith(LEAF_TOKEN):
            cls = tok[len(LEAF_TOKEN):].strip()
            if not cls.isidentifier():
                raise ValueError(f"{tok!r}: leaf=<Class> names one module class (a Python identifier)")
            leaves.append(cls)
        elif tok:
            rest.append(tok)
    if len(leaves) > 1:
        raise ValueError(f"leaf=... given {len(leaves)} times ({', '.join(leaves)}): one leaf module class per case")
    return leaves, ",".join(rest) or "-"


def parse_zero_tokens(text):
    """The zero column as an ordered list of (dotted key, value) changes to zero_optimization (its leaf=<Class>
    token split off first: split_leaf_tokens)."""
    changes = []
    if text in ("", "-"):
        return changes
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok == "offopt":
            changes += [("offload_optimizer.device", "cpu"), ("offload_optimizer.pin_memory", True)]
        elif tok == "offparam":
            changes += [("offload_param.device", "cpu"), ("offload_param.pin_memory", True)]
        elif tok.startswith("hpz") and tok[3:].isdigit():
            changes.append(("zero_hpz_partition_size", int(tok[3:])))
        elif tok == "qgz":
            changes.append(("zero_quantized_gradients", True))
        elif tok == "qwz":
            changes.append(("zero_quantized_weights", True))
        elif tok.startswith(LEAF_TOKEN):
            raise ValueError(f"{tok!r} is no zero_optimization key: split it off with split_leaf_tokens")
        elif "=" in tok:
            k, v = tok.split("=", 1)
            if not k:
                raise ValueError(f"empty key in {tok!r}")
            changes.append((k.strip(), _value(v.strip())))
        else:
            raise ValueError(f"unknown token {tok!r} (offopt, offparam, hpzN, qgz, qwz, leaf=<Class> or key=value)")
    return changes


def ds_config_for(row):
    """The case's ds_config.json as a dict."""
    stage = row["stage"]
    zero = {"stage": stage}
    if stage in (1, 2):
        zero.update(STAGE12_DEFAULTS)
    elif stage == 3:
        zero.update(STAGE3_DEFAULTS)
    for key, value in row["zero_changes"]:
        parts = key.split(".")
        block = zero
        for p in parts[:-1]:
            block = block.setdefault(p, {})
            if not isinstance(block, dict):
                raise CaseTableError(f"{row['name']}: zero key {key}: {p} is not a block")
        block[parts[-1]] = value
    return {
        "train_micro_batch_size_per_gpu": row["micro_batch"],
        "gradient_accumulation_steps": row["grad_accum"],
        "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
        "zero_optimization": zero,
    }


def case_json_for(row):
    """case.json: what the harness needs beyond config.json and ds_config.json (`z3_leaf_modules` only where the
    case names leaf module classes)."""
    out = {
        "name": row["name"],
        "model": row["model"],
        "model_config": "config.json",
        "ds_config": "ds_config.json",
        "scenario": "scenario.yaml",
        "micro_batch": row["micro_batch"],
        "seq_len": row["seq_len"],
        "grad_accum": row["grad_accum"],
        "world": row["world"],
        "attention": row["attention"],
        "checkpointing": row["checkpointing"],
        "steps": row["steps"],
        "lists": row["lists"],
        "expect": row["expect"],
        "note": row["note"],
    }
    if row.get("z3_leaf_modules"):
        out["z3_leaf_modules"] = list(row["z3_leaf_modules"])
    return out


def scenario_for(row):
    """The zsim scenario (docs/scenario.md) of the case, as YAML text."""
    attention = {"sdpa": "flash", "eager": "eager"}[row["attention"]]
    world = row["world"]
    world_note = "  # the harness's ranks; with 2+ they share one H200" if world > 1 else ""
    nodes, gpus_per_node, ib = 1, world, ""
    zero = dict(row["zero_changes"])
    if world > 1 and zero.get("zero_quantized_gradients") and "zero_hpz_partition_size" not in zero:
        # qgZ reads a node's size from the GPUs a process sees (DeepSpeed 0.14.5, coalesced_collectives.py
        # all_to_all_quant_reduce: local_world_size = get_accelerator().device_count()): 1 when the ranks share one
        # GPU, so each rank is a node of its own and the gradients take both of qgZ's all-to-all hops. With hpZ too
        # the case stays one node: zsim keeps hpZ's secondary partition inside a node, where DeepSpeed's spans
        # these one-GPU "nodes" (a layout zsim does not express).
        nodes, gpus_per_node, ib = world, 1, ", ib_GBps: 50"
        world_note = "  # DeepSpeed's qgZ: a node is the GPUs a rank sees (one, shared by the harness's ranks)"
    lines = [
        f"# zsim scenario of DeepSpeed case {row['name']} (generated by validate/deepspeed/make_cases.py from cases.tsv:",
        "# edit the table, not this file). It reads the very config.json and ds_config.json the harness runs.",
    ]
    if row["note"]:
        lines.append(f"# {row['note']}")
    lines += [
        "model:",
        f"  name: {row['model']}",
        "  hf_config: config.json",
        f"  attention: {attention}  # transformers attn_implementation={row['attention']}",
    ]
    # The leaf module class the rank hands deepspeed.utils.set_z3_leaf_modules (issue 57); none: the key is left out.
    lines += [f"  z3_leaf_modules: {cls}  # the harness: deepspeed.utils.set_z3_leaf_modules(model, [{cls}])"
              for cls in row.get("z3_leaf_modules") or []]
    lines += [
        "training:",
        f"  micro_batch: {row['micro_batch']}",
        f"  grad_accum: {row['grad_accum']}",
        f"  seq_len: {row['seq_len']}",
        "  precision: bf16",
        f"  activation_checkpointing: {row['checkpointing']}",
    ]
    text = "\n".join(lines) + "\n"
    text += CLUSTER_YAML.format(nodes=nodes, gpus_per_node=gpus_per_node, ib=ib, world_note=world_note,
                                fitted=fitted_under_line(), host=host_figures(),
                                outside=outside_allocator_bytes(), gemm=gemm_line(), misaligned=block_line("torch_misaligned_gemm"),
                                kinds=block_line("hbm_by_kind"), cpu_adam=cpu_adam_line())
    text += "deepspeed:\n  ds_config: ds_config.json\n"
    return text


def dump_json(obj):
    return json.dumps(obj, indent=2) + "\n"


def planned_files(rows, models_dir):
    """{relative path: text} of everything make_cases writes."""
    files = {}
    lists = {}
    for row in rows:
        cfg_path = os.path.join(models_dir, row["model"], "config.json")
        if not os.path.isfile(cfg_path):
            raise CaseTableError(f"{row['name']}: no model config {cfg_path}")
        with open(cfg_path) as f:
            model_cfg = f.read()
        json.loads(model_cfg)  # must be JSON
        d = f"cases/{row['name']}"
        files[f"{d}/config.json"] = model_cfg
        files[f"{d}/ds_config.json"] = dump_json(ds_config_for(row))
        files[f"{d}/case.json"] = dump_json(case_json_for(row))
        files[f"{d}/scenario.yaml"] = scenario_for(row)
        for lst in row["lists"]:
            lists.setdefault(lst, []).append(row["name"])
    for lst, names in sorted(lists.items()):
        files[f"lists/{lst}.txt"] = "".join(n + "\n" for n in names)
    return files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk; write nothing")
    ap.add_argument("--root", default=HERE, help="the validate/deepspeed folder (default: this script's)")
    args = ap.parse_args(argv)
    root = args.root
    with open(os.path.join(root, "cases.tsv")) as f:
        rows = parse_table(f.read(), "cases.tsv")
    files = planned_files(rows, os.path.join(root, "models"))
    wanted_cases = {r["name"] for r in rows}
    existing_cases = set()
    cases_dir = os.path.join(root, "cases")
    foreign = foreign_cases(cases_dir)
    if os.path.isdir(cases_dir):
        existing_cases = {d for d in os.listdir(cases_dir)
                          if os.path.isfile(os.path.join(cases_dir, d, "case.json"))} - foreign
    existing_lists = set()
    lists_dir = os.path.join(root, "lists")
    if os.path.isdir(lists_dir):
        existing_lists = {f"lists/{n}" for n in os.listdir(lists_dir) if n.endswith(".txt")}
        existing_lists -= foreign_lists(lists_dir, foreign)
    stale_cases = sorted(existing_cases - wanted_cases)
    stale_lists = sorted(existing_lists - {p for p in files if p.startswith("lists/")})
    if args.check:
        bad = []
        for rel, text in sorted(files.items()):
            p = os.path.join(root, rel)
            try:
                with open(p) as f:
                    if f.read() != text:
                        bad.append(rel)
            except FileNotFoundError:
                bad.append(rel + " (missing)")
        bad += [f"cases/{c} (not in cases.tsv)" for c in stale_cases] + [f"{p} (no case in it)" for p in stale_lists]
        if bad:
            print("make_cases --check: out of date (run python3 make_cases.py):", *bad, sep="\n  ")
            return 1
        print(f"make_cases --check: {len(rows)} cases up to date")
        return 0
    for c in stale_cases:
        shutil.rmtree(os.path.join(cases_dir, c))
    for p in stale_lists:
        os.remove(os.path.join(root, p))
    for rel, text in sorted(files.items()):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    print(f"make_cases: {len(rows)} cases written under {os.path.relpath(cases_dir)}"
          + (f"; removed {', '.join(stale_cases)}" if stale_cases else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
