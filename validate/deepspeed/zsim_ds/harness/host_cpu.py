"""What the host's CPUs did during a step (issue 39: why host-bound DeepSpeed steps vary from step to step).

A host-bound step is the main Python thread's work; when it runs slower, either that thread got less of a CPU
(descheduled: its CPU time falls short of the step's wall time, and its involuntary context switches climb) or the
CPU it got ran slower (its CPU time grows with the wall time). Linux only (/proc); elsewhere every figure is None.

    before = main_thread_sample()            # at a step's start
    ...
    after = main_thread_sample()             # at its end
    step_figures(before, after)              # CPU seconds, involuntary switches, the CPU it ended on
    threads_cpu_seconds()                    # every thread's CPU seconds so far, by name (diff two of them)
    reference_work_seconds()                 # the host's speed now: a fixed pure-Python loop's wall time
    reference_work_seconds_in_backward(torch, device)   # the same loop on autograd's device thread
    cpu_seconds_of_threads(t0, t1, "pt_autograd")       # CPU seconds of autograd's threads between two maps
    p0 = process_sample(); ...; process_figures(p0, process_sample())   # all threads: user / system CPU, faults
    gc_clock = GcClock(); gc_clock.take()    # Python's garbage collections since the last take: seconds, count
    sync_clock = SyncClock(targets); sync_clock.take()   # the host's waits for the GPU since the last take

Run as a script, it times the reference loop on this host and prints the zsim override that predicts a DeepSpeed
step at this host's speed (efficiency.deepspeed_host.loop_us; docs/deepspeed-time.md, "The host's speed"):

    python3 validate/deepspeed/host_cpu.py [--samples N]

Where the process's system time or page faults grow with a slow step, the time goes to the kernel (the driver's
allocations, page mapping), not to Python; where the garbage collector's seconds do, to Python's collections; where
the synchronisations' seconds do, the host waited for the GPU (spinning: CUDA's default wait shows as user CPU time).
"""
import gc
import os
import statistics
import threading
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _stat_fields(text):
    """The fields of a /proc/.../stat line after its name: [0] is field 3 (state), so field n is [n - 3].

    The name sits in parentheses and may hold spaces and parentheses itself: the fields count from the last ')'."""
    return text[text.rindex(")") + 2:].split()


def parse_stat(text):
    """(name, utime + stime in ticks, the CPU it last ran on) from a /proc/<pid>/task/<tid>/stat line."""
    if not text:
        return None
    fields = _stat_fields(text)
    return text[text.index("(") + 1:text.rindex(")")], int(fields[11]) + int(fields[12]), int(fields[36])


def parse_times_and_faults(text):
    """{user_ticks, system_ticks, minor_faults, major_faults} from a /proc/.../stat line (fields 14, 15, 10, 12)."""
    if not text:
        return None
    fields = _stat_fields(text)
    return {"user_ticks": int(fields[11]), "system_ticks": int(fields[12]), "minor_faults": int(fields[7]),
            "major_faults": int(fields[9])}


def parse_involuntary_switches(status_text):
    """nonvoluntary_ctxt_switches from a /proc/.../status text, or None."""
    for line in (status_text or "").splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split()[1])
    return None


def main_thread_sample():
    """The calling thread's CPU seconds, involuntary switches and current CPU, with the wall clock."""
    stat = parse_stat(_read("/proc/thread-self/stat"))
    return {"wall": time.perf_counter(), "cpu": time.thread_time(),
            "involuntary": parse_involuntary_switches(_read("/proc/thread-self/status")),
            "on_cpu": stat[2] if stat else None}


def step_figures(before, after):
    """What the thread did between two samples: its CPU seconds, the share of the wall time it ran, its involuntary
    context switches and the CPU it ended on."""
    wall = after["wall"] - before["wall"]
    cpu = after["cpu"] - before["cpu"]
    switches = None
    if before["involuntary"] is not None and after["involuntary"] is not None:
        switches = after["involuntary"] - before["involuntary"]
    return {"cpu_seconds": cpu, "cpu_share": cpu / wall if wall > 0 else None, "involuntary_switches": switches,
            "on_cpu": after["on_cpu"]}


def process_sample(path="/proc/self/stat"):
    """The whole process's (every thread's) user and system CPU ticks and page faults so far; None without /proc."""
    return parse_times_and_faults(_read(path))


