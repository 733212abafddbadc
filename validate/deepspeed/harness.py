#!/usr/bin/env python3
"""Runs real DeepSpeed on a Hugging Face transformers model and records what zsim predicts.

    python harness.py --case-dir cases/<name> --out result.json [--world W] [--steps N] [--timeout S]
    python harness.py --summary result.json [...]      # one line per result (status, peaks, step time)

The parent launches W rank processes (this file with --worker), one per rank, every rank on GPU 0 (LOCAL_RANK=0;
with W > 1 each rank is an NCCL host of its own talking over the loopback's sockets, as `zrun --share-gpu`), waits
for them with a timeout (the whole process group of every rank is killed on timeout or after one rank failed), and
merges the ranks' JSON into one result (format "zsim.deepspeed_run" version 1: README.md beside this file).

A rank patches torch.distributed's collectives before anything imports DeepSpeed, builds the model as a user does
(AutoConfig.from_pretrained(case_dir); AutoModelForCausalLM.from_config(cfg, attn_implementation=...); inside
deepspeed.zero.Init(config_dict_or_path=ds_config) at stage 3), deepspeed.initialize()s it with the case's
ds_config.json and trains on random tokens:

    loss = engine(input_ids=ids, labels=ids).loss; engine.backward(loss); engine.step()

Steps (default 8, 3 of them warm-up): 0 .. W-1 warm-up; W: the collectives step (every collective call recorded
with its phase; memory read at each phase boundary); W+1: the memory-history step (torch's allocator history with
Python stacks, replayed to the step's peak and the allocations live there); the rest timed (CUDA-synchronised wall
time per step, recorder off). Then DeepSpeed's own buffers are attributed, and at world 1 one more forward lists the
tensors autograd saves. Everything that is not pure bookkeeping imports torch lazily: the pure parts (case loading,
the trace replay, the collective aggregation, the buffer walk, the JSON writer) run and are unit-tested without it.
"""
import argparse
import collections
import copy
import functools
import inspect
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

import host_cpu
import sync_debug

FORMAT = "zsim.deepspeed_run"
FORMAT_VERSION = 1
HARNESS_FILE = os.path.abspath(__file__)
PHASE_ORDER = ("init", "forward", "backward", "step", "idle", "other")
DEFAULT_STEPS = 8
DEFAULT_WARMUP = 3
DEFAULT_TIMEOUT_S = 600
DEFAULT_SEED = 1234
STDERR_TAIL_LINES = 40
MAX_SEQUENCE = 5000      # collective calls kept in order (per rank) for the collectives step
TOP_PATHS = 40           # DeepSpeed buffer paths listed
TOP_SITES = 40           # peak live-set groups listed


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


# ----------------------------------------------------------------------------------------------------------------
# The case


def load_case(case_dir):
    """case.json, ds_config.json and config.json of a case folder, checked; raises ValueError naming the problem."""
    case_dir = os.path.abspath(case_dir)
    p = os.path.join(case_dir, "case.json")
    if not os.path.isfile(p):
        raise ValueError(f"{case_dir}: no case.json (write the cases with make_cases.py)")
    case = read_json(p)
    for key, kind in (("name", str), ("micro_batch", int), ("seq_len", int), ("grad_accum", int), ("world", int),
                      ("attention", str), ("checkpointing", str)):
        if not isinstance(case.get(key), kind) or isinstance(case.get(key), bool):
            raise ValueError(f"{p}: key {key!r} must be a {kind.__name__}, got {case.get(key)!r}")
    if case["attention"] not in ("sdpa", "eager"):
        raise ValueError(f"{p}: attention must be sdpa or eager")
    if case["checkpointing"] not in ("full", "none"):
        raise ValueError(f"{p}: checkpointing must be full or none")
    cap = case.get("gpu_memory_cap_bytes")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0):
        raise ValueError(f"{p}: key 'gpu_memory_cap_bytes' must be a positive integer (bytes), got {cap!r}")
    ds_path = os.path.join(case_dir, case.get("ds_config", "ds_config.json"))
    cfg_path = os.path.join(case_dir, case.get("model_config", "config.json"))
    ds = read_json(ds_path)
    model_cfg = read_json(cfg_path)
    mb = ds.get("train_micro_batch_size_per_gpu")
    if mb is not None and mb != case["micro_batch"]:
        raise ValueError(f"{ds_path}: train_micro_batch_size_per_gpu {mb} != the case's micro_batch {case['micro_batch']}")
    ga = ds.get("gradient_accumulation_steps")
    if ga is not None and ga != case["grad_accum"]:
        raise ValueError(f"{ds_path}: gradient_accumulation_steps {ga} != the case's grad_accum {case['grad_accum']}")
    return case_dir, case, ds, model_cfg


def case_summary(case, ds, world, case_dir=None):
    """The result's `case` block: the case as run, with the ZeRO options read from its ds_config."""
    z = ds.get("zero_optimization") or {}
    oo = (z.get("offload_optimizer") or {}).get("device", "none") or "none"
    op = (z.get("offload_param") or {}).get("device", "none") or "none"
    d = None
    if case_dir:
        d = os.path.relpath(case_dir) if not os.path.relpath(case_dir).startswith("..") else case_dir
    return {
        "name": case["name"],
        "dir": d,
        "model": case.get("model"),
        "files": {"model_config": case.get("model_config", "config.json"),
                  "ds_config": case.get("ds_config", "ds_config.json"),
                  "scenario": case.get("scenario", "scenario.yaml")},
        "micro_batch": case["micro_batch"],
        "seq_len": case["seq_len"],
        "grad_accum": case["grad_accum"],
        "world": world,
        "case_world": case["world"],
        "shared_gpu": world > 1,
        "attention": case["attention"],
        "checkpointing": case["checkpointing"],
        "stage": int(z.get("stage", 0)),
        "offload_optimizer": str(oo),
        "offload_param": str(op),
        "zero_hpz_partition_size": int(z.get("zero_hpz_partition_size", 1)),
        "zero_quantized_weights": bool(z.get("zero_quantized_weights", False)),
        "zero_quantized_gradients": bool(z.get("zero_quantized_gradients", False)),
        "expect": case.get("expect", "ok"),
        "note": case.get("note", ""),
        "gpu_memory_cap_bytes": case.get("gpu_memory_cap_bytes"),
        "ds_config": ds,
    }


def step_plan(steps, warmup, phase_steps=0, profile_steps=0, sync_debug_steps=0):
    """Kind of each step: warmup, collectives, memory_history, timed; then phase_timed, profiled and sync_debug steps,
    which come after the `steps` (they time each phase with a synchronisation at its end, run under torch's profiler,
    and under torch's CUDA sync debug mode: sync_debug.py)."""
    kinds = []
    for s in range(steps):
        if s < warmup:
            kinds.append("warmup")
        elif s == warmup:
            kinds.append("collectives")
        elif s == warmup + 1:
            kinds.append("memory_history")
        else:
            kinds.append("timed")
    return kinds + ["phase_timed"] * phase_steps + ["profiled"] * profile_steps + ["sync_debug"] * sync_debug_steps


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


# ----------------------------------------------------------------------------------------------------------------
# Collective recording (torch.distributed patched before DeepSpeed is imported)

# op -> (input argument names, output argument names), first present wins; the bytes are the tensors' (lists summed).
COLLECTIVE_SPECS = {
    "all_reduce": (("tensor",), ("tensor",)),
    "all_reduce_coalesced": (("tensors",), ("tensors",)),
    "broadcast": (("tensor",), ("tensor",)),
    "reduce": (("tensor",), ("tensor",)),
    "all_gather_into_tensor": (("input_tensor",), ("output_tensor",)),
    "_all_gather_base": (("input_tensor",), ("output_tensor",)),
    "all_gather": (("tensor",), ("tensor_list",)),
    "all_gather_coalesced": (("input_tensor_list",), ("output_tensor_lists",)),
    "reduce_scatter_tensor": (("input", "input_tensor"), ("output", "output_tensor")),
    "_reduce_scatter_base": (("input", "input_tensor"), ("output", "output_tensor")),
    "reduce_scatter": (("input_list",), ("output",)),
    "all_to_all_single": (("input",), ("output",)),
    "all_to_all": (("input_tensor_list",), ("output_tensor_list",)),
    "gather": (("tensor",), ("gather_list",)),
    "scatter": (("scatter_list",), ("tensor",)),
    "batch_isend_irecv": (("p2p_op_list",), ()),
}
# Positional fallback (input index, output index) where the signature cannot be bound.
COLLECTIVE_POSITIONAL = {
    "all_gather_into_tensor": (1, 0), "_all_gather_base": (1, 0), "reduce_scatter_tensor": (1, 0),
    "_reduce_scatter_base": (1, 0), "reduce_scatter": (1, 0), "all_to_all_single": (1, 0), "all_to_all": (1, 0),
    "all_gather": (1, 0), "all_gather_coalesced": (1, 0), "scatter": (1, 0),
}


