"""Runs real DeepSpeed on a Hugging Face transformers model and records what zsim predicts.

    python3 validate/deepspeed/harness.py --case-dir cases/<name> --out result.json [--world W] [--steps N]
                                          [--timeout S]
    python3 validate/deepspeed/harness.py --summary result.json [...]   # one line per result (status, peaks, step)

The parent launches W rank processes (harness.py with --worker), one per rank, every rank on GPU 0 (LOCAL_RANK=0;
with W > 1 each rank is an NCCL host of its own talking over the loopback's sockets, as `zrun --share-gpu`), waits
for them with a timeout (the whole process group of every rank is killed on timeout or after one rank failed), and
merges the ranks' JSON into one result (format "zsim.deepspeed_run" version 1: README.md beside harness.py).

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
import os
import signal
import socket
import subprocess
import sys
import time

from .. import ROOT  # validate/deepspeed/
from .case import DEFAULT_SEED, DEFAULT_STEPS, DEFAULT_TIMEOUT_S, DEFAULT_WARMUP, case_summary, load_case, step_plan
from .run_json import merge_ranks, read_json, summary_line, tail_lines, write_json_atomic
from .worker import worker_main


# The entry script a rank runs (`harness.py --worker`): validate/deepspeed/harness.py, which the records cite.
HARNESS_FILE = os.path.join(ROOT, "harness.py")


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