def process_figures(before, after):
    """What the process's threads did between two process_sample()s: user and system CPU seconds, minor and major
    page faults (None where either sample is missing)."""
    if before is None or after is None:
        return {"process_user_seconds": None, "process_system_seconds": None, "process_minor_faults": None,
                "process_major_faults": None}
    return {"process_user_seconds": (after["user_ticks"] - before["user_ticks"]) / CLOCK_TICKS,
            "process_system_seconds": (after["system_ticks"] - before["system_ticks"]) / CLOCK_TICKS,
            "process_minor_faults": after["minor_faults"] - before["minor_faults"],
            "process_major_faults": after["major_faults"] - before["major_faults"]}


def parse_proc_stat_cpu(text):
    """The machine's `cpu` line of /proc/stat: every CPU's ticks by state (user nice system idle iowait irq softirq
    steal ...); steal is time the hypervisor ran something else while this guest's CPU wanted to run."""
    for line in (text or "").splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:]]
            ticks += [0] * (8 - len(ticks))
            return {"steal_ticks": ticks[7], "idle_ticks": ticks[3] + ticks[4], "all_ticks": sum(ticks[:8])}
    return None


def machine_sample(path="/proc/stat"):
    """Every CPU's ticks so far (parse_proc_stat_cpu); None without /proc."""
    return parse_proc_stat_cpu(_read(path))


def machine_figures(before, after):
    """Between two machine_sample()s, over all CPUs: the seconds the hypervisor stole from this guest, and the
    seconds the CPUs were busy (neither idle nor waiting for I/O). None where either sample is missing."""
    if before is None or after is None:
        return {"machine_steal_seconds": None, "machine_busy_seconds": None}
    steal = after["steal_ticks"] - before["steal_ticks"]
    busy = (after["all_ticks"] - before["all_ticks"]) - (after["idle_ticks"] - before["idle_ticks"])
    return {"machine_steal_seconds": steal / CLOCK_TICKS, "machine_busy_seconds": busy / CLOCK_TICKS}


class GcClock:
    """Times Python's garbage collections (gc.callbacks) from its creation; take() returns the seconds and the
    collections since the last take. close() stops timing."""

    def __init__(self):
        self._seconds, self._count, self._started = 0.0, 0, None
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase, info):
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self._seconds += time.perf_counter() - self._started
            self._count += 1
            self._started = None

    def take(self):
        out = {"gc_seconds": self._seconds, "gc_collections": self._count}
        self._seconds, self._count = 0.0, 0
        return out

    def close(self):
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)


class SyncClock:
    """Times the calls that make the host wait for the GPU: wraps each (owner, attribute, label) of `targets` (the
    harness passes torch.cuda.Stream.synchronize, torch.cuda.Event.synchronize, torch.cuda.synchronize and
    torch.Tensor.item) so that take() returns their wall seconds and calls since the last take, by label. An owner
    without the attribute is skipped. close() restores them. Waits inside torch's C++ (a copy to the CPU, .tolist(),
    a tensor's truth value) are not seen: the profiler's runtime calls show those (profile_summary.py)."""

    def __init__(self, targets):
        self._patched = []
        self._seconds, self._calls = {}, {}
        for owner, attr, label in targets:
            fn = getattr(owner, attr, None)
            if fn is None or not callable(fn):
                continue
            setattr(owner, attr, self._timed(fn, label))
            self._patched.append((owner, attr, fn))

    def _timed(self, fn, label):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._seconds[label] = self._seconds.get(label, 0.0) + time.perf_counter() - t0
                self._calls[label] = self._calls.get(label, 0) + 1
        return timed

    def take(self):
        out = {"sync_seconds": sum(self._seconds.values()), "sync_calls": sum(self._calls.values()),
               "sync_seconds_by_call": {k: self._seconds[k] for k in sorted(self._seconds)},
               "sync_calls_by_call": {k: self._calls[k] for k in sorted(self._calls)}}
        self._seconds, self._calls = {}, {}
        return out

    def close(self):
        for owner, attr, fn in reversed(self._patched):
            setattr(owner, attr, fn)
        self._patched = []