def _is_tensor(x):
    return hasattr(x, "element_size") and hasattr(x, "numel") and hasattr(x, "dtype")


def payload_bytes(obj, depth=0):
    """Bytes of a tensor, or of the tensors in a (nested) list / tuple, or of P2POp objects' tensors."""
    if obj is None or depth > 4:
        return 0
    if _is_tensor(obj):
        return int(obj.numel()) * int(obj.element_size())
    if isinstance(obj, (list, tuple)):
        return sum(payload_bytes(x, depth + 1) for x in obj)
    t = getattr(obj, "tensor", None)  # torch.distributed.P2POp
    if t is not None and _is_tensor(t):
        return payload_bytes(t, depth + 1)
    return 0


def first_dtype(obj, depth=0):
    if obj is None or depth > 4:
        return None
    if _is_tensor(obj):
        return str(obj.dtype).replace("torch.", "")
    if isinstance(obj, (list, tuple)):
        for x in obj:
            d = first_dtype(x, depth + 1)
            if d:
                return d
        return None
    t = getattr(obj, "tensor", None)
    return first_dtype(t, depth + 1) if t is not None else None


def describe_call(op, arguments, args=()):
    """(input_bytes, output_bytes, dtype, group, async_op) of one collective call from its bound arguments."""
    ins, outs = COLLECTIVE_SPECS.get(op, ((), ()))
    in_obj = next((arguments[k] for k in ins if k in arguments), None)
    out_obj = next((arguments[k] for k in outs if k in arguments), None)
    if in_obj is None and out_obj is None and op in COLLECTIVE_POSITIONAL and args:
        i, o = COLLECTIVE_POSITIONAL[op]
        in_obj = args[i] if len(args) > i else None
        out_obj = args[o] if len(args) > o else None
    in_b = payload_bytes(in_obj)
    out_b = payload_bytes(out_obj) if outs else 0
    dtype = first_dtype(in_obj) or first_dtype(out_obj) or "none"
    group = arguments.get("group")
    if op == "batch_isend_irecv" and isinstance(in_obj, (list, tuple)) and in_obj:
        group = getattr(in_obj[0], "group", None)
    return in_b, out_b, dtype, group, bool(arguments.get("async_op", False))


class CollectiveRecorder:
    """Records collective calls while `on`; the patched functions cost one attribute test when it is off."""

    def __init__(self):
        self.on = False
        self.phase = "init"
        self.calls = []          # (phase, op, group_size, input_bytes, output_bytes, dtype, async_op, group_id)
        self.errors = 0
        self.local = threading.local()
        self.patched = []
        self.group_ids = {}      # id(group) -> (group id, ranks)
        self.groups = {}         # group id -> ranks
        self._size_of = None
        self._ranks_of = None

    def group_info(self, group):
        key = id(group) if group is not None else None
        hit = self.group_ids.get(key)
        if hit is not None:
            return hit
        size, ranks = None, None
        try:
            size = int(self._size_of(group)) if self._size_of else None
        except Exception:
            size = None
        try:
            ranks = list(self._ranks_of(group)) if self._ranks_of and group is not None else None
        except Exception:
            ranks = None
        if ranks is None and size is not None and group is None:
            ranks = list(range(size))
        gid = f"g{len(self.groups)}"
        self.groups[gid] = ranks if ranks is not None else size
        hit = (gid, size)
        self.group_ids[key] = hit
        return hit

    def record(self, op, sig, args, kwargs):
        arguments = {}
        if sig is not None:
            try:
                arguments = dict(sig.bind(*args, **kwargs).arguments)
            except TypeError:
                arguments = dict(kwargs)
        else:
            arguments = dict(kwargs)
        in_b, out_b, dtype, group, async_op = describe_call(op, arguments, args)
        gid, size = self.group_info(group)
        self.calls.append((self.phase, op, size, in_b, out_b, dtype, async_op, gid))

    def reset(self):
        self.calls = []


REC = CollectiveRecorder()


def _make_wrapper(op, orig, rec):
    try:
        sig = inspect.signature(orig)
    except (TypeError, ValueError):
        sig = None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        if not rec.on:
            return orig(*args, **kwargs)
        loc = rec.local
        if getattr(loc, "depth", 0):
            return orig(*args, **kwargs)  # called from inside another recorded collective: counted once
        try:
            rec.record(op, sig, args, kwargs)
        except Exception:
            rec.errors += 1
        loc.depth = 1
        try:
            return orig(*args, **kwargs)
        finally:
            loc.depth = 0

    wrapper._zsim_wrapped = True
    wrapper._zsim_orig = orig
    return wrapper


def install_collective_recorder(rec=REC):
    """Wraps torch.distributed's collectives in both torch.distributed and torch.distributed.distributed_c10d (the
    second is what DeepSpeed's all_gather_coalesced and torch's own deprecated aliases call). Must run before
    DeepSpeed is imported: its TorchBackend keeps torch.distributed.all_gather_into_tensor and reduce_scatter_tensor
    as attributes at init (deepspeed/comm/torch.py get_all_gather_function / get_reduce_scatter_function)."""
    import torch.distributed as dist
    c10d = dist.distributed_c10d
    made = {}
    for op in COLLECTIVE_SPECS:
        for mod in (dist, c10d):
            orig = getattr(mod, op, None)
            if orig is None or not callable(orig) or getattr(orig, "_zsim_wrapped", False):
                continue
            w = made.get(id(orig))
            if w is None:
                w = _make_wrapper(op, orig, rec)
                made[id(orig)] = w
            setattr(mod, op, w)
            rec.patched.append(f"{mod.__name__}.{op}")
    rec._size_of = lambda g: dist.get_world_size(g) if g is not None else dist.get_world_size()
    rec._ranks_of = getattr(dist, "get_process_group_ranks", None)
    return rec


def aggregate_calls(calls):
    """Calls grouped by (phase, op, group_size, input_bytes, output_bytes, dtype) with counts, in a stable order."""
    counts = collections.OrderedDict()
    for c in calls:
        phase, op, size, in_b, out_b, dtype = c[:6]
        key = (phase, op, size, in_b, out_b, dtype)
        e = counts.get(key)
        if e is None:
            counts[key] = e = {"count": 0, "async": 0}
        e["count"] += 1
        if len(c) > 6 and c[6]:
            e["async"] += 1

    def order(k):
        phase, op, size, in_b, out_b, dtype = k
        pi = PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER)
        return (pi, op, size if size is not None else -1, -in_b, -out_b, dtype)

    out = []
    for k in sorted(counts, key=order):
        phase, op, size, in_b, out_b, dtype = k
        out.append({"phase": phase, "op": op, "group_size": size, "input_bytes": in_b, "output_bytes": out_b,
                    "dtype": dtype, "count": counts[k]["count"], "async_count": counts[k]["async"]})
    return out


def totals_by_phase_op(calls):
    """Per (phase, op): calls and summed input / output bytes."""
    tot = {}
    for c in calls:
        phase, op, size, in_b, out_b = c[:5]
        e = tot.setdefault((phase, op), {"phase": phase, "op": op, "count": 0, "input_bytes": 0, "output_bytes": 0})
        e["count"] += 1
        e["input_bytes"] += in_b
        e["output_bytes"] += out_b
    return [tot[k] for k in sorted(tot, key=lambda k: (PHASE_ORDER.index(k[0]) if k[0] in PHASE_ORDER else 99, k[1]))]


def sequence_of(calls, limit=MAX_SEQUENCE):
    """The calls in order, compact: [phase, op, group id, input_bytes, output_bytes, dtype, async]."""
    return [[c[0], c[1], c[7] if len(c) > 7 else None, c[3], c[4], c[5], bool(c[6]) if len(c) > 6 else False]
            for c in calls[:limit]]


# ----------------------------------------------------------------------------------------------------------------
# Replay of the allocator's device trace (torch.cuda.memory._snapshot()["device_traces"][device])

PHASE_MARKERS = {"_zsim_mark_forward": "forward", "_zsim_mark_backward": "backward", "_zsim_mark_step": "step",
                 "_zsim_mark_idle": "idle"}


def marker_phase(event):
    """The phase a marker allocation announces (_zsim_mark_* of this file), or None for an ordinary allocation."""
    for fr in event.get("frames") or ():
        ph = PHASE_MARKERS.get(fr.get("name"))
        if ph is not None and os.path.basename(fr.get("filename", "")) == os.path.basename(HARNESS_FILE):
            return ph
    return None


