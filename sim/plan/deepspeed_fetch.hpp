// runtime: deepspeed, stage 3: the parameter gathers and releases of DeepSpeed 0.14.5's
// PartitionedParameterCoordinator (runtime/zero/partitioned_param_coordinator.py) as its module hooks
// (runtime/zero/parameter_offload.py) drive it over a Hugging Face transformers model: which parameters each
// fetch_sub_module call gathers, which its prefetch batch gathers, and which release_sub_module frees.
#pragma once
#include <vector>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct Plan;
struct FetchStep;

// Fills each step of `trace` (one micro-step as make_trace lays it out: the forward over the units, the backward in
// reverse with a recompute step before each checkpointed layer's backward) with DeepSpeed's coordinator actions
// (FetchStep::actions) and its releases (FetchStep::release), and leaves fetch / prefetch empty.
//
// The hooks, in the order transformers' modeling code (5.17) and torch's autograd fire them: every module's
// forward pre-hook calls fetch_sub_module and its forward post-hook release_sub_module; in the backward, a module's
// pre-backward function (on its outputs) calls fetch_sub_module and its post-backward function (on its inputs)
// release_sub_module, reverse to the forward. Modules without parameters of their own (the model, its base model,
// the decoder layer, the attention and MLP containers, the activation, the rotary embedding or the dropout after the
// embeddings) are hooked too: they take a step of the coordinator's trace and issue prefetches. The embedding's
// input (token ids) needs no gradient, so its post-backward never fires: it stays gathered until the optimizer
// step's release_and_reset_all (here: released after the micro-step's last backward step). With non-reentrant
// activation checkpointing (transformers' gradient_checkpointing_enable), a layer's backward begins with the
// pre-backward hooks of the layer, its MLP and its last module, whose backward unpacks a saved tensor and runs the
// layer's forward again (forward hooks, fetch_sub_module(forward=True) of each module) until torch's early stop in
// its last module's forward, whose post-forward hook never fires.
//
// The coordinator itself, as its code has it: fetch_sub_module gathers the module's parameters that are not
// available in one call, waits for them, pops their entries from the front of the parameter queue (the trace's
// parameters in module order), then prefetches from the queue until the numel taken reaches
// min(stage3_max_live_parameters - __n_available_params, stage3_prefetch_bucket_size) (the last entry may overshoot
// it), skipping available ones, in one call. release_sub_module frees a module's parameters unless the prefetch
// already looked past this step for them, or one of the modules within stage3_max_reuse_distance numel of the
// trace from the next step on uses them. __n_available_params adds a gather's numel and subtracts a release's;
// reset_step (after each backward) sets it to 0 and the step's release_and_reset_all subtracts what is still
// available, persistent parameters included, so a micro-step starts below 0 (solved here as a fixed point).
//
// A unit stands for a module and its tensors for its parameters (a module's are always gathered together here).
// Not modelled: offload_param nvme (make_trace's own trace is used), gradient accumulation's later micro-steps
// (DeepSpeed keeps the embedding gathered across them and starts them at 0), GPT-2's module structure beyond the
// containers above (its fused c_attn is zsim's q, k and v units; its wte and wpe one unit).
void deepspeed_fetch_trace(const Plan& p, const ZeroConfig& z, std::vector<FetchStep>& trace);

}  // namespace zsim
