// The schedule builder's shared state: class Builder, whose parts live one concern a file (build_*.cpp, and
// schedule_builder.cpp for the op helpers, init and the step loop). Private to sim/plan: make_schedule
// (schedule_builder.hpp) is the interface. Semantics: docs/schedule-semantics.md.
#pragma once
#include "sim/plan/attention_flops.hpp"
#include "sim/plan/grad_reduction.hpp"
#include "sim/plan/kernel_launches.hpp"
#include "sim/plan/offload_uses.hpp"
#include "sim/plan/param_swap_in.hpp"
#include "sim/plan/quantization.hpp"
#include "sim/plan/tensor_layout.hpp"
#include "sim/plan/transformers_kernels.hpp"
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "sim/plan/plan.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim::build {

inline Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

constexpr Bytes kFp32 = 4;

class Builder {
 public:
  Builder(const Scenario& s, const Plan& p);

  Schedule build(int steps, int built_micro_steps);

 private:
  // ---- op helpers, init (schedule_builder.cpp) ----------------------------------------------------------------
  Op base(OpKind k, std::string name, Phase ph, int stream, std::vector<OpId> deps, int layer = -1);
  OpId alloc(std::string buffer, Tier tier, MemCategory cat, const std::string& detail, Bytes bytes,
             Phase ph, int stream, std::vector<OpId> deps = {}, int layer = -1);
  OpId release(OpId alloc_id, Phase ph, int stream, std::vector<OpId> deps = {});
  OpId compute(std::string name, ComputeKind what, Phase ph, std::vector<OpId> deps, Flops flops,
               Bytes hbm, Elements elements, int layer = -1, Device dev = Device::gpu, int stream = -1);
  OpId collective(std::string name, CollectiveKind what, int group, Bytes bytes, Bytes scale_bytes,
                  DType dt, Phase ph, int stream, std::vector<OpId> deps, int layer = -1);
  OpId copy(std::string name, CopyKind what, Bytes bytes, bool pinned, Phase ph, int stream,
            std::vector<OpId> deps, int layer = -1);
  int stream(const char* name) { return sch_.stream(name); }
  const std::string& tag() const;
  Tier tier_of(OffloadDevice d) const {
    return d == OffloadDevice::nvme ? Tier::nvme : d == OffloadDevice::cpu ? Tier::cpu : Tier::gpu;
  }
  bool optimizer_offloaded() const { return p_.optimizer_device != OffloadDevice::none; }

  // ---- init: persistent model states (schedule_builder.cpp) ---------------------------------------------------
  void init();

  void init_zero12_offload_buffers();