def site_roots(modules=None, harness_file=HARNESS_FILE):
    """(path prefix, label) of the code an allocation site is named by: the transformers and deepspeed packages as
    imported (their directories: a path pattern would also match this harness, under validate/deepspeed/), torch's
    autograd and checkpoint, and this file. `modules` maps a name to its imported module (default sys.modules)."""
    modules = sys.modules if modules is None else modules
    roots = [(os.path.abspath(harness_file), os.path.basename(harness_file))]
    for name in ("transformers", "deepspeed"):
        m = modules.get(name)
        f = getattr(m, "__file__", None) if m is not None else None
        if f:
            roots.append((os.path.dirname(os.path.abspath(f)) + os.sep, name + "/"))
    t = modules.get("torch")
    f = getattr(t, "__file__", None) if t is not None else None
    if f:
        d = os.path.dirname(os.path.abspath(f))
        roots.append((os.path.join(d, "autograd") + os.sep, "torch/autograd/"))
        roots.append((os.path.join(d, "utils", "checkpoint.py"), "torch/utils/checkpoint.py"))
    return roots


def site_of(frames, roots):
    """The allocation's site: the innermost frame (frames are innermost first) in one of `roots` (site_roots), as
    'label/rest/of/path.py:line function'; else the innermost frame at all, with its full path."""
    frames = frames or ()
    for fr in frames:
        fn = fr.get("filename", "") or ""
        for prefix, label in roots:
            if fn == prefix or (prefix.endswith(os.sep) and fn.startswith(prefix)):
                rest = fn[len(prefix):] if prefix.endswith(os.sep) else ""
                return f"{label}{rest}:{fr.get('line')} {fr.get('name')}"
    if frames:
        fr = frames[0]
        return f"{fr.get('filename')}:{fr.get('line')} {fr.get('name')}"
    return "<no python frame>"


def replay_device_trace(events, start_allocated, top=TOP_SITES, max_entries=None, roots=None):
    """Replays alloc / free_completed events from `start_allocated` bytes (what was allocated when recording began):
    the step's peak, the phase there (from the harness's marker allocations, which are not counted), and the
    allocations live at the peak grouped by site (site_of with `roots`, default site_roots()) and by the phase they
    were made in."""
    roots = site_roots() if roots is None else roots
    site_cache = {}

    def site(ev):
        fr = ev.get("frames") or ()
        key = tuple((f.get("filename"), f.get("line"), f.get("name")) for f in fr[:64])
        s = site_cache.get(key)
        if s is None:
            s = site_cache[key] = site_of(fr, roots)
        return s

    def run(stop_at=None):
        cur = start_allocated
        live = {}
        markers = set()
        phase, micro = "before", -1
        pre_freed = 0
        peak, peak_idx, peak_phase, peak_micro, peak_pre_freed = start_allocated, -1, "before", -1, 0
        unknown_frees = 0
        for i, e in enumerate(events):
            if stop_at is not None and i > stop_at:
                break
            a = e.get("action")
            if a == "alloc":
                addr, size = e.get("addr"), int(e.get("size", 0))
                ph = marker_phase(e)
                if ph is not None:
                    markers.add(addr)
                    phase = ph
                    if ph == "forward":
                        micro += 1
                    continue
                cur += size
                live[addr] = (i, size, phase, micro)
                if cur > peak:
                    peak, peak_idx, peak_phase, peak_micro, peak_pre_freed = cur, i, phase, micro, pre_freed
            elif a == "free_completed":
                addr, size = e.get("addr"), int(e.get("size", 0))
                if addr in markers:
                    markers.discard(addr)
                    continue
                if addr in live:
                    del live[addr]
                else:
                    pre_freed += size
                    unknown_frees += 1
                cur -= size
        return {"cur": cur, "live": live, "peak": peak, "peak_idx": peak_idx, "peak_phase": peak_phase,
                "peak_micro": peak_micro, "peak_pre_freed": peak_pre_freed, "pre_freed": pre_freed,
                "unknown_frees": unknown_frees}

    full = run()
    at_peak = run(stop_at=full["peak_idx"]) if full["peak_idx"] >= 0 else {"live": {}}
    groups = {}
    by_phase = collections.Counter()
    largest = []
    for addr, (i, size, ph, mi) in at_peak["live"].items():
        s = site(events[i])
        g = groups.setdefault((s, ph), [0, 0])
        g[0] += size
        g[1] += 1
        by_phase[ph] += size
        largest.append((size, i, s, ph))
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))
    listed = [{"site": s, "phase": ph, "bytes": b, "count": n} for (s, ph), (b, n) in ordered[:top]]
    rest = ordered[top:]
    largest.sort(key=lambda x: (-x[0], x[1]))
    pre_live = start_allocated - full["peak_pre_freed"]
    by_phase_out = {"before_recording": pre_live}
    for ph in ("before", "forward", "backward", "step", "idle"):
        if by_phase.get(ph):
            by_phase_out[ph] = by_phase[ph]
    return {
        "events": len(events),
        "truncated": bool(max_entries and len(events) >= max_entries),
        "start_allocated": start_allocated,
        "peak_allocated": full["peak"],
        "end_allocated": full["cur"],
        "peak_event_index": full["peak_idx"],
        "phase_at_peak": full["peak_phase"],
        "micro_step_at_peak": full["peak_micro"],
        "live_from_before_recording": pre_live,
        "live_recorded": sum(b for b, n in groups.values()),
        "frees_of_earlier_allocations": full["unknown_frees"],
        "by_phase": by_phase_out,
        "groups": listed,
        "other": {"bytes": sum(b for _, (b, n) in rest), "count": sum(n for _, (b, n) in rest),
                  "groups": len(rest)},
        "largest": [{"bytes": b, "site": s, "phase": ph} for b, i, s, ph in largest[:10]],
    }


# ----------------------------------------------------------------------------------------------------------------
# DeepSpeed's own buffers: a walk of the optimizer's (and engine's) attributes summing storages once each


def _walkable(obj):
    """Objects whose attributes the buffer walk enters: DeepSpeed's and torch.optim's."""
    mod = type(obj).__module__ or ""
    return mod.startswith("deepspeed") or mod.startswith("torch.optim")


class BufferWalk:
    """Sums tensors' storage bytes per attribute path, each storage once (the first path that reaches it).
    `tensor_info(t)` -> (storage key, bytes, 'cuda' | 'cpu' | 'cpu_pinned' | other) or None; `skip(obj)` -> True
    for objects never entered (the model's modules). Lists' indices and non-string dict keys read [*]."""

    def __init__(self, tensor_info, skip=lambda o: False, walkable=_walkable, max_depth=8, max_items=100000):
        self.tensor_info = tensor_info
        self.skip = skip
        self.walkable = walkable
        self.max_depth = max_depth
        self.max_items = max_items
        self.seen_storage = set()
        self.seen_obj = set()
        self.paths = {}      # (device kind, path) -> [bytes, tensors]

    def add_tensor(self, t, path, depth):
        info = self.tensor_info(t)
        if info is not None:
            key, nbytes, kind = info
            if key not in self.seen_storage:
                self.seen_storage.add(key)
                e = self.paths.setdefault((kind, path), [0, 0])
                e[0] += nbytes
                e[1] += 1
        attrs = getattr(t, "__dict__", None)  # DeepSpeed hangs ds_tensor, ds_secondary_tensor, ... on parameters
        if attrs and depth < self.max_depth:
            for name, v in list(attrs.items()):
                if _is_tensor(v) or isinstance(v, (list, tuple, dict)) or self.walkable(v):
                    self.walk(v, f"{path}.{name}", depth + 1)

    def walk(self, obj, path, depth=0):
        if obj is None or depth > self.max_depth or isinstance(obj, (str, bytes, int, float, bool)):
            return
        if _is_tensor(obj):
            self.add_tensor(obj, path, depth)
            return
        oid = id(obj)
        if oid in self.seen_obj or self.skip(obj):
            return
        self.seen_obj.add(oid)
        if isinstance(obj, dict):
            for i, (k, v) in enumerate(list(obj.items())):
                if i >= self.max_items:
                    break
                self.walk(v, f"{path}[{k!r}]" if isinstance(k, str) else f"{path}[*]", depth + 1)
            return
        if isinstance(obj, (list, tuple, set, frozenset, collections.deque)):
            for i, v in enumerate(list(obj)):
                if i >= self.max_items:
                    break
                self.walk(v, f"{path}[*]", depth + 1)
            return
        if not self.walkable(obj):
            return
        attrs = getattr(obj, "__dict__", None)
        if not attrs:
            return
        for name, v in list(attrs.items()):
            shown = name
            for c in type(obj).__mro__:  # name-mangled private attributes: _Class__x -> __x
                pre = f"_{c.__name__}__"
                if name.startswith(pre):
                    shown = name[len(pre) - 2:]
                    break
            self.walk(v, f"{path}.{shown}", depth + 1)

    def report(self, top=TOP_PATHS):
        by_kind = {}
        for (kind, path), (b, n) in self.paths.items():
            by_kind.setdefault(kind, []).append((path, b, n))
        out = {}
        for kind, items in sorted(by_kind.items()):
            items.sort(key=lambda x: (-x[1], x[0]))
            out[kind] = {
                "total_bytes": sum(b for _, b, _ in items),
                "paths": [{"path": p, "bytes": b, "tensors": n} for p, b, n in items[:top]],
                "other_bytes": sum(b for _, b, _ in items[top:]),
                "other_paths": max(0, len(items) - top),
            }
        return out


