"""The run JSON (format "zsim.deepspeed_run" version 1, README.md beside the harness): the writer every rank and
the parent use, the merge of the ranks' results into one, and the one-line summary the device script prints."""
import json
import math
import os


FORMAT = "zsim.deepspeed_run"


FORMAT_VERSION = 1


STDERR_TAIL_LINES = 40


# ----------------------------------------------------------------------------------------------------------------
# JSON writing


def sanitize(obj):
    """JSON-safe copy: NaN / inf -> None, tuples and sets -> lists, non-string keys -> strings."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return [sanitize(v) for v in sorted(obj, key=repr)]
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    return str(obj)


def _scalar(x):
    return not isinstance(x, (dict, list))


def dumps(obj, level=0):
    """JSON with one item per line, except that a list of scalars (a shape, a call) stays on one line."""
    pad, pad1 = " " * level, " " * (level + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(str(k))}: {dumps(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(_scalar(x) for x in obj):
            return json.dumps(obj, allow_nan=False)
        return "[\n" + ",\n".join(pad1 + dumps(v, level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def write_json_atomic(path, obj):
    """Writes obj (sanitized) to path through a temporary file and a rename: readers never see half a file."""
    text = dumps(sanitize(obj)) + "\n"
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def tail_lines(path, n=STDERR_TAIL_LINES):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    return data.splitlines()[-n:]


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def merge_ranks(case_block, rank_results, versions, options, timed_out, timeout_s, wall_s, command, exit_codes,
                stderr_tails, killed_after_failure=False):
    """One result from the ranks' (possibly partial) JSON. A rank without a result, or one still 'running' when it
    was stopped, counts as failed."""
    ranks = []
    first_error = None
    kinds = []
    for r, data in enumerate(rank_results):
        if data is None:
            data = {"rank": r, "status": "failed", "error": "no result file (the rank died before writing one)",
                    "failure_kind": "crash", "stage_reached": None}
        data = dict(data)
        code = exit_codes[r] if r < len(exit_codes) else None
        data["exit_code"] = code
        if data.get("status") == "running":
            data["status"] = "failed"
            if timed_out:
                data["failure_kind"] = "timeout"
                data["error"] = f"timeout after {timeout_s} s (reached: {data.get('stage_reached')})"
            elif killed_after_failure:
                data["failure_kind"] = "killed"
                data["error"] = f"stopped after another rank failed (reached: {data.get('stage_reached')})"
            else:
                data["failure_kind"] = "crash"
                data["error"] = f"exit code {code} (reached: {data.get('stage_reached')})"
        elif data.get("status") == "ok" and code not in (0, None):
            data["status"] = "failed"
            data["failure_kind"] = "crash"
            data["error"] = f"exit code {code} after the result was written"
        if data["status"] != "ok":
            kinds.append(data.get("failure_kind"))
            if first_error is None and data.get("failure_kind") not in ("killed",):
                first_error = f"rank {r}: {data.get('error')}"
        data.pop("versions", None)
        ranks.append(data)
    status = "ok" if ranks and all(d["status"] == "ok" for d in ranks) else "failed"
    if status == "failed":
        for r, d in enumerate(ranks):
            d["stderr_tail"] = stderr_tails[r] if r < len(stderr_tails) else []
        if first_error is None:
            first_error = next((f"rank {d['rank']}: {d.get('error')}" for d in ranks if d["status"] != "ok"), None)
    failure_kind = None
    if status == "failed":
        failure_kind = "timeout" if timed_out else next((k for k in kinds if k not in ("killed", None)), "crash")
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "case": case_block,
        "versions": versions,
        "options": options,
        "status": status,
        "error": first_error if status == "failed" else None,
        "failure_kind": failure_kind,
        "expected_status": case_block.get("expect", "ok"),
        "as_expected": status == case_block.get("expect", "ok"),
        "timed_out": timed_out,
        "wall_seconds": wall_s,
        "command": command,
        "ranks": ranks,
    }


def _gib(x):
    return f"{x / 2**30:.2f}" if isinstance(x, (int, float)) else "-"


def summary_line(result):
    """`name: status | rank r alloc/reserved GiB ... | step ms` for the device script's output tail."""
    c = result.get("case", {})
    parts = [f"{c.get('name')}: {result.get('status')}"]
    if result.get("status") != result.get("expected_status", "ok"):
        parts[0] += f" (expected {result.get('expected_status')})"
    peaks = []
    steps = []
    for r in result.get("ranks", []):
        m = r.get("memory") or {}
        peaks.append(f"r{r.get('rank')} {_gib(m.get('peak_allocated'))}/{_gib(m.get('peak_reserved'))}")
        t = (r.get("timing") or {}).get("median_step_seconds")
        if t is not None:
            steps.append(t)
    parts.append("peak alloc/reserved GiB " + " ".join(peaks))
    parts.append(f"step {1000 * median(steps):.1f} ms" if steps else "step -")
    if result.get("status") != "ok":
        err = (result.get("error") or "").replace("\n", " ")
        parts.append(f"error: {err[:240]}")
    return " | ".join(parts)