  // ---- per-unit compute figures (build_compute_figures.cpp) ---------------------------------------------------
  Flops gemm_flops(int u) const;
  Flops forward_flops(int u) const {
    return gemm_flops(u) + (p_.units[u].attention_core ? attention_core_flops(s_.model, s_.training).forward : 0);
  }
  Flops backward_flops(int u) const {
    return 2 * gemm_flops(u) + (p_.units[u].attention_core ? attention_core_flops(s_.model, s_.training).backward : 0);
  }
  Bytes unit_hbm(int u) const;
  // The loss over the logits (tokens x vocab), as a fused cross-entropy moves them (zrun's head_loss.cu): the
  // forward reads them once (its per-row results are negligible), the backward reads them and writes their
  // gradient in place.
  Bytes logits_bytes() const { return tokens_ * s_.model.vocab * e_; }
  Bytes activation_hbm(int u, bool backward) const;
  std::optional<PassBytes> transformers_hbm(int u) const;  // runtime deepspeed: transformers' eager kernels
  AttentionScoresBytes attention_scores() const;  // eager attention's s x s traffic, per runtime
  Bytes forward_hbm(int u) const;
  Bytes backward_hbm(int u) const;
  // Of those bytes, what eager attention's core GEMMs move (ComputeOp::gemm_hbm_bytes: a GEMM model that prices the
  // unit's gemm_calls counts it in their operand traffic).
  Bytes forward_gemm_hbm(int u) const {
    return p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).forward_gemm : 0;
  }
  Bytes backward_gemm_hbm(int u) const {
    return p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).backward_gemm : 0;
  }
  Bytes layer_forward_gemm_hbm(int layer) const;
  // Of a unit's FLOPs, those of flash attention's fused kernel (ComputeOp::fused_attention_flops: the attention core on
  // attn.o where the model's attention is flash; eager attention's core is GEMM calls).
  bool flash_core(int u) const { return p_.units[u].attention_core && s_.model.attention == Attention::flash; }
  Flops forward_fused_attention_flops(int u) const {
    return flash_core(u) ? attention_core_flops(s_.model, s_.training).forward : 0;
  }
  Flops backward_fused_attention_flops(int u) const {
    return flash_core(u) ? attention_core_flops(s_.model, s_.training).backward : 0;
  }
  Flops layer_forward_fused_attention_flops(int layer) const;
  Flops layer_forward_flops(int layer) const;
  Bytes layer_forward_hbm(int layer) const;
  Elements flat_offset(int u, int k) const;
  // Stages 1-2 (and BF16_Optimizer at stage 0): the flat 16-bit buffers hold N partitions (DeepSpeed's padding); stage 0
  // the model.
  Elements whole_flat() const {
    return p_.stage == 0 && !p_.bf16_optimizer ? p_.params : p_.param_partition * p_.dp;
  }
  bool in_head(int u) const { return u > 0 && p_.units[u].layer < 0 && !p_.units[u].is_embedding; }
  bool first_of_layer(int u) const { return p_.units[u].layer >= 0 && p_.layers[p_.units[u].layer].first == u; }

  // ---- stage 3 fetch calls (build_stage3_fetch.cpp) -----------------------------------------------------------
  // DeepSpeed's PartitionedParameterCoordinator.fetch_sub_module gathers the current module's params in
  // one __all_gather_params call, waits for them, then gathers the prefetch batch in one more call.
  // __all_gather_params_ splits a call into the params with an hpZ secondary partition and those
  // without, each one all_gather_coalesced (partition_parameters.py). That takes DeepSpeed's
  // single-parameter path for one tensor (all-gather straight into the parameter's padded buffer) and
  // otherwise concatenates the partitions into a flat buffer, all-gathers it, and at the wait copies
  // each parameter out of it (AllGatherCoalescedHandle.wait). qwZ quantizes the (concatenated)
  // partition, all-gathers the int8 data and the fp32 scales as two collectives, and dequantizes at the
  // wait. stage3_allgather_sequential gathers every tensor with its own single-parameter call.
  struct Member {
    int unit = 0;
    Phase phase = Phase::forward;  // phase of the use it is gathered for
    bool prefetch = false;
  };
  // One all_gather_coalesced call on one group. Its collectives are issued at once; its wait (dequantize,
  // copy-out) runs when the first of its units is needed; its temporaries live until the last one is
  // (the handle stays in DeepSpeed's inflight registry until then).
  struct Call {
    std::vector<Member> members;
    std::vector<TensorShape> tensors;
    std::vector<std::pair<int, int>> ids;  // per tensor: (unit, index in the unit's tensors)
    std::vector<Elements> slot;            // per tensor: its offset in this rank's part of the call (elements)
    std::vector<Elements> chunk;           // per tensor: the elements each rank contributes (its partition or slice)
    bool sec = false;                      // hpZ: gathered from the secondary partitions on the hpz group
    std::map<int, OpId> staged;            // offload_param: unit -> its partition staged on the GPU (param_h2d)
    std::string name;           // "fwd.L3.attn.q" or, for a batch, "fwd.L3.attn.q+6" (6 more units)
    Phase phase = Phase::forward;
    int layer = -1;
    int n = 1;                  // ranks in the group
    bool flat = false;          // more than one tensor: flat buffer, copy-out at the wait
    bool quantized = false;
    Elements part = 0;          // this rank's elements in the call
    OpId gathered = -1;         // the call's last collective
    OpId flat_buf = -1;         // coalesced calls: the flat buffer the tensors are copied out of at the wait
    OpId qwz = -1;              // qwZ: [own int8 | own scales | gathered int8 (rank-major) | gathered scales]
    OpId last_read = -1;        // last op that reads the temporaries
    std::vector<OpId> temps;    // allocs freed when every member has been waited for
    bool waited = false;
    int unwaited = 0;           // members not yet waited for
  };
  struct Live {
    OpId done = -1;             // op after which the gathered params are usable (set at the wait)
    std::vector<OpId> buffers;  // allocs of the unit's gathered storage
    std::vector<std::pair<OpId, Bytes>> where;  // per gathered tensor, in order: its buffer and byte offset
    std::vector<int> pending;   // calls it arrives by, not yet waited for by this unit
  };

  // ---- version-2 buffer uses: which bytes of which buffers an op reads and writes (build_buffer_uses.cpp) -----
  void use(OpId op, OpId buffer, Bytes offset, Bytes bytes, Role role, Access access, int unit = -1,
           int tensor = -1);
  void use_whole(OpId op, OpId buffer, Role role, Access access) {
    use(op, buffer, 0, sch_.ops[buffer].mem.bytes, role, access);
  }
  void use_params(OpId op, int u);
  void use_grads(OpId op, int u, size_t b);

  // hpZ (partition_parameters.py all_gather_coalesced: `use_secondary_tensor = params[0].ds_secondary_tensor is not
  // None`): a unit is gathered from its secondary partition on the hpz group once this step's has been kept, that is
  // from the first forward's release on (stage3.py _post_step invalidates them after the step): the backward's
  // gathers, and the forward's of later micro-steps.
  bool secondary(const Member& m) const { return p_.hpz_enabled && hpz_buffers_.count(m.unit) > 0; }
  // DeepSpeed's secondary partition of a tensor: its numel padded to the data-parallel world (_aligned_size), split
  // over the hpz group (_partition_param_sec: secondary_partition_size = aligned // num_ranks_in_param_group).
  Elements secondary_numel(const TensorShape& t) const { return ceil_div(t.numel(), p_.dp) * p_.dp / p_.hpz.size; }
  std::string gathered_name(const Member& m, int call) const;

  void fetch(const std::vector<Member>& members, OpId after);

  std::vector<std::pair<int, int>> gathered_ids(int u) const;
  // offload_param: where tensor k of unit u starts in the unit's staged partition (its gathered tensors' chunks, in
  // order, as params.partition has them).
  Elements staged_offset(int u, int k) const {
    return gathered_before(u, k, [&](const TensorShape& t) { return partition_numel(t.numel(), p_.dp); });
  }
  // The elements `per_tensor` gives the gathered tensors of unit u before tensor k (a tensor's place in a buffer that
  // holds one piece of each gathered tensor, in order).
  template <class PerTensor>
  Elements gathered_before(int u, int k, const PerTensor& per_tensor) const {
    Elements at = 0;
    for (int j = 0; j < k; ++j)
      if (layout_.gathered[u][j] >= 0) at += per_tensor(p_.units[u].tensors[j]);
    return at;
  }
  // A piece of a range of this rank's partition in the buffer that holds it: `at` bytes into `buffer`, `from` bytes
  // into the range.
  struct PartitionPiece {
    OpId buffer = -1;
    Bytes at = 0, bytes = 0, from = 0;
  };
  std::vector<PartitionPiece> partition_pieces(Elements first, Elements n) const;
  // The pieces of tensor (u, k)'s partition.
  std::vector<PartitionPiece> tensor_pieces(int u, int k) const {
    return partition_pieces(layout_.partition[u][k], partition_numel(p_.units[u].tensors[k].numel(), p_.dp));
  }
  // This rank's partition of tensor (u, k) in params.partition (and params.partition.nvme).
  void use_partition(OpId op, int u, int k, Role role, Access access) {
    for (const PartitionPiece& q : tensor_pieces(u, k)) use(op, q.buffer, q.at, q.bytes, role, access, u, k);
  }
  BufferUse sub_group_params(Elements first, Elements n, Role role = Role::input, Access access = Access::read) const;
  bool sub_group_on_nvme(Elements first) const { return partition_nvme_ >= 0 && first >= p_.nvme_params_from; }
  void use_source(const Call& c, OpId op, size_t i, Role role, Access access);
  std::pair<OpId, OpId> stage_secondary(Call& c, int u, const std::string& what, std::vector<OpId> deps);

  // offload_param nvme: one swap_in call (partitioned_param_swapper.py swap_in: an aio read per parameter, into its
  // buffer, all submitted before the swapper waits) reads `reads` into the swap-in pool: one nvme_read op with a pair
  // per partition, after the previous step's compute and after the copy up of each buffer's previous holder.
  Bytes swap_slot_at(int buffer) const { return e_ * p_.param_swap_buffer_elements * buffer; }
  void read_swap_ins(const std::vector<SwapIn>& reads, Phase ph, OpId after);

  void issue_call(const std::vector<Member>& members, std::vector<std::pair<int, int>> ids, OpId after);

  void wait_call(int id, OpId after);

  void keep_secondary(int u, OpId gathered);
  Elements hpz_tail(int u) const;

  void await_unit(int u, OpId after);

  // runtime deepspeed: the step's FetchStep::actions (DeepSpeed's coordinator calls, waits and early releases), each
  // after the previous step's compute.
  void run_fetch_actions(const FetchStep& st);

  // ---- gradient reduction: buckets, ZeRO-1/2 calls (build_zero12_reduce.cpp) ----------------------------------
  bool reduces_this_micro_step() const { return p_.stage >= 2 || last_micro_; }

  void open_current_bucket(int u);

  void flush_bucket_free();

  void reduce_current_bucket(int u, OpId bwd);

  // DeepSpeed reduces stage 0 (buffered all-reduce fallback) and stage 1 without overlap_comm after the
  // whole backward pass, at the gradient-accumulation boundary; otherwise from the gradient hooks.
  bool defer_reductions() const { return p_.stage == 0 || (p_.stage == 1 && !p_.overlap_comm); }

  void emit_deferred_reductions();

  void plan_zero12_reductions();

  // Where the gradients a ZeRO-1/2 bucket reduces lie in the schedule: stage 2 in the bucket's buffer (its tensors in
  // bucket order, as the hooks copied them in), stage 1 in the whole gradient buffer (DeepSpeed's flat order).
  struct GradHome {
    OpId buffer = -1;
    std::map<int, Elements> at;  // tensor ordinal -> its first element in `buffer`
    Bytes where(const GradPiece& g) const { return at.at(g.tensor) + g.first; }
  };
  GradHome bucket_home(size_t i) const;
  GradHome flat_home() const;
  void use_pieces(OpId op, const std::vector<GradPiece>& pieces, const GradHome& home, OpId flat, Elements flat_first,
                  bool to_flat);
  static Elements contiguous_range(std::vector<GradPiece> pieces, const GradHome& home);

  OpId reduce_in_place(const std::string& name, CollectiveKind kind, int root, OpId buffer, Bytes offset, Elements n,
                       std::vector<OpId> deps, int layer);
  void set_cast(OpId op, DType from, DType to);
  // The kernels a d2d copy runs (CopyOp::kernel_launches): a torch.cat of `inputs` tensors one per 128 of them
  // (PyTorch's CUDA cat copies its inputs in batches of CAT_ARRAY_BATCH_SIZE = 128, one kernel a batch:
  // aten/src/ATen/native/cuda/Shape.cu), a loop of DeepSpeed's over `n` parameters one per parameter.
  void cat_kernels(OpId op, std::int64_t inputs) {
    sch_.ops[op].copy.kernel_launches = static_cast<int>(std::max<std::int64_t>(1, ceil_div(inputs, 128)));
  }
  void per_tensor_kernels(OpId op, std::int64_t n) {
    sch_.ops[op].copy.kernel_launches = static_cast<int>(std::max<std::int64_t>(1, n));
  }

  OpId emit_zero12_calls(const std::vector<ReductionCall>& calls, const std::string& name, OpId bwd, int layer,
                         const GradHome& home);

  // The pieces of flat tensor t that lie in each rank's partition of the flat buffer: f(owner, a, b) for its
  // elements [a, b), in order.
  template <class F>
  void for_each_owned_piece(int t, F&& f) const {
    const Elements P = p_.param_partition;
    const Elements begin = flat_layout_.offset[t], end = begin + flat_layout_.numel[t];
    for (Elements a = begin; a < end;) {
      const int owner = static_cast<int>(a / P);
      const Elements b = std::min(end, (owner + 1) * P);
      f(owner, a, b);
      a = b;
    }
  }

  OpId copy_grads_in_partition(size_t i, const std::string& name, OpId done, int layer);

  OpId copy_grads_to_cpu(const std::vector<int>& ordinals, const std::string& name, OpId done, int layer, OpId bucket);

  void emit_reduction(size_t i, int u, OpId bwd);

  // ---- ZeRO-3 gradient reduction, gradient offload (build_zero3_reduce.cpp) ------------------------------------
  static std::vector<size_t> all_members(const GradBucket& b);
  static std::vector<Elements> bucket_offsets(const GradBucket& b);
  OpId zero3_reduce(size_t i, const std::vector<size_t>& members, const std::string& name, OpId bwd, int layer);
  // One tensor's reduced chunk on this rank: `from` bytes into the reduction's buffer (plus the rank's index x the
  // buffer's rank stride), `elements` long, element `to` of the rank's gradient partition.
  struct ReducedChunk {
    int unit = -1, tensor = -1;
    Bytes from = 0;
    Elements elements = 0, to = 0;
  };
  OpId partition_grads_to_cpu(const std::vector<ReducedChunk>& chunks, OpId src, Bytes rank_stride,
                              const std::string& name, OpId done, int layer);
  void constant_buffered_norm2(OpId gpu16, const ReducedChunk& c, const std::string& piece, OpId& last, int layer);
  OpId swap_out_gradients(const std::vector<ReducedChunk>& chunks, Elements total, OpId fp32, const std::string& name,
                          OpId after, int layer);
  void use_grad_partition(OpId op, int u, int k);

  // ---- ZeRO++ qgZ: the quantized gradient all-to-alls (build_qgz_reduce.cpp) ---------------------------------
  // One hop's peer-major region: per tensor (in bucket order) its chunk's values and scales offsets inside a peer's
  // block, and the block's bytes.
  struct QgzPeerLayout {
    std::vector<Bytes> values_at, scales_at;
    Bytes block = 0;
  };
  static QgzPeerLayout qgz_peer_layout(const std::vector<std::pair<Bytes, Bytes>>& chunks);

  OpId qgz_reduce(size_t i, const std::string& name, OpId bwd, int layer);

  // ---- forward / backward of one micro-step, activations (build_forward_backward.cpp) -------------------------
  std::vector<OpId> compute_deps(std::vector<OpId> deps);

  OpId backward(int u, std::vector<OpId> deps, const std::function<void(OpId)>& annotate,
                const std::function<void(OpId)>& after_last = nullptr);

  void forward_backward();

  OpId alloc_layer_acts(int layer);

  // ---- optimizer step, offload write-back (build_optimizer_step.cpp) ------------------------------------------
  void optimizer_step();
  void emit_optimizer_step();

  void gather_persistent(const std::vector<OpId>& after);

  // ---- DeepSpeed's other step collectives (build_step_collectives.cpp) ----------------------------------------
  std::vector<OpId> grad_norm_all_reduces(const std::vector<OpId>& ready);

  OpId write_back_params(const std::string& name, Elements first, Elements sub, OpId opt, OpId w16);

  const Scenario& s_;
  const Plan& p_;
  const Bytes e_;
  const TensorLayout layout_;
  Schedule sch_;
  OpId params_ = -1, persistent_ = -1, grads_ = -1, optimizer_ = -1;  // init allocs of the whole params / persistent / grads
  OpId partition_ = -1, grad_partition_ = -1;  // stages 2-3: init allocs of params.partition / grads.partition
  OpId partition_nvme_ = -1;    // offload_param nvme: init alloc of the partition's elements past max_in_cpu
  OpId param_swap_out_ = -1;    // offload_param nvme: init alloc of the pinned 16-bit write-back buffer
  OpId last_param_write_ = -1;  // offload_param nvme: the last param_nvme_write (the write-back buffer is free after it)
  // offload_param nvme, the swap-in pool: its init alloc, per buffer the last copy that read it, per (unit, tensor) read
  // the read and its buffer; the last read issued, the last the host has waited for, and a wait that the next
  // compute (and the fetches before it) must follow.
  struct SwapRead {
    OpId read = -1;
    int buffer = 0;
  };
  OpId swap_pool_ = -1;
  std::vector<OpId> swap_reader_;
  std::map<std::pair<int, int>, SwapRead> swapped_;
  OpId last_read_ = -1, waited_through_ = -1, host_wait_ = -1;
  int swap_reads_ = 0;
  std::vector<OpId> grad_writes_;              // stage 3, optimizer on NVMe: this step's gradient swap-outs
  OpId opt_swap_pool_ = -1;                     // stage 3, optimizer on NVMe: the swapper's pinned pool (init)
  Bytes opt_swap_buffer_bytes() const { return kFp32 * p_.optimizer_swap_buffer_elements; }
  Bytes pool_at_ = 0;                           // the backward's next staging place in the pool
  std::vector<std::pair<std::pair<Bytes, Bytes>, OpId>> pool_writes_;  // staged bytes [begin, end) and their write
  OpId last_state_write_ = -1;                  // the last sub-group's state write out of the pool
  OpId grads_host16_ = -1;                     // stage 3 optimizer offload: grad_partitions_flat_buffer (16-bit)
  OpId params16_ = -1;                         // ZeRO-1/2 optimizer offload: the 16-bit weights CPU Adam writes
  OpId offload_temp_ = -1;                     // ZeRO-1/2 optimizer offload: temp_grad_buffer_for_gpu_offload
  OpId grads_accum_ = -1;                      // ZeRO-1/2 offload, grad_accum > 1: accumulated_grads_in_cpu (16-bit)
  std::map<std::pair<int, int>, Bytes> accum_at_;  // (tensor ordinal, owner) -> its place in grads_accum_
  OpId grads_fp32_ = -1;                       // optimizer offload: init alloc of the fp32 gradients (CPU, or NVMe)
  OpId loco_ = -1;                             // LoCo: init alloc of the error-feedback buffers
  // runtime deepspeed: DeepSpeed's gradient bucket buffers of reduce_bucket_size elements. Stage 3: one flat buffer
  // for the run (stage3.py __ipg_bucket_flat_buffer); stages 1-2: one (two with overlap_comm) per backward
  // (stage_1_and_2.py backward: ipg_buffer), their allocs while a backward runs. The buckets' uses point into them.
  std::vector<OpId> ipg_;
  int ipg_next_ = 0;                           // stages 1-2 with two: the one the next bucket fills
  bool deepspeed() const { return s_.runtime == RuntimeKind::deepspeed; }
  // A copy across devices that changes the dtype: under runtime deepspeed torch's blocking copy_ converts on the CPU
  // through a temporary CPU tensor it allocates (Copy.cu copy_kernel_cuda), so the transfer is pageable whatever the
  // destination's pinning (`pinned`); measured far slower (validate/deepspeed/probes/probe_cross_copy.py). zrun converts on
  // the GPU and copies pinned.
  bool converting_copy_pinned(bool pinned) const { return deepspeed() ? false : pinned; }
  // Stages 1-2, optimizer on the CPU, under DeepSpeed: the fp32 master goes up and is cast on the GPU
  // (build_optimizer_step.cpp).
  bool fp32_up_then_cast() const;
  OpId copy_fp32_master_up(const std::string& name, BufferUse master, Elements first, Elements sub, OpId adam);
  OpId unscale_on_cpu(const std::string& name, BufferUse grads, Elements sub, std::vector<OpId> deps);
  // DeepSpeed at stage 2 (contiguous_gradients, the optimizer on the GPU): grads_in_partition is allocated by the
  // step's first copy_grads_in_partition and dropped with the step (stage_1_and_2.py), not held for the run.
  bool lazy_grad_partition() const {
    return deepspeed() && p_.stage == 2 && s_.zero.contiguous_gradients && !optimizer_offloaded();
  }
  void open_ipg_buffers();
  void close_ipg_buffers(const std::vector<OpId>& after);
  std::map<std::pair<int, int>, Bytes> loco_at_;  // LoCo: (unit, tensor) -> its errors' offset in loco_error
  FlatGradLayout flat_layout_;                       // ZeRO-1/2: DeepSpeed's flat order and partitions
  std::vector<std::vector<int>> bucket_ordinals_;    // ZeRO-1/2: each plan bucket's tensors (model ordinals)
  bool sequential_calls_ = false;  // ZeRO-1/2 default path: a bucket's calls take its elements in order (offload d2h uses)
  std::vector<int> first_ordinal_;                   // per unit: its first tensor's ordinal in model order
  std::vector<UnitKernelLaunches> launches_;         // per unit: kernels its forward / backward / recompute launch
  OpId tied_grad_ = -1;              // stages 2-3, tied head: the embedding weight's gradient until its bucket
  int compute_ = 0, comm_ = 0, rs_ = 0;
  int world_ = 0, hpz_ = 0, intra_ = 0, inter_ = 0;
  std::int64_t tokens_ = 0;
  bool ckpt_ = false;
  int step_ = 0, micro_ = 0;
  mutable std::string tag_;             // tag() for (tag_step_, tag_micro_)
  mutable int tag_step_ = -1, tag_micro_ = -1;
  bool last_micro_ = true;
  std::map<int, OpId> hpz_buffers_;  // unit -> alloc of its secondary partition (this step)
  std::map<int, OpId> hpz_copies_;   // unit -> the copy that wrote it
  std::map<int, Live> live_;         // stage 3: gathered (or in-flight) units of this micro-step
  std::vector<Call> calls_;          // stage 3: fetch calls of this micro-step
  std::map<OpId, int> shared_;       // stage 3: a buffer several units live in -> units not yet released
  std::map<size_t, OpId> open_;      // bucket index -> alloc of its buffer
  size_t next_reduce_ = 0;           // the bucket now filling (buckets are filled and reduced in order)
  std::vector<OpId> reduce_done_;
  std::vector<std::pair<size_t, int>> deferred_;  // (bucket, unit) reductions issued after the backward
  std::vector<std::vector<ReductionCall>> bucket_calls_;    // ZeRO-1/2: per plan bucket, DeepSpeed's calls
  std::vector<std::vector<ReductionCall>> boundary_calls_;  // ZeRO-1 without overlap_comm: model-order buckets
  std::vector<std::vector<int>> boundary_ordinals_;  // ZeRO-1 without overlap_comm: each model-order bucket's tensors
  OpId last_bwd_ = -1;
  OpId last_compute_ = -1;           // the previous trace step's compute (gathers are issued after it)
  std::optional<std::pair<OpId, OpId>> pending_free_;  // (bucket alloc, its reduction) awaiting release
  std::vector<OpId> step_end_;       // the previous optimizer step's last ops (optimizer_step)
  OpId serial_dep_ = -1;             // without overlap_comm the next compute waits for the last reduction
};

}  // namespace zsim::build