# ----------------------------------------------------------------------------------------------------------------
# Saved-activation inventory summary (pure)

LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|layer|blocks)\.(\d+)(?:\.|$)")


def layer_of(path):
    m = LAYER_RE.search(path or "")
    return int(m.group(1)) if m else None


def summarize_saved(records, tokens, listed=80):
    """records: dicts {module, cls, shape, dtype, nbytes, device, param, refs} (one per storage, in save order).
    Activation bytes are CUDA storages that are not parameters."""
    acts = [r for r in records if not r["param"] and r["device"] == "cuda"]
    total = sum(r["nbytes"] for r in acts)
    by_class = {}
    per_layer = collections.Counter()
    by_path = {}
    for r in acts:
        e = by_class.setdefault(r["cls"], {"class": r["cls"], "bytes": 0, "count": 0})
        e["bytes"] += r["nbytes"]
        e["count"] += 1
        li = layer_of(r["module"])
        if li is not None:
            per_layer[li] += r["nbytes"]
        if li is None or li == 0:
            p = by_path.setdefault(r["module"], {"module": r["module"], "class": r["cls"], "bytes": 0, "count": 0})
            p["bytes"] += r["nbytes"]
            p["count"] += 1
    for d in list(by_class.values()) + list(by_path.values()):
        d["bytes_per_token"] = d["bytes"] / tokens if tokens else None
    n_layers = (max(per_layer) + 1) if per_layer else 0

    def tensor_row(r):
        return {"module": r["module"], "class": r["cls"], "shape": list(r["shape"]), "dtype": r["dtype"],
                "bytes": r["nbytes"], "refs": r["refs"]}

    layer0 = [tensor_row(r) for r in acts if layer_of(r["module"]) == 0]
    outside = [tensor_row(r) for r in acts if layer_of(r["module"]) is None]
    params = [r for r in records if r["param"]]
    return {
        "tokens": tokens,
        "activation_bytes": total,
        "activation_bytes_per_token": total / tokens if tokens else None,
        "tensors": len(acts),
        "parameter_storages": len(params),
        "parameter_storage_bytes": sum(r["nbytes"] for r in params),
        "non_cuda_tensors": sum(1 for r in records if r["device"] != "cuda"),
        "by_class": sorted(by_class.values(), key=lambda d: (-d["bytes"], d["class"])),
        "per_layer_bytes": [per_layer.get(i, 0) for i in range(n_layers)],
        "by_module": sorted(by_path.values(), key=lambda d: (-d["bytes"], d["module"])),
        "layer0_tensors": layer0[:listed],
        "outside_layer_tensors": outside[:listed],
    }


# ----------------------------------------------------------------------------------------------------------------
# Rank worker (needs torch, transformers, DeepSpeed)


def _zsim_mark_forward(torch):
    torch.empty(512, dtype=torch.uint8, device="cuda")


def _zsim_mark_backward(torch):
    torch.empty(512, dtype=torch.uint8, device="cuda")


def _zsim_mark_step(torch):
    torch.empty(512, dtype=torch.uint8, device="cuda")


def _zsim_mark_idle(torch):
    torch.empty(512, dtype=torch.uint8, device="cuda")


MARK_FUNCS = {"forward": _zsim_mark_forward, "backward": _zsim_mark_backward, "step": _zsim_mark_step,
              "idle": _zsim_mark_idle}

STAT_KEYS = ("allocated_bytes.all.peak", "reserved_bytes.all.peak", "active_bytes.all.peak",
             "requested_bytes.all.peak", "allocated_bytes.all.current", "reserved_bytes.all.current",
             "inactive_split_bytes.all.current", "inactive_split_bytes.all.peak", "num_alloc_retries", "num_ooms",
             "num_device_alloc", "num_device_free", "segment.all.current", "segment.all.peak",
             "allocation.all.current", "num_sync_all_streams")


