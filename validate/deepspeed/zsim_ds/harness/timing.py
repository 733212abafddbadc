"""Step-time instruments beside the timed steps: torch's profiler with DeepSpeed's hook and optimizer methods
annotated as ds.<Class>.<method> ranges (the host's own figures: host_cpu.py; its waits for the GPU: sync_debug.py)."""
import functools
import os


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
