"""The one profile calibrate_node.py writes: a zsim hardware profile (docs/hardware-profiles.md, "A DeepSpeed
machine's profile") that `cluster.profile` loads, its GPU, host and DeepSpeed figures in one file, each value with
its source in a comment, and a `calibration:` record (zsim accepts it and never reads it). Standard library only:
the text is written here, and a zrun-calibrated profile (`zrun calibrate --out`) is merged in by its lines
(merge_zrun_profile), as its writer lays them out (two spaces a level).
"""
import json

# A value as a YAML scalar: numbers as they are (floats to 4 significant digits, as the committed profile), strings
# double-quoted (JSON's escapes are YAML's), so that "5.17" stays a string.


def scalar(v, digits=4):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return json.dumps(str(v))


def flow(d, digits=4):
    """A flow map, `{a: 1, b: {c: 2}}`, in the dict's order."""
    return "{" + ", ".join(f"{k}: {flow(v, digits) if isinstance(v, dict) else scalar(v, digits)}"
                           for k, v in d.items()) + "}"


# The efficiency keys a DeepSpeed calibration writes. Merged with a zrun-calibrated profile, these replace zrun's;
# zrun's figures of its own kernels and calls (its GEMM model, its kernels' HBM figures, flash attention, launches,
# host issue, side streams) are left out: under runtime deepspeed torch's kernels and DeepSpeed's Python run instead,
# and the DeepSpeed records were validated without them (docs/hardware-profiles.md).
DEEPSPEED_EFFICIENCY_KEYS = ("gemm", "torch_misaligned_gemm", "hbm_by_kind", "pageable_pcie_fraction",
                             "pageable_h2d_pcie_fraction", "cpu_adam_measured", "outside_allocator_bytes",
                             "deepspeed_host")
ZRUN_ONLY_EFFICIENCY_KEYS = ("hbm", "gemm_model", "gemm_model_fp32", "flash_attention", "launch_us", "host_issue",
                             "beside_compute", "compute_beside", "beside_compute_wait")


def efficiency_lines(eff):
    """The efficiency block's children (four spaces in): [(key, text lines)] in eff's order. Each value of `eff` is
    (value, comment); deepspeed_host's value is a list of (figure, value, comment)."""
    out = []
    for key, (value, comment) in eff.items():
        if value is None:
            continue
        note = f"  # {comment}" if comment else ""
        if key == "deepspeed_host":
            lines = [f"    deepspeed_host:{note}"]
            for name, v, c in value:
                lines.append(f"      {name}: {scalar(float(v), 6) if name.endswith('_us') else scalar(v)}"
                             + (f"  # {c}" if c else ""))
            out.append((key, lines))
        elif isinstance(value, dict):
            out.append((key, [f"    {key}: {flow(value)}{note}"]))
        else:
            out.append((key, [f"    {key}: {scalar(value)}{note}"]))
    return out


def profile_text(head_comments, description, cluster, eff, record):
    """The profile: `head_comments` (lines, '# ' added), `description`, `cluster` ([(key, value, comment)]: values
    written flow-style), `fitted_under` among them, the efficiency block (efficiency_lines), then `calibration:`
    (`record`, a dict written one key a line, flow-style below)."""
    lines = [f"# {c}" if c else "#" for c in head_comments]
    lines.append(f"description: {scalar(description)}")
    lines.append("cluster:")
    for key, value, comment in cluster:
        text = flow(value) if isinstance(value, dict) else scalar(value)
        lines.append(f"  {key}: {text}" + (f"  # {comment}" if comment else ""))
    lines.append("  efficiency:")
    for _, block in efficiency_lines(eff):
        lines += block
    lines.append("calibration:")
    lines += record_lines(record, "  ")
    return "\n".join(lines) + "\n"


