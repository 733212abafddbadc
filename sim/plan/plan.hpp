// Plan: the decisions one scenario implies before any op exists: data-parallel degree, process groups,
// what each rank owns (partitions), gradient buckets, the stage-3 fetch trace (prefetch, max-live,
// reuse, persistence), optimizer sub-groups and where offloaded state lives. make_schedule expands it.
#pragma once
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/plan/activation_model.hpp"
#include "sim/plan/model_shapes.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// DeepSpeed's MEMORY_OPT_ALLREDUCE_SIZE: elements per all-reduce buffer of the stage-0 fallback path.
inline constexpr Elements kAllreduceFallbackBucket = 500'000'000;

// A group of parameters used (and, in stage 3, gathered and released) together: one module, as
// DeepSpeed's hooks see it: one linear layer with its bias, one norm, the embeddings, the output
// projection. Units are numbered in forward order; a transformer layer is a run of consecutive units.
struct FetchUnit {
  std::string name;                  // "embedding", "L12.attn.q", "L12.mlp.norm", "final.norm", "head"
  int layer = -1;                    // transformer layer index, -1 for embedding / final norm / head
  std::vector<TensorShape> tensors;
  Elements params = 0;               // all parameters of the unit
  Elements persistent = 0;           // stage 3: tensors <= stage3_param_persistence_threshold, kept whole
  Elements gathered = 0;             // stage 3: params that are partitioned and all-gathered (= params - persistent)
  Elements partition = 0;            // stage 3: this rank's share of `gathered` (sum of ceil(numel / dp))
  std::vector<TensorShape> gathered_tensors;  // the tensors behind `gathered`
  bool attention_core = false;       // the attention itself (scores, softmax, values) runs before this unit
  // The MLP's elementwise activation (runtime/model/mlp.cu): mlp.up runs it after its GEMM (SwiGLU's silu(gate) * up,
  // or GeLU) and the backward's up half (GeLU: all of it); with SwiGLU, mlp.gate runs the backward's gate half.
  enum class ActivationPart { none, up, gate };
  ActivationPart activation = ActivationPart::none;
  bool is_head = false;              // the output projection (tied: no tensors of its own, uses the embedding)
  bool is_embedding = false;
  // Vectors only (a norm's weight and bias): its work is one memory-bound kernel over an activation.
  bool vectors_only() const {
    bool only = !tensors.empty();
    for (const TensorShape& t : tensors) only &= !t.is_matrix();
    return only;
  }
};

// First and last unit (forward order) of each transformer layer.
struct LayerUnits {
  int first = 0;
  int last = 0;
};

// A gradient bucket: reduced (stages 0-2: all-reduce / reduce-scatter; stage 3: reduce-scatter or
// qgZ) once the backward of unit `closes_after` has produced all its gradients.
struct GradBucket {
  int opens_at = 0;                  // unit index whose backward produces the bucket's first gradient
  int closes_after = 0;              // unit index whose backward completes the bucket
  Elements closing_elements = 0;     // the bucket's elements that unit `closes_after` produces
  Elements elements = 0;
  std::vector<TensorShape> tensors;  // the gradients in the bucket (stage 3 qgZ sizes need shapes)
  std::vector<std::pair<int, int>> members;  // (unit, tensor index in the unit) of each of `tensors`
};

// offload_param nvme: the partition of tensor `tensor` of unit `unit` read from its swap file into buffer `buffer` of
// DeepSpeed's swap-in pool (partitioned_param_swapper.py swap_in), where it stays until the unit is released.
struct SwapIn {
  int unit = 0;
  int tensor = 0;
  int buffer = 0;
};

// One step of a micro-step's trace: a forward or backward use of one unit, or the recompute of one
// checkpointed layer (which uses all the layer's units). For stage 3 it also says which units must be
// gathered for it, which to prefetch after issuing those, and which to release after the compute.
// runtime: deepspeed, stage 3: one thing DeepSpeed's coordinator does before a step's compute (deepspeed_fetch.hpp):
// an all-gather call of units (fetch_sub_module's own call, or its prefetch batch), the wait for units
// (fetch_sub_module's wait for the module's parameters), or the release of units that are gathered again before the
// compute (a checkpointed layer's recompute releasing a module that a later prefetch of the recompute gathers again).
struct FetchAction {
  enum class Kind { gather, wait, release };
  Kind kind = Kind::gather;
  std::vector<int> units;
  bool prefetch = false;  // gather: a prefetch batch
};

struct FetchStep {
  int unit = 0;                      // unit that computes (recompute: the layer's last unit)
  Phase phase = Phase::forward;      // forward, or backward (the recompute runs in the backward phase)
  bool recompute = false;            // recompute of layer `layer` (full activation checkpointing)
  int layer = -1;
  std::vector<int> uses;             // units whose parameters the step needs
  std::vector<int> fetch;            // stage 3: units gathered now (compute waits for them)
  std::vector<int> prefetch;         // stage 3: units gathered ahead of their use
  std::vector<Phase> prefetch_phase; // stage 3: the phase of each prefetched unit's next use
  std::vector<int> release;          // stage 3: units freed after the compute
  // offload_param nvme (partition_parameters.py _ensure_availability_of_partitioned_params, partitioned_param_
  // coordinator.py __prefetch_nvme_param_partitions): partitions read before this step's own fetch (swap_in with
  // async_op=False: the host waits for every read), and read ahead after its prefetch, for later fetches.
  std::vector<SwapIn> swap_in;
  std::vector<SwapIn> swap_in_ahead;
  // runtime: deepspeed, stage 3: DeepSpeed's coordinator before this step's compute, in order (the hooks of the modules
  // from the previous step's compute on); fetch and prefetch are then empty, and release holds its releases after it.
  std::vector<FetchAction> actions;
};

