// The Python thread's time to run a step of DeepSpeed + PyTorch eager on transformers' modeling code, per op of a
// schedule built for runtime deepspeed (ScheduleMeta::framework "deepspeed"), priced at the profile's
// efficiency.deepspeed_host (fitted by validate/deepspeed/fit_host.py from the profiled micro-runs of list fit;
// docs/deepspeed-time.md). Eager PyTorch launches each kernel as its Python line runs, so the host, not the GPU,
// binds a step whose kernels are short: the engine starts an op no earlier than the host has begun it and ends its
// fixed part no earlier than the host has finished it (sim/engine/simulate.cpp, as for efficiency.host_issue). Pure.
//
// Where the host's time goes (what DeepSpeed 0.14.5 and transformers 5.17 run, per micro-step):
//   forward     each decoder layer: {llama,gpt2}_forward_layer_us (+ checkpoint_forward_layer_us under gradient
//               checkpointing: torch.utils.checkpoint's wrapper), split over the layer's forward ops; the rest of the
//               model (embedding, final norm, head, the fp32 loss, DeepSpeedEngine.forward): forward_fixed_us over
//               the ops outside the layers;
//   backward    the same with {llama,gpt2}_backward_layer_us and backward_fixed_us (autograd's nodes), and at
//               stages 1-2 the pass's parameter tensors x stage12_reduce_param_us: stage_1_and_2.py's
//               reduce_ready_partitions_and_remove_grads for each (the bucket's bookkeeping, the gradient's copy into
//               the bucket, copy_grads_in_partition), in stage 2's gradient hooks every micro-step, in stage 1's
//               reduce_gradients after the boundary's backward only (engine.py allreduce_gradients), there at
//               stage1_reduce_param_us when given (the same loop on the main thread, measured far cheaper);
//   offload     stages 1-2 with the optimizer on the CPU: stage12_offload_param_us on each parameter tensor's
//               `.to_fp32` op at the boundary (copy_grads_in_partition: the float64 norm, the overflow check that
//               waits for the GPU, the cast and the copy down), the host waiting for the GPU before it;
//   eager       a layer with eager attention adds eager_forward_layer_us to its forward and its recompute and
//               eager_backward_layer_us to its backward (transformers' eager_attention_forward's ops and their
//               autograd nodes, beyond SDPA's one call);
//   recompute   recompute_layer_us per layer (the checkpointed forward again, under the unpack hook);
//   stage 3     each submodule transformers calls runs DeepSpeed's pre- and post-forward hooks (the fetch
//               coordinator: parameter_offload.py, partitioned_param_coordinator.py) in forward
//               (stage3_forward_module_us) and its backward hooks (stage3_backward_module_us): 13 per
//               decoder layer in both families (Llama: the layer, 2 norms, attention, q, k, v, o, MLP, gate, up, down,
//               act_fn; GPT-2: the block, 2 norms, attention, c_attn, c_proj, 2 dropouts, MLP, c_fc, act, c_proj,
//               dropout), and the model's own (Llama 6: the causal LM, the model, embedding, rotary embedding, norm,
//               head; GPT-2 7: the LM head model, the model, wte, wpe, dropout, ln_f, head);
//               under gradient checkpointing a layer's 13 in its checkpointed forward (transformers 5.17's default
//               is non-reentrant: modeling_utils.py gradient_checkpointing_enable, use_reentrant False; with
//               use_reentrant True it runs under torch.no_grad, where the autograd Functions DeepSpeed's backward
//               hooks wrap each output in record no node), measured cheaper than a plain forward's and fitted apart,
//               are stage3_checkpoint_forward_module_us each, and in its recompute (with autograd, in backward)
//               stage3_recompute_module_us; either, not given, is stage3_forward_module_us (the model's own modules
//               keep stage3_forward_module_us);
//   step        step_fixed_us + parameter tensors x step_param_us (stage 3: stage3_step_param_us): DeepSpeed's
//               optimizer step, its gradient norm over each tensor and the optimizer's Python, on the step's first
//               optimizer op.
// The host's speed, per thread (docs/deepspeed-time.md, "Two threads, two speeds"): the forward's and the step's
// figures and stage 1's reduce_gradients run on the main thread, at DeepSpeedHost::host_speed_scale (loop_us); the
// backward's, the recompute's, stage 3's backward hooks and stage 2's gradient hooks (with their offload copies) on
// autograd's device thread, at autograd_host_speed_scale (autograd_loop_us, else loop_us).
// And where the host waits for the GPU within a step (HostIssue::waits_for_gpu): at stage 3 after each backward,
// DeepSpeed's gradient epilogue (stage3.py independent_gradient_partition_epilogue, from engine.py
// allreduce_gradients) synchronizes its reduce-and-partition stream, which waited for the compute stream, so the ops
// after a backward (the next micro-step's forward, or the optimizer step) are issued once the backward's work is done.
// Stages 0-2 wait only at the step's end (the engine's step boundary: engine.py's ThroughputTimer synchronizes the
// device in step() and again as the next forward begins, with the default timers config). Not modelled: stage 2 with
// overlap_comm, which synchronizes in its epilogue too, and, with gradient accumulation, the ThroughputTimer's
// synchronisations between micro-steps (step() and forward() run every micro-step).
#pragma once
#include <vector>

#include "sim/engine/host_issue.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Submodules whose hooks DeepSpeed's stage 3 runs: per decoder layer, and the model's own.
inline constexpr int kHooksPerLayer = 13;
int model_level_modules(const ScheduleModel& m);

// The parameter tensors DeepSpeed's optimizer walks, as transformers declares them (GPT-2's c_attn is one weight and
// one bias for q, k and v, which the schedule's units hold apart): the model's, or one decoder layer's (layer -1:
// the model's own, outside the layers).
int hf_parameter_tensors(const ScheduleModel& m);
int hf_parameter_tensors(const ScheduleModel& m, int layer);

// Whether a decoder layer runs eager attention: its attention core's kernels are the softmax over the s x s scores
// (ModelUnit::hbm_kind "softmax"; SDPA's fused kernel has none).
bool eager_attention(const ScheduleModel& m, int layer);

// Whether the schedule is one the DeepSpeed host model prices (framework "deepspeed" and a profile with figures).
bool deepspeed_host_applies(const Schedule& s, const ClusterSpec& c);

// Every op's host time (all 0 where it does not apply).
std::vector<HostIssue> deepspeed_host_issue(const Schedule& s, const ClusterSpec& c);

}  // namespace zsim