def _versions(torch):
    v = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception as e:
        v["nccl"] = f"unknown ({e})"
    try:
        v["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        v["cudnn"] = None
    try:
        props = torch.cuda.get_device_properties(0)
        v["gpu"] = props.name
        v["gpu_total_memory"] = int(props.total_memory)
        v["gpu_capability"] = f"{props.major}.{props.minor}"
        v["gpu_count_visible"] = torch.cuda.device_count()
    except Exception as e:
        v["gpu"] = f"unknown ({e})"
    try:
        b = torch.backends.cuda
        v["sdpa_backends_enabled"] = {"flash": b.flash_sdp_enabled(), "mem_efficient": b.mem_efficient_sdp_enabled(),
                                      "math": b.math_sdp_enabled(),
                                      "cudnn": b.cudnn_sdp_enabled() if hasattr(b, "cudnn_sdp_enabled") else None}
    except Exception:
        pass
    v["env"] = {k: os.environ[k] for k in sorted(os.environ)
                if k.startswith(("NCCL_", "PYTORCH_", "TORCH_", "CUDA_", "DS_")) or k in ("PYTHONPATH",)}
    return v


def _mem(torch):
    return {"allocated": int(torch.cuda.memory_allocated()), "reserved": int(torch.cuda.memory_reserved())}


def _stats(torch):
    s = torch.cuda.memory_stats()
    return {k: int(s[k]) for k in STAT_KEYS if k in s}


def _device_memory(torch):
    out = {}
    try:
        free, total = torch.cuda.mem_get_info()
        reserved = int(torch.cuda.memory_reserved())
        out = {"total": int(total), "free": int(free), "used": int(total - free),
               "used_outside_this_allocator": int(total - free - reserved)}
    except Exception as e:
        out["error"] = str(e)
    try:
        import pynvml  # optional: per-process use (with ranks sharing the GPU, mem_get_info is all processes')
        pynvml.nvmlInit()
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        h = pynvml.nvmlDeviceGetHandleByIndex(int(cvd) if cvd.isdigit() else 0)
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        out["nvml_processes"] = [{"pid": int(p.pid), "used": (int(p.usedGpuMemory) if p.usedGpuMemory is not None
                                                               else None)} for p in procs]
        out["pid"] = os.getpid()
    except Exception as e:
        out["nvml"] = f"unavailable ({type(e).__name__})"
    return out


def _tensor_info_fn(torch):
    def info(t):
        try:
            st = t.untyped_storage()
            ptr = int(st.data_ptr())
            nbytes = int(st.nbytes())
        except Exception:
            return None
        if nbytes == 0 or ptr == 0:
            return None
        if t.is_cuda:
            kind = "cuda"
        elif t.device.type == "cpu":
            try:
                kind = "cpu_pinned" if t.is_pinned() else "cpu"
            except Exception:
                kind = "cpu"
        else:
            kind = t.device.type
        return ((t.device.type, ptr), nbytes, kind)
    return info


def deepspeed_buffers(torch, engine):
    """Storage bytes of DeepSpeed's optimizer (and the engine's own attributes), then the module's parameters and
    gradients not already counted, per attribute path."""
    import torch.nn as nn
    info = _tensor_info_fn(torch)
    w = BufferWalk(info, skip=lambda o: isinstance(o, nn.Module))
    opt = getattr(engine, "optimizer", None)
    w.walk(opt, "optimizer")
    skip_engine = {"module", "optimizer", "basic_optimizer", "client_optimizer", "client_model_parameters",
                   "_modules", "_parameters", "_buffers"}
    for name, v in list(vars(engine).items()):
        if name in skip_engine or isinstance(v, nn.Module):
            continue
        w.walk(v, f"engine.{name}", 1)
    module = engine.module
    for p in module.parameters():
        w.add_tensor(p, "module.parameters", 1)
        g = p.grad
        if g is not None:
            w.add_tensor(g, "module.grads", 1)
    for b in module.buffers():
        w.add_tensor(b, "module.buffers", 1)
    rep = w.report()
    # Independent totals: the module's parameters and gradients on the GPU (unique storages).
    ps, gs = {}, {}
    for p in module.parameters():
        i = info(p)
        if i and i[2] == "cuda":
            ps[i[0]] = i[1]
        if p.grad is not None:
            i = info(p.grad)
            if i and i[2] == "cuda":
                gs[i[0]] = i[1]
    torch.cuda.synchronize()
    alloc = int(torch.cuda.memory_allocated())
    cuda_total = rep.get("cuda", {}).get("total_bytes", 0)
    inner = getattr(opt, "optimizer", None)
    return {
        "optimizer_class": type(opt).__module__ + "." + type(opt).__name__ if opt is not None else None,
        "inner_optimizer_class": (type(inner).__module__ + "." + type(inner).__name__) if inner is not None else None,
        "by_device": rep,
        "allocated_bytes_at_walk": alloc,
        "attributed_cuda_bytes": cuda_total,
        "unattributed_cuda_bytes": alloc - cuda_total,
        "module_parameter_cuda_bytes": sum(ps.values()),
        "module_grad_cuda_bytes": sum(gs.values()),
    }


def saved_activation_inventory(torch, engine, batch):
    """One more forward under saved_tensors_hooks: each tensor autograd saves (deduplicated by storage), attributed
    to the innermost module running (forward pre / post hooks keep the stack)."""
    import torch.nn as nn
    model = engine.module
    names = {id(m): n for n, m in model.named_modules()}
    stack = []
    param_ptrs = collections.Counter()  # storages of the parameters of the modules running now
    added = {}                          # id(module) -> [the pointers its pre-hook added], one list per entry
    records = collections.OrderedDict()
    handles = []

    def storage(t):
        try:
            st = t.untyped_storage()
            return int(st.data_ptr()), int(st.nbytes())
        except Exception:
            return 0, 0

    def pre(mod, args):
        # Runs after DeepSpeed's own pre-forward hook (registered at initialize), so stage 3 has gathered them.
        stack.append(mod)
        ptrs = [ptr for ptr, _ in (storage(p) for p in mod.parameters(recurse=False)) if ptr]
        for ptr in ptrs:
            param_ptrs[ptr] += 1
        added.setdefault(id(mod), []).append(ptrs)

    def post(mod, args, out):
        if stack and stack[-1] is mod:
            stack.pop()
        elif mod in stack:
            del stack[len(stack) - 1 - stack[::-1].index(mod)]
        entries = added.get(id(mod))
        for ptr in (entries.pop() if entries else ()):  # stage 3 has released them by now: forget what pre saw
            param_ptrs[ptr] -= 1
            if param_ptrs[ptr] <= 0:
                del param_ptrs[ptr]

    def pack(t):
        ptr, nbytes = storage(t)
        mod = stack[-1] if stack else None
        key = ptr if ptr else ("anon", len(records))
        r = records.get(key)
        if r is not None:
            r["refs"] += 1
            return t
        records[key] = {
            "module": names.get(id(mod), "?") if mod is not None else "<outside modules>",
            "cls": type(mod).__name__ if mod is not None else "<outside modules>",
            "shape": tuple(int(x) for x in t.shape), "dtype": str(t.dtype).replace("torch.", ""),
            "nbytes": nbytes, "device": t.device.type,
            "param": bool(isinstance(t, nn.Parameter) or (ptr and ptr in param_ptrs)), "refs": 1}
        return t

    def unpack(t):
        return t

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(pre))
        try:
            handles.append(m.register_forward_hook(post, always_call=True))
        except TypeError:
            handles.append(m.register_forward_hook(post))
    torch.cuda.synchronize()
    before = int(torch.cuda.memory_allocated())
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = engine(input_ids=batch, labels=batch).loss
        torch.cuda.synchronize()
        after = int(torch.cuda.memory_allocated())
    finally:
        for h in handles:
            h.remove()
    del loss
    tokens = int(batch.shape[0] * batch.shape[1])
    out = summarize_saved(list(records.values()), tokens)
    out["allocated_before_forward"] = before
    out["allocated_after_forward"] = after
    out["forward_retained_bytes"] = after - before
    return out


def start_memory_history(torch, max_entries):
    """Starts the allocator's history (alloc events with Python stacks); returns the bytes allocated at its start."""
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except Exception:
        pass
    start = int(torch.cuda.memory_allocated())
    try:
        torch.cuda.memory._record_memory_history(max_entries=max_entries, context="alloc", stacks="python",
                                                 clear_history=True)
    except TypeError:  # a torch without clear_history: nothing was recorded before anyway
        torch.cuda.memory._record_memory_history(max_entries=max_entries, context="alloc", stacks="python")
    return start


def stop_memory_history(torch, start, max_entries):
    """Snapshot, stop, and replay this device's trace (replay_device_trace)."""
    try:
        snap = torch.cuda.memory._snapshot()
    finally:
        try:
            torch.cuda.memory._record_memory_history(enabled=None)
        except Exception:
            pass
    dev = torch.cuda.current_device()
    traces = snap.get("device_traces") or []
    events = traces[dev] if dev < len(traces) else []
    return replay_device_trace(events, start, max_entries=max_entries)


def _gc_info(model):
    for m in model.modules():
        f = getattr(m, "_gradient_checkpointing_func", None)
        if f is not None:
            kw = dict(getattr(f, "keywords", {}) or {})
            func = getattr(f, "func", f)
            return {"kwargs": {k: (v if isinstance(v, (bool, int, float, str, type(None))) else repr(v))
                               for k, v in kw.items()},
                    "use_reentrant": kw.get("use_reentrant"),
                    "function": f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}",
                    "layer_class": type(m).__name__}
    return {"kwargs": None, "use_reentrant": None, "function": None}


def apply_gpu_memory_cap(torch, cap_bytes):
    """case.json's `gpu_memory_cap_bytes`: this process's caching allocator may reserve at most that much of the GPU
    (torch.cuda.set_per_process_memory_fraction), so that DeepSpeed runs as on a smaller GPU: an allocation beyond it
    raises torch's out-of-memory error. The CUDA context, NCCL and cuBLAS workspaces lie outside the allocator and
    the cap. None: no cap. Returns the rank's `gpu_memory_cap` block (bytes, fraction, device_total_bytes)."""
    if cap_bytes is None:
        return None
    device = torch.cuda.current_device()
    total = int(torch.cuda.get_device_properties(device).total_memory)
    if cap_bytes > total:
        raise ValueError(f"gpu_memory_cap_bytes {cap_bytes} exceeds the GPU's {total} bytes")
    fraction = cap_bytes / total
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    return {"bytes": cap_bytes, "fraction": fraction, "device_total_bytes": total}