struct Plan {
  RuntimeKind runtime = RuntimeKind::deepspeed;  // whose schedule: DeepSpeed's calls, or zrun's own
  int stage = 0;
  // runtime deepspeed, stage 0 with bf16: the engine wraps the optimizer in BF16_Optimizer (engine.py
  // _do_optimizer_sanity_check -> BFLOAT16: no ZeRO, bf16 model, fp32 gradient accumulation), which partitions the
  // fp32 master and optimizer state over the data-parallel ranks like ZeRO-1 and all-gathers the updated bf16 flat
  // buffer after the step (bf16_optimizer.py update_lp_params -> all_gather_dp_groups).
  bool bf16_optimizer = false;
  int dp = 1;                        // data-parallel degree (= world size: no tensor/pipeline parallelism)
  int nodes = 1;
  int gpus_per_node = 1;
  DType dtype = DType::bf16;         // training dtype of params, grads and their collectives
  Bytes elem_bytes = 2;
  // The dtype of the gradient reductions (DeepSpeed's communication_data_type; by default the training dtype).
  // When it differs, each reduction casts its gradients into a buffer of this dtype and back (stage_1_and_2.py
  // allreduce_bucket / gradient_reduction_w_predivide, stage3.py __avg_scatter_grads).
  DType comm_dtype = DType::bf16;

  ProcessGroup world;                // all ranks
  ProcessGroup hpz;                  // zero_hpz_partition_size consecutive ranks within a node
  ProcessGroup intra_node;           // the ranks of one node
  ProcessGroup inter_node;           // one rank per node (same local rank)

  ModelShapes shapes;
  ActivationBytes activations;
  Elements params = 0;               // model parameters
  Elements largest_module_params = 0;
  std::vector<FetchUnit> units;      // forward order: embedding, layer modules, final norm, head
  std::vector<LayerUnits> layers;    // per transformer layer: its units
  bool tied_head = false;            // the head use also needs the embedding unit
  bool checkpointing = false;        // full activation checkpointing: a recompute step per layer

  // What each rank holds persistently, in elements.
  Elements param_partition = 0;      // stages 1-2: ceil(params / dp); stage 3: sum of unit partitions
  Elements persistent_params = 0;    // stage 3: sum of unit persistent params (kept whole on every rank)
  Elements optimizer_partition = 0;  // params whose optimizer state this rank holds (stage 0: all;
                                     // 1-2: ceil(params / dp); 3: sum over tensors of ceil(numel / dp))

  std::vector<GradBucket> buckets;   // backward order
  std::vector<Elements> allgather_chunks;  // stages 1-2: post-step parameter all-gathers
  std::vector<Elements> sub_groups;  // optimizer sub-groups over this rank's partition (sub_group_size)
  // Stage 3, offload_param nvme: the first element of this rank's partition that lives on NVMe. DeepSpeed keeps whole
  // sub-groups in pinned CPU memory while their running total stays within offload_param.max_in_cpu (stage3.py
  // _create_param_groups_fp16_flat_cpu_memory, _move_to_flat_buffer: "swapping in ... permanently to CPU"), so
  // [0, nvme_params_from) is in CPU memory and the rest on NVMe. optimizer_partition when nothing is on NVMe.
  Elements nvme_params_from = 0;
  // offload_param nvme: DeepSpeed's swap-in pool, allocated once (pinned) whether or not a partition is on NVMe:
  // offload_param.buffer_count buffers of buffer_size elements, io-aligned. 0 buffers without offload_param nvme.
  int param_swap_buffers = 0;
  Elements param_swap_buffer_elements = 0;
  // Stage 3, offload_optimizer nvme: the optimizer swapper's pinned fp32 pool (optimizer_utils.py OptimizerSwapper:
  // SwapBufferManager of offload_optimizer.buffer_count buffers of the largest sub-group's io-aligned elements),
  // allocated once. A sub-group's swap-in takes 3 of them (master, exp_avg, exp_avg_sq) and one for its gradients;
  // the backward's gradient swap-out stages through all of them. 0 buffers otherwise.
  int optimizer_swap_buffers = 0;
  Elements optimizer_swap_buffer_elements = 0;
  std::vector<FetchStep> trace;      // one micro-step: forward, then backward (with recomputes); the
                                     // fetch/prefetch/release decisions only for stage 3

  // ZeRO++ / LoCo / sequential all-gather, as they apply (stage 3 only; qgZ also needs > 1 node).
  bool qwz = false;
  bool qgz = false;
  bool hpz_enabled = false;          // zero_hpz_partition_size > 1
  bool loco = false;
  double loco_err_beta = 0.8;        // zeropp_loco_param.err_beta (when loco)
  int loco_reset_T = 1024;           // zeropp_loco_param.reset_T (when loco)
  bool sequential_allgather = false;
  bool all_reduce_fetch = false;     // stage3_use_all_reduce_for_fetch_params
  bool overlap_comm = false;
  bool reduce_scatter = true;

  // Adam state per parameter: fp32 master copy + exp_avg + exp_avg_sq = 12 bytes (ZeRO's K); 8 for fp32 training
  // at stage 0, where the fp32 params are the master (ZeRO stages clone a master even in fp32: plan.cpp).
  Bytes optimizer_bytes_per_param = 12;

  OffloadDevice optimizer_device = OffloadDevice::none;
  OffloadDevice param_device = OffloadDevice::none;  // stage 3 only

  // What the plan did differently from what the scenario asked, in the user's words (for the report).
  std::vector<std::string> warnings;
};

// Throws std::invalid_argument for a scenario the plan cannot express (the scenario validator should
// have rejected it first: zero GPUs, hpZ size not dividing gpus_per_node, ...).
Plan make_plan(const Scenario& s);

}  // namespace zsim
