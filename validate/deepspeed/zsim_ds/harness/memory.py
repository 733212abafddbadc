"""Memory: the phase markers, the replay of the allocator's device trace to the step's peak and what is live there,
and the allocator's figures a rank reads (torch imported lazily: the pure parts run without it)."""
import collections
import os
import sys

MARKER_FILE = os.path.abspath(__file__)  # the _zsim_mark_* functions' file: their frames say the phase
PACKAGE_DIR = os.path.dirname(os.path.dirname(MARKER_FILE)) + os.sep  # zsim_ds/: allocation sites in the harness


TOP_SITES = 40           # peak live-set groups listed


# ----------------------------------------------------------------------------------------------------------------
# Replay of the allocator's device trace (torch.cuda.memory._snapshot()["device_traces"][device])


PHASE_MARKERS = {"_zsim_mark_forward": "forward", "_zsim_mark_backward": "backward", "_zsim_mark_step": "step",
                 "_zsim_mark_idle": "idle"}


def marker_phase(event):
    """The phase a marker allocation announces (_zsim_mark_* of this file), or None for an ordinary allocation."""
    for fr in event.get("frames") or ():
        ph = PHASE_MARKERS.get(fr.get("name"))
        if ph is not None and os.path.basename(fr.get("filename", "")) == os.path.basename(MARKER_FILE):
            return ph
    return None


def site_roots(modules=None, harness_dir=PACKAGE_DIR):
    """(path prefix, label) of the code an allocation site is named by: this harness's package (zsim_ds/), the
    transformers and deepspeed packages as imported (their directories: a path pattern would also match this
    harness, under validate/deepspeed/), torch's autograd and checkpoint. `modules` maps a name to its imported
    module (default sys.modules)."""
    modules = sys.modules if modules is None else modules
    harness_dir = os.path.join(os.path.abspath(harness_dir), "")
    roots = [(harness_dir, os.path.basename(os.path.dirname(harness_dir)) + "/")]
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
# The phase markers and the allocator's figures a rank reads (need torch)


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