def _is_oom(torch, e):
    return isinstance(e, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in str(e).lower()


# DeepSpeed's methods the profiled steps annotate (each call a record_function range named ds.<Class>.<method>), so
# that the trace attributes the host's time to DeepSpeed's hooks, bookkeeping and optimizer. Looked up by name at
# call time by DeepSpeed's hooks, so patching the class after initialize reaches them; removed after the profile.
PROFILED_DEEPSPEED_METHODS = (
    ("deepspeed.runtime.zero.parameter_offload", "DeepSpeedZeRoOffload",
     ("pre_sub_module_forward_function", "post_sub_module_forward_function",
      "pre_sub_module_backward_function", "post_sub_module_backward_function")),
    ("deepspeed.runtime.zero.partitioned_param_coordinator", "PartitionedParameterCoordinator",
     ("fetch_sub_module", "release_sub_module", "record_module", "record_parameters")),
    ("deepspeed.runtime.zero.stage3", "DeepSpeedZeroOptimizer_Stage3",
     ("reduce_ready_partitions_and_remove_grads", "independent_gradient_partition_epilogue", "step",
      "_optimizer_step", "unscale_and_clip_grads", "_post_step", "_pre_step", "_prepare_sub_group",
      "_release_sub_group", "_optimizer_states_and_gradient_swap_in", "_optimizer_states_and_gradient_swap_out",
      "_reassign_or_swap_out_partitioned_parameters", "_overflow_check_and_loss_scale_update",
      "_prepare_fp32_grad_for_sub_group", "partition_grads", "__reduce_and_partition_ipg_grads")),
    ("deepspeed.runtime.zero.stage_1_and_2", "DeepSpeedZeroOptimizer",
     ("reduce_ready_partitions_and_remove_grads", "reduce_independent_p_g_buckets_and_remove_grads",
      "reduce_ipg_grads", "independent_gradient_partition_epilogue", "step", "scaled_global_norm",
      "unscale_and_clip_grads", "get_grad_norm_direct", "_optimizer_step", "update_lp_params",
      "copy_grads_in_partition", "check_overflow", "complete_grad_norm_calculation_for_cpu_offload",
      "async_inplace_copy_grad_to_fp32_buffer_from_gpu")),
    ("deepspeed.runtime.bf16_optimizer", "BF16_Optimizer",
     ("step", "update_hp_grads", "get_grads_for_norm", "update_lp_params", "clear_hp_grads", "backward")),
    ("deepspeed.runtime.engine", "DeepSpeedEngine",
     ("forward", "backward", "step", "_take_model_step", "allreduce_gradients")),
    ("deepspeed.ops.adam.fused_adam", "FusedAdam", ("step",)),
    ("deepspeed.ops.adam.cpu_adam", "DeepSpeedCPUAdam", ("step",)),
)


def _annotated(torch, label, fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        with torch.autograd.profiler.record_function(label):
            return fn(*a, **k)
    wrapper.__zsim_original__ = fn
    return wrapper


def annotate_deepspeed(torch):
    """Wraps PROFILED_DEEPSPEED_METHODS; returns what to restore."""
    import importlib
    patched = []
    for mod_name, cls_name, methods in PROFILED_DEEPSPEED_METHODS:
        try:
            cls = getattr(importlib.import_module(mod_name), cls_name)
        except Exception:
            continue
        for m in methods:
            attr = m if not m.startswith("__") else f"_{cls_name}{m}"  # name-mangled private methods
            fn = cls.__dict__.get(attr)
            if fn is None or not callable(fn):
                continue
            setattr(cls, attr, _annotated(torch, f"ds.{cls_name}.{m.strip('_') if m.startswith('__') else m}", fn))
            patched.append((cls, attr, fn))
    return patched


def start_profiler(torch, engine):
    from torch.profiler import ProfilerActivity, profile
    patched = annotate_deepspeed(torch)
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
    prof.__enter__()
    prof._zsim_patched = patched
    return prof


def stop_profiler(torch, prof, rank_out):
    """Ends the profile, restores DeepSpeed's methods, writes the Chrome trace (gzipped) beside the rank's JSON."""
    import gzip
    import shutil
    torch.cuda.synchronize()
    prof.__exit__(None, None, None)
    for cls, attr, fn in prof._zsim_patched:
        setattr(cls, attr, fn)
    out = {"trace": None, "error": None}
    try:
        raw = rank_out[:-5] + ".trace.json" if rank_out.endswith(".json") else rank_out + ".trace.json"
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as f, gzip.open(raw + ".gz", "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        os.remove(raw)
        out["trace"] = os.path.basename(raw) + ".gz"
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def run_worker(args, res, flush):
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    t_start = time.time()
    res["timeline"] = []

    def mark(label):
        res["timeline"].append([label, round(time.time() - t_start, 3)])

    install_collective_recorder(REC)  # before DeepSpeed (and transformers) are imported
    import random
    import torch
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    case_dir, case, ds, _ = load_case(args.case_dir)
    res["gpu_memory_cap"] = apply_gpu_memory_cap(torch, case.get("gpu_memory_cap_bytes"))
    res["patched_collectives"] = REC.patched
    res["versions"] = _versions(torch)
    flush()

    import deepspeed
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    res["versions"]["deepspeed"] = deepspeed.__version__
    res["versions"]["deepspeed_path"] = os.path.dirname(deepspeed.__file__)
    res["versions"]["transformers"] = transformers.__version__
    res["versions"]["transformers_path"] = os.path.dirname(transformers.__file__)
    mark("imported")

    REC.phase = "init"
    REC.on = args.record_init
    deepspeed.init_distributed(dist_backend="nccl")
    mark("distributed")
    stage = int((ds.get("zero_optimization") or {}).get("stage", 0))
    mb, seq, ga = case["micro_batch"], case["seq_len"], case["grad_accum"]

    cfg = AutoConfig.from_pretrained(case_dir)
    t0 = time.time()
    if stage == 3:
        with deepspeed.zero.Init(config_dict_or_path=copy.deepcopy(ds)):
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation=case["attention"])
    else:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=case["attention"])
    gc = {"enabled": False}
    if case["checkpointing"] == "full":
        if args.gc_reentrant == "default":
            model.gradient_checkpointing_enable()
        else:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": args.gc_reentrant == "true"})
        gc = {"enabled": True, "call": "model.gradient_checkpointing_enable()" if args.gc_reentrant == "default"
              else f"gradient_checkpointing_kwargs={{'use_reentrant': {args.gc_reentrant == 'true'}}}"}
        gc.update(_gc_info(model))
    model.train()
    build_s = time.time() - t0
    params = list(model.parameters())
    res["model"] = {
        "class": type(model).__name__,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "parameters": int(sum(getattr(p, "ds_numel", p.numel()) for p in params)),
        "parameter_tensors": len(params),
        "dtype_at_build": str(params[0].dtype).replace("torch.", "") if params else None,
        "use_cache": getattr(model.config, "use_cache", None),
        "gradient_checkpointing": gc,
    }
    mem_model = _mem(torch)

    # Random token batches, made before initialize (a few KB each), deterministic per rank.
    vocab = int(model.config.vocab_size)
    gen = torch.Generator().manual_seed(args.seed + 1000 * (rank + 1))
    n_batches = args.steps * ga + 1
    batches = [torch.randint(0, vocab, (mb, seq), generator=gen).cuda() for _ in range(n_batches)]

    t0 = time.time()
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=copy.deepcopy(ds))
    torch.cuda.synchronize()
    init_s = time.time() - t0
    REC.on = False
    init_calls = REC.calls
    REC.reset()
    mark("initialized")
    init_mem = _mem(torch)
    res["memory"] = {
        "init": {
            "peak_allocated": int(torch.cuda.max_memory_allocated()),
            "peak_reserved": int(torch.cuda.max_memory_reserved()),
            "allocated_after_model_build": mem_model["allocated"],
            "reserved_after_model_build": mem_model["reserved"],
            "allocated_after_initialize": init_mem["allocated"],
            "reserved_after_initialize": init_mem["reserved"],
            "seconds_model_build": build_s,
            "seconds_initialize": init_s,
        },
        "after_initialize": init_mem,
    }
    res["engine"] = {
        "zero_stage": int(engine.zero_optimization_stage()),
        "bf16": bool(engine.bfloat16_enabled()),
        "optimizer_class": f"{type(engine.optimizer).__module__}.{type(engine.optimizer).__name__}",
        "gradient_accumulation_steps": int(engine.gradient_accumulation_steps()),
        "train_micro_batch_size_per_gpu": int(engine.train_micro_batch_size_per_gpu()),
        "communication_data_type": str(getattr(engine, "communication_data_type", None)),
    }
    res["collectives"] = {"init": aggregate_calls(init_calls) if args.record_init else None}
    try:
        res["deepspeed_buffers"] = {"after_initialize": deepspeed_buffers(torch, engine)}
    except Exception as e:
        res["deepspeed_buffers"] = {"after_initialize": {"error": f"{type(e).__name__}: {e}"}}
    res["stage_reached"] = "initialized"
    flush()

    torch.cuda.reset_peak_memory_stats()
    kinds = step_plan(args.steps, args.warmup, args.phase_steps, args.profile_steps, args.sync_debug_steps)
    n_batches_needed = len(kinds) * ga
    while len(batches) < n_batches_needed:  # the phase-timed and profiled steps reuse the batches from the start
        batches.append(batches[len(batches) % max(1, args.steps * ga)])
    phase_seconds = []
    profiler = None
    per_step = []
    threads_at_first_timed = threads_at_last_timed = None
    gc_clock = host_cpu.GcClock()  # Python's collections per step (host_per_step's gc_seconds)
    # The host's waits for the GPU inside a step (host_per_step's sync_seconds), before the harness's own synchronize.
    sync_clock = host_cpu.SyncClock([(getattr(torch.cuda, "Stream", None), "synchronize", "stream"),
                                     (getattr(torch.cuda, "Event", None), "synchronize", "event"),
                                     (torch.cuda, "synchronize", "device"), (torch.Tensor, "item", "item")])
    points = []
    phase_peaks = {}
    mem = res["memory"]
    mem["per_step"] = per_step
    mem["points"] = points

    for s, kind in enumerate(kinds):
        detailed = kind == "collectives"
        history = kind == "memory_history" and args.memory_history
        phased = kind == "phase_timed"
        profiled = kind == "profiled"
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        if profiled and profiler is None:
            profiler = start_profiler(torch, engine)
        annotation = None
        phase_t = {}
        if detailed:
            REC.reset()
            REC.on = True
        hist_start = None
        if history:  # a failure to record costs the live set only, never the case
            try:
                hist_start = start_memory_history(torch, args.history_entries)
            except Exception as e:
                history = False
                res["peak_live_set"] = {"error": f"{type(e).__name__}: {e}"}

        def phase(name, micro):
            nonlocal annotation
            REC.phase = name
            if history:
                MARK_FUNCS[name](torch)
            if phased:
                torch.cuda.synchronize()
                now = time.perf_counter()
                if phase_t.get("open"):
                    prev, t_prev = phase_t["open"]
                    phase_t.setdefault(prev, 0.0)
                    phase_t[prev] += now - t_prev
                phase_t["open"] = (name, now)
            if profiled:
                if annotation is not None:
                    annotation.__exit__(None, None, None)
                annotation = torch.autograd.profiler.record_function(f"zsim.{name}")
                annotation.__enter__()

        def point(label, micro):
            torch.cuda.synchronize()
            m = _mem(torch)
            pk = {"allocated": int(torch.cuda.max_memory_allocated()),
                  "reserved": int(torch.cuda.max_memory_reserved())}
            ph = label.replace("after_", "")
            e = phase_peaks.setdefault(ph, {"allocated": 0, "reserved": 0})
            e["allocated"] = max(e["allocated"], pk["allocated"])
            e["reserved"] = max(e["reserved"], pk["reserved"])
            points.append({"step": s, "micro": micro, "point": label, "allocated": m["allocated"],
                           "reserved": m["reserved"], "phase_peak_allocated": pk["allocated"],
                           "phase_peak_reserved": pk["reserved"]})
            mem[label] = m
            torch.cuda.reset_peak_memory_stats()

        threads_before = host_cpu.threads_cpu_seconds()
        if kind == "timed" and threads_at_first_timed is None:
            threads_at_first_timed = threads_before
        host_before = host_cpu.main_thread_sample()
        process_before = host_cpu.process_sample()
        machine_before = host_cpu.machine_sample()
        gc_clock.take()
        sync_clock.take()
        debug = sync_debug.SyncDebug(torch) if kind == "sync_debug" else None
        if debug is not None:
            debug.__enter__()
        t0 = time.perf_counter()
        for micro in range(ga):
            ids = batches[s * ga + micro]
            phase("forward", micro)
            loss = engine(input_ids=ids, labels=ids).loss
            if detailed:
                point("after_forward", micro)
            phase("backward", micro)
            engine.backward(loss)
            if detailed:
                point("after_backward", micro)
            phase("step", micro)
            engine.step()
            if detailed:
                point("after_step", micro)
        if history or phased or profiled:
            phase("idle", ga)
        if annotation is not None:
            annotation.__exit__(None, None, None)
            annotation = None
        waits = sync_clock.take()
        if debug is not None:
            debug.__exit__(None, None, None)
            res.setdefault("sync_debug", []).append({"step": s, "sites": debug.sites()})
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        host = host_cpu.step_figures(host_before, host_cpu.main_thread_sample())
        threads_after = host_cpu.threads_cpu_seconds()
        host["autograd_cpu_seconds"] = host_cpu.cpu_seconds_of_threads(threads_before, threads_after, "pt_autograd")
        host.update(host_cpu.process_figures(process_before, host_cpu.process_sample()))
        host.update(host_cpu.machine_figures(machine_before, host_cpu.machine_sample()))
        host.update(gc_clock.take())
        host.update(waits)
        # The host's speed right after the step, outside its timing: a fixed Python loop (about 5 ms a step).
        host["reference_work_seconds"] = host_cpu.reference_work_seconds()
        # The same loop on autograd's device thread (where the backward's hooks run) and that thread's CPU in the step.
        loop, elsewhere = host_cpu.reference_work_seconds_in_backward(torch, torch.cuda.current_device())
        host["autograd_reference_work_seconds"] = loop if elsewhere else None
        if kind == "timed":
            threads_at_last_timed = threads_after
        if phased:
            phase_seconds.append({"step": s, **{k: v for k, v in phase_t.items() if k != "open"}})
        if profiled:
            profiler.step()
        REC.on = False
        REC.phase = "other"
        if detailed:
            peak_a = max(v["allocated"] for v in phase_peaks.values())
            peak_r = max(v["reserved"] for v in phase_peaks.values())
        else:
            peak_a = int(torch.cuda.max_memory_allocated())
            peak_r = int(torch.cuda.max_memory_reserved())
        per_step.append({"step": s, "kind": kind, "seconds": dt, "peak_allocated": peak_a, "peak_reserved": peak_r,
                         "loss": float(loss.item()), "host": host})
        if detailed:
            calls = REC.calls
            res["collectives"].update({
                "step": s,
                "calls": aggregate_calls(calls),
                "totals": totals_by_phase_op(calls),
                "sequence": sequence_of(calls),
                "sequence_truncated": len(calls) > MAX_SEQUENCE,
                "total_calls": len(calls),
                "groups": REC.groups,
                "record_errors": REC.errors,
            })
            mem["phase_peaks"] = phase_peaks
            REC.reset()
        if history:
            try:
                live = stop_memory_history(torch, hist_start, args.history_entries)
                live.update({"step": s, "max_memory_allocated": peak_a,
                             "end_allocated_actual": int(torch.cuda.memory_allocated())})
            except Exception as e:
                live = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc().splitlines()[-10:]}
            res["peak_live_set"] = live
        # Running figures, so that a rank stopped later (timeout, a peer's failure) still says what it saw.
        mem["peak_allocated"] = max(p["peak_allocated"] for p in per_step)
        mem["peak_reserved"] = max(p["peak_reserved"] for p in per_step)
        steady = [p for p in per_step if p["step"] >= args.warmup]
        mem["steady_peak_allocated"] = max((p["peak_allocated"] for p in steady), default=None)
        mem["steady_peak_reserved"] = max((p["peak_reserved"] for p in steady), default=None)
        mark(f"step{s}")
        res["stage_reached"] = f"step {s}"
        flush()

    del loss
    torch.cuda.synchronize()
    if profiler is not None:
        res["profile"] = stop_profiler(torch, profiler, args.rank_out)
    timed = [p["seconds"] for p in per_step if p["kind"] == "timed"]
    res["timing"] = {"warmup_steps": args.warmup, "timed_steps": [p["step"] for p in per_step if p["kind"] == "timed"],
                     "step_seconds": timed, "median_step_seconds": median(timed),
                     "all_step_seconds": [p["seconds"] for p in per_step],
                     "step_kinds": [p["kind"] for p in per_step],
                     "phase_seconds": phase_seconds,
                     # The main thread's CPU time, share of the wall time, involuntary context switches and CPU per
                     # step (host_cpu.py): the main thread's CPU, the process's user / system CPU and page faults,
                     # Python's garbage collections, the host's waits for the GPU (synchronisations and .item()
                     # inside the step); and the busiest threads over the timed steps: why host-bound steps vary.
                     "host_per_step": [p["host"] for p in per_step],
                     "busiest_threads_timed": host_cpu.busiest_threads(threads_at_first_timed,
                                                                       threads_at_last_timed),
                     "median_phase_seconds": {k: median([p.get(k) for p in phase_seconds])
                                              for k in ("forward", "backward", "step")} if phase_seconds else None}
    mem["after_steps"] = _mem(torch)
    mem["stats"] = _stats(torch)
    mem["device"] = _device_memory(torch)
    try:
        res["deepspeed_buffers"]["after_steps"] = deepspeed_buffers(torch, engine)
    except Exception as e:
        res["deepspeed_buffers"]["after_steps"] = {"error": f"{type(e).__name__}: {e}"}
    res["stage_reached"] = "steps done"
    flush()

    want_inventory = args.inventory == "on" or (args.inventory == "auto" and world == 1)
    if want_inventory:
        try:
            res["saved_activations"] = saved_activation_inventory(torch, engine, batches[-1])
        except Exception as e:
            res["saved_activations"] = {"error": f"{type(e).__name__}: {e}",
                                        "traceback": traceback.format_exc().splitlines()[-20:]}
        mark("inventory")
    else:
        res["saved_activations"] = None
    res["stage_reached"] = "done"