def record_lines(record, indent):
    """A calibration record's lines: one key a line, nested dicts flow-style, lists as JSON flow sequences."""
    out = []
    for k, v in record.items():
        if isinstance(v, dict):
            out.append(f"{indent}{k}: {flow(v, 6)}")
        elif isinstance(v, (list, tuple)):
            out.append(f"{indent}{k}: {json.dumps(list(v))}")
        else:
            out.append(f"{indent}{k}: {scalar(v, 6)}")
    return out


def _blocks(lines, start, end, indent):
    """The keys at `indent` spaces within lines[start:end]: [(key, first, stop)] (a key's block runs to the next line
    indented `indent` or less that is not blank)."""
    out = []
    i = start
    while i < end:
        line = lines[i]
        body = line.lstrip(" ")
        if body and not body.startswith("#") and len(line) - len(body) == indent:
            key = body.split(":", 1)[0]
            j = i + 1
            while j < end and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip(" ")) > indent):
                j += 1
            out.append((key, i, j))
            i = j
        else:
            i += 1
    return out


def merge_zrun_profile(zrun_text, description, cluster, eff, record, head_comments):
    """A zrun-calibrated profile with the DeepSpeed calibration merged in: its `description` replaced; its cluster's
    keys kept but for those `cluster` gives apart from the links and GPU zrun measured (fitted_under added), and its
    efficiency keys kept but for DEEPSPEED_EFFICIENCY_KEYS (replaced by eff's) and ZRUN_ONLY_EFFICIENCY_KEYS (left out,
    named in a comment); the DeepSpeed record appended to its `calibration:` as `deepspeed:`."""
    lines = zrun_text.rstrip("\n").split("\n")
    top = _blocks(lines, 0, len(lines), 0)
    keys = {k: (a, b) for k, a, b in top}
    if "cluster" not in keys:
        raise ValueError("the zrun profile has no 'cluster:' block")
    out = [f"# {c}" if c else "#" for c in head_comments]
    out += [line for line in lines[:top[0][1]] if line.startswith("#")] if top else []  # zrun's own head comments
    for key, a, b in top:
        if key == "description":
            out.append(f"description: {scalar(description)}")
        elif key == "cluster":
            out.append(lines[a])
            kept_cluster = {k for k, _, _ in _blocks(lines, a + 1, b, 2)}
            for ckey, ca, cb in _blocks(lines, a + 1, b, 2):
                if ckey == "efficiency":
                    out.append(lines[ca])
                    dropped = []
                    for ekey, ea, eb in _blocks(lines, ca + 1, cb, 4):
                        if ekey in DEEPSPEED_EFFICIENCY_KEYS:
                            continue
                        if ekey in ZRUN_ONLY_EFFICIENCY_KEYS:
                            dropped.append(ekey)
                            continue
                        out += lines[ea:eb]
                    if dropped:
                        out.append("    # left out of zrun's: " + ", ".join(dropped) + " (its own kernels and calls; "
                                   "under runtime deepspeed torch's and DeepSpeed's run: docs/hardware-profiles.md)")
                    for _, block in efficiency_lines(eff):
                        out += block
                elif ckey == "fitted_under":
                    continue
                else:
                    out += lines[ca:cb]
            for key2, value, comment in cluster:  # what zrun did not measure (the stack; a GPU or host it lacks)
                if key2 not in kept_cluster or key2 == "fitted_under":
                    text = flow(value) if isinstance(value, dict) else scalar(value)
                    out.append(f"  {key2}: {text}" + (f"  # {comment}" if comment else ""))
            if "efficiency" not in kept_cluster:
                out.append("  efficiency:")
                for _, block in efficiency_lines(eff):
                    out += block
        elif key == "calibration":
            out += lines[a:b]
            out.append("  deepspeed:")
            out += record_lines(record, "    ")
        elif key.startswith("#") or not key:
            continue
        else:
            out += lines[a:b]
    if "description" not in keys:
        out.insert(len(head_comments), f"description: {scalar(description)}")
    if "calibration" not in keys:
        out.append("calibration:")
        out.append("  deepspeed:")
        out += record_lines(record, "    ")
    return "\n".join(out) + "\n"
