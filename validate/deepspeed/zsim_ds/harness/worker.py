"""One rank: patches the collectives, builds the model as a user does, deepspeed.initialize()s it and runs the steps
(step_plan), recording memory, collectives, buffers, timing and the saved tensors into its JSON after every stage."""
import copy
import os
import sys
import time
import traceback

from . import host_cpu, sync_debug
from .buffers import deepspeed_buffers, saved_activation_inventory
from .case import load_case, step_plan
from .collectives import (MAX_SEQUENCE, REC, aggregate_calls, install_collective_recorder, sequence_of,
                          totals_by_phase_op)
from .memory import (MARK_FUNCS, _device_memory, _is_oom, _mem, _stats, apply_gpu_memory_cap, start_memory_history,
                     stop_memory_history)
from .run_json import STDERR_TAIL_LINES, median, write_json_atomic
from .timing import start_profiler, stop_profiler


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


def _tied_head(model):
    """Whether the output projection is the input embedding's parameter (Gemma-2, GPT-2, Qwen3's small ones tie it;
    transformers ties at build, zero.Init included); None where the model has no such accessors."""
    try:
        out, inp = model.get_output_embeddings(), model.get_input_embeddings()
    except Exception:  # noqa: BLE001 -- a model without them: unknown
        return None
    if out is None or inp is None:
        return None
    return getattr(out, "weight", None) is getattr(inp, "weight", None)


def set_leaf_modules(model, names):
    """deepspeed.utils.set_z3_leaf_modules(model, [the classes named]) as a user of a mixture of experts calls it
    (DeepSpeed >= 0.13, utils/z3_leaf_module.py: stage 3 then hooks each such module as one, fetching all its
    parameters on entering it and reducing their gradients once its backward is done): each class looked up by name
    among the model's own modules' classes. What it set, for the rank's `model` block (None where the case names none);
    raises ValueError naming the model's classes where a name matches none."""
    if not names:
        return None
    classes = {}
    for m in model.modules():
        classes.setdefault(type(m).__name__, type(m))
    missing = [n for n in names if n not in classes]
    if missing:
        raise ValueError(f"z3_leaf_modules: no module of class {', '.join(missing)} in {type(model).__name__} "
                         f"(its module classes: {', '.join(sorted(classes))})")
    try:
        from deepspeed.utils import set_z3_leaf_modules
    except ImportError as e:
        raise RuntimeError(f"z3_leaf_modules: this DeepSpeed has no deepspeed.utils.set_z3_leaf_modules "
                           f"(DeepSpeed 0.13 and later): {e}") from None
    wanted = [classes[n] for n in names]
    leaves = set_z3_leaf_modules(model, wanted)
    ids = {id(m) for m in leaves}
    paths = [n for n, m in model.named_modules() if id(m) in ids]
    return {"classes": [f"{c.__module__}.{c.__qualname__}" for c in wanted],
            "call": f"deepspeed.utils.set_z3_leaf_modules(model, [{', '.join(names)}])",
            "modules": len(leaves), "module_paths": paths[:4] + (["..."] if len(paths) > 4 else []),
            "parameters": int(sum(getattr(p, "ds_numel", p.numel()) for m in leaves for p in m.parameters()))}


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
        "model_type": getattr(model.config, "model_type", None),
        "tied_word_embeddings": _tied_head(model),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "parameters": int(sum(getattr(p, "ds_numel", p.numel()) for p in params)),
        "parameter_tensors": len(params),
        "dtype_at_build": str(params[0].dtype).replace("torch.", "") if params else None,
        "use_cache": getattr(model.config, "use_cache", None),
        # A mixture of experts' backend as transformers resolved it (eager's loop over the experts hit, grouped_mm,
        # batched_mm; transformers 5: config._experts_implementation); None for a dense model or an older transformers.
        "experts_implementation": getattr(model.config, "_experts_implementation", None),
        "gradient_checkpointing": gc,
    }
    # Leaf modules (issue 57): after the model is built, before deepspeed.initialize registers stage 3's hooks.
    res["model"]["z3_leaf_modules"] = set_leaf_modules(model, case.get("z3_leaf_modules") or [])
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