def worker_main(args):
    rank = int(os.environ.get("RANK", "0"))
    res = {"rank": rank, "pid": os.getpid(), "status": "running", "error": None, "failure_kind": None,
           "stage_reached": "start"}

    def flush():
        write_json_atomic(args.rank_out, res)

    ok = False
    try:
        flush()
        run_worker(args, res, flush)
        res["status"] = "ok"
        ok = True
    except BaseException as e:  # noqa: B902 -- a rank records every failure, then exits
        res["status"] = "failed"
        res["error"] = f"{type(e).__name__}: {e}"[:4000]
        res["traceback"] = traceback.format_exc().splitlines()[-STDERR_TAIL_LINES:]
        kind = "exception"
        try:
            import torch
            if _is_oom(torch, e):
                kind = "oom"
            res.setdefault("memory", {})["at_failure"] = {**_mem(torch), "stats": _stats(torch),
                                                          "max_allocated": int(torch.cuda.max_memory_allocated()),
                                                          "max_reserved": int(torch.cuda.max_memory_reserved())}
        except Exception:
            pass
        res["failure_kind"] = kind
        traceback.print_exc()
    try:
        flush()
    except Exception:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: NCCL's destructors can hang with peers gone (and a failed rank's peers are killed).
    os._exit(0 if ok else 1)


