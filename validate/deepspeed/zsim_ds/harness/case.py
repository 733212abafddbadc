"""A case folder (case.json, config.json, ds_config.json, scenario.yaml) as the harness reads it, the result's
`case` block, and the plan of steps (which step records what)."""
import os

from .run_json import read_json


DEFAULT_STEPS = 8


DEFAULT_WARMUP = 3


DEFAULT_TIMEOUT_S = 600


DEFAULT_SEED = 1234


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
    leaf = case.get("z3_leaf_modules")
    if leaf is not None and not (isinstance(leaf, list) and all(isinstance(n, str) and n.isidentifier() for n in leaf)):
        raise ValueError(f"{p}: key 'z3_leaf_modules' must be a list of module class names, got {leaf!r}")
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
        "z3_leaf_modules": list(case.get("z3_leaf_modules") or []),
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