def threads_cpu_seconds(task_dir="/proc/self/task"):
    """{thread name: CPU seconds} summed over this process's threads of that name (None where /proc is absent)."""
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return None
    out = {}
    for tid in tids:
        stat = parse_stat(_read(os.path.join(task_dir, tid, "stat")))
        if stat:
            out[stat[0]] = out.get(stat[0], 0.0) + stat[1] / CLOCK_TICKS
    return out


def cpu_seconds_of_threads(before, after, prefix):
    """CPU seconds spent between two threads_cpu_seconds() maps by the threads whose name starts with `prefix`
    (autograd's device threads are pt_autograd_<device>); None where a map is missing."""
    if before is None or after is None:
        return None
    return sum(seconds - before.get(name, 0.0) for name, seconds in after.items() if name.startswith(prefix))


def busiest_threads(before, after, top=8):
    """The `top` thread names by CPU seconds spent between two threads_cpu_seconds() maps, busiest first."""
    if before is None or after is None:
        return None
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    ranked = sorted(spent.items(), key=lambda kv: -kv[1])[:top]
    return [[name, round(seconds, 3)] for name, seconds in ranked]


def reference_work(n=20000):
    """A fixed piece of pure-Python work (dict stores and loads, integer arithmetic), as DeepSpeed's hooks are."""
    acc = 0
    d = dict.fromkeys(range(64), 0)
    for i in range(n):
        d[i & 63] = i
        acc += d[(i * 7) & 63]
    return acc


def reference_work_seconds(repeat=3):
    """The fastest of `repeat` timings of reference_work(): where it grows, the host runs the same Python slower."""
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        reference_work()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best


def reference_work_seconds_in_backward(torch, device):
    """reference_work_seconds() timed where a CUDA backward runs: inside a tiny backward on `device`, which torch runs
    on autograd's device thread (pt_autograd_<device>), the thread DeepSpeed's backward hooks run on, and whose speed
    the main thread's loop does not see. Returns (seconds, True where it ran on a thread other than the caller's)."""
    box = {}

    class TimedBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            box["seconds"] = reference_work_seconds()
            box["thread"] = threading.get_native_id()
            return grad

    x = torch.zeros(1, device=device, requires_grad=True)
    TimedBackward.apply(x).sum().backward()
    return box.get("seconds"), box.get("thread") not in (None, threading.get_native_id())


def timed_host_per_step(timing):
    """A rank's timing.host_per_step of its timed steps, in order (host_per_step lists every step beside step_kinds;
    step_seconds the timed ones alone)."""
    return [h for h, kind in zip(timing.get("host_per_step") or [], timing.get("step_kinds") or [])
            if kind == "timed"]


def run_loop_seconds(timing):
    """A harness result's host speed on its main thread: its rank's timing.reference_loop_seconds (a pooled
    result's), else the median reference loop over its timed steps (None: not timed). zsim validate reads the same
    (validate/deepspeed_run.cpp reference_loop_seconds)."""
    return _median_loop(timing, "reference_loop_seconds", "reference_work_seconds")


def run_autograd_loop_seconds(timing):
    """The same on autograd's device thread, where the backward's Python runs: timing.autograd_reference_loop_seconds
    (a pooled result's), else the median over its timed steps of autograd_reference_work_seconds (the loop inside a
    tiny backward, reference_work_seconds_in_backward); None: not timed (the harness before it did not)."""
    return _median_loop(timing, "autograd_reference_loop_seconds", "autograd_reference_work_seconds")


def _median_loop(timing, pooled_key, per_step_key):
    """timing[pooled_key] where a pooled result has it, else the median of per_step_key over the timed steps (None:
    no timed step has it)."""
    if timing.get(pooled_key):
        return timing[pooled_key]
    loops = [h[per_step_key] for h in timed_host_per_step(timing) if h and h.get(per_step_key)]
    return statistics.median(loops) if loops else None


def loop_us_line(samples=21):
    """The median of `samples` reference_work_seconds() in microseconds, as zsim's --set override."""
    loops = sorted(reference_work_seconds() for _ in range(samples))
    return f"--set cluster.efficiency.deepspeed_host.loop_us={loops[len(loops) // 2] * 1e6:.0f}"


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="this host's reference loop, as zsim's efficiency.deepspeed_host.loop_us")
    ap.add_argument("--samples", type=int, default=21, help="timings of the loop (their median is printed)")
    print(loop_us_line(max(1, ap.parse_args(argv).samples)))
    return 0