# ----------------------------------------------------------------------------------------------------------------
# Parent: launch the ranks, wait, merge


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(base, rank, world, port):
    env = dict(base)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NCCL_NVLS_ENABLE": "0",
                "PYTHONUNBUFFERED": "1"})
    if world > 1:  # ranks sharing one GPU: each its own NCCL host, sockets on the loopback (zrun --share-gpu)
        env.update({"NCCL_HOSTID": f"zsim-rank{rank}", "NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "lo",
                    "NCCL_IB_DISABLE": "1"})
    return env


def kill_all(procs, grace=10.0):
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    end = time.time() + grace
    while time.time() < end and any(p.poll() is None for p in procs):
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def wait_ranks(procs, deadline, fail_grace, poll_s=0.25):
    """Waits until every rank exited, the deadline passed, or fail_grace seconds after the first rank exited with
    an error (its peers then hang in a collective). Returns (timed_out, stopped_after_failure); kills nothing."""
    first_fail = None
    while any(p.poll() is None for p in procs):
        now = time.time()
        if now > deadline:
            return True, False
        if first_fail is None and any(p.poll() not in (None, 0) for p in procs):
            first_fail = now
        if first_fail is not None and now - first_fail > fail_grace:
            return False, True
        time.sleep(poll_s)
    return False, False


class _Interrupted(Exception):
    pass


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


def parent_main(args):
    t_start = time.time()
    case_dir, case, ds, _ = load_case(args.case_dir)
    world = args.world or case["world"]
    steps = args.steps or case.get("steps") or DEFAULT_STEPS
    if steps < args.warmup + 2:
        raise SystemExit(f"steps ({steps}) must be at least warm-up + 2 ({args.warmup + 2}): the collectives and "
                         "memory-history steps come after the warm-up")
    out = os.path.abspath(args.out)
    base = out[:-5] if out.endswith(".json") else out
    log_dir = os.path.abspath(args.log_dir or base + ".logs")
    os.makedirs(log_dir, exist_ok=True)
    port = free_port()
    options = {"world": world, "steps": steps, "warmup": args.warmup, "seed": args.seed, "timeout_s": args.timeout,
               "fail_grace_s": args.fail_grace, "memory_history": args.memory_history,
               "history_entries": args.history_entries, "inventory": args.inventory,
               "gc_reentrant": args.gc_reentrant, "record_init": args.record_init, "step_kinds": step_plan(steps, args.warmup)}
    procs, rank_outs, errs = [], [], []
    timed_out = killed_after_failure = False
    interrupted = None

    def on_signal(signum, frame):
        raise _Interrupted(f"signal {signum}")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for r in range(world):
            rank_out = os.path.join(log_dir, f"rank{r}.json")
            if os.path.exists(rank_out):
                os.remove(rank_out)
            rank_outs.append(rank_out)
            errs.append(os.path.join(log_dir, f"rank{r}.stderr"))
            cmd = [sys.executable, HARNESS_FILE, "--worker", "--case-dir", case_dir, "--rank-out", rank_out,
                   "--steps", str(steps), "--warmup", str(args.warmup), "--seed", str(args.seed),
                   "--inventory", args.inventory, "--gc-reentrant", args.gc_reentrant,
                   "--history-entries", str(args.history_entries),
                   "--phase-steps", str(args.phase_steps), "--profile-steps", str(args.profile_steps),
                   "--sync-debug-steps", str(args.sync_debug_steps)]
            if not args.memory_history:
                cmd.append("--no-memory-history")
            if args.record_init:
                cmd.append("--record-init")
            with open(os.path.join(log_dir, f"rank{r}.stdout"), "wb") as so, open(errs[-1], "wb") as se:
                procs.append(subprocess.Popen(cmd, env=rank_env(os.environ, r, world, port), stdout=so, stderr=se,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
        timed_out, killed_after_failure = wait_ranks(procs, t_start + args.timeout, args.fail_grace)
    except _Interrupted as e:
        interrupted = str(e)
    finally:
        kill_all(procs)
        for s, h in old.items():
            signal.signal(s, h)
    results = []
    for p in rank_outs:
        try:
            results.append(read_json(p))
        except (OSError, ValueError):
            results.append(None)
    versions = next((r.get("versions") for r in results if r and r.get("versions")), None)
    tails = [tail_lines(e) for e in errs]
    result = merge_ranks(case_summary(case, ds, world, case_dir), results, versions, options,
                         timed_out or bool(interrupted), args.timeout, time.time() - t_start,
                         " ".join([os.path.basename(sys.executable)] + sys.argv), [p.returncode for p in procs], tails,
                         killed_after_failure)
    if interrupted:
        result["error"] = f"harness interrupted ({interrupted}); " + (result["error"] or "")
    result["log_dir"] = os.path.relpath(log_dir, os.path.dirname(out))
    write_json_atomic(out, result)
    print(summary_line(result), flush=True)
    return 0 if result["status"] == "ok" else 1


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case-dir", help="a case folder (case.json, config.json, ds_config.json)")
    ap.add_argument("--out", help="the result JSON")
    ap.add_argument("--world", type=int, default=None, help="ranks (default: the case's)")
    ap.add_argument("--steps", type=int, default=None, help=f"training steps (default: the case's, else {DEFAULT_STEPS})")
    ap.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="warm-up steps before the recorded ones")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds for the whole case")
    ap.add_argument("--fail-grace", type=float, default=20.0,
                    help="seconds the other ranks get after one rank failed, before all are killed")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--log-dir", help="per-rank logs and JSON (default: OUT without .json, plus .logs)")
    ap.add_argument("--inventory", choices=("auto", "on", "off"), default="auto",
                    help="the saved-activation inventory (auto: world 1 only)")
    ap.add_argument("--gc-reentrant", choices=("default", "true", "false"), default="default",
                    help="checkpointing: transformers' default (gradient_checkpointing_enable()) or use_reentrant")
    ap.add_argument("--no-memory-history", dest="memory_history", action="store_false",
                    help="skip the allocator-history step (it becomes a timed step's twin, untimed)")
    ap.add_argument("--history-entries", type=int, default=200000)
    ap.add_argument("--phase-steps", type=int, default=0,
                    help="steps after the others timing forward, backward and step apart (a synchronisation after each)")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="steps after the others under torch's profiler (CPU and CUDA, DeepSpeed's hooks annotated); "
                         "the trace is written gzipped beside each rank's JSON (rank<R>.trace.json.gz)")
    ap.add_argument("--sync-debug-steps", type=int, default=0,
                    help="steps after the others under torch's CUDA sync debug mode: every call that makes the host "
                         "wait for the GPU, counted by the DeepSpeed / transformers line that made it (sync_debug.py; "
                         "the result's sync_debug)")
    ap.add_argument("--record-init", action="store_true", help="also record the collectives of initialize")
    ap.add_argument("--summary", nargs="+", metavar="RESULT", help="print one line per result JSON and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.summary:
        for p in args.summary:
            try:
                print(summary_line(read_json(p)))
            except (OSError, ValueError) as e:
                print(f"{p}: unreadable ({e})")
        return 0
    if not args.case_dir:
        ap.error("--case-dir is required")
    if args.worker:
        if not args.rank_out:
            ap.error("--rank-out is required with --worker")
        args.steps = args.steps or DEFAULT_STEPS
        worker_main(args)
        return 1  # not reached
    if not args.out:
        ap.error("--out is required")
    if args.steps is not None and args.steps < args.warmup + 2:
        ap.error(f"--steps must be at least warm-up + 2 ({args.warmup + 2}): the collectives and history steps")
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
