#include "sim/plan/schedule_builder.hpp"

#include <algorithm>
#include <map>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "sim/plan/attention_flops.hpp"
#include "sim/plan/grad_reduction.hpp"
#include "sim/plan/kernel_launches.hpp"
#include "sim/plan/offload_uses.hpp"
#include "sim/plan/param_swap_in.hpp"
#include "sim/plan/quantization.hpp"
#include "sim/plan/tensor_layout.hpp"

namespace zsim {

namespace {

Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

constexpr Bytes kFp32 = 4;

class Builder {
 public:
  Builder(const Scenario& s, const Plan& p) : s_(s), p_(p), e_(p.elem_bytes), layout_(tensor_layout(p)) {
    sch_.model = schedule_model(s, p);
    compute_ = sch_.stream("compute");
    comm_ = sch_.stream("comm");
    rs_ = p.overlap_comm ? sch_.stream("comm_rs") : comm_;
    world_ = sch_.group(p.world);
    if (p.hpz_enabled) hpz_ = sch_.group(p.hpz);
    if (p.qgz) {
      intra_ = sch_.group(p.intra_node);
      inter_ = sch_.group(p.inter_node);
    }
    const auto& t = s.training;
    tokens_ = t.micro_batch * t.seq_len;
    ckpt_ = t.activation_checkpointing == Checkpointing::full;
    int ordinal = 0;  // each unit's first tensor in model order
    for (const auto& u : p.units) {
      first_ordinal_.push_back(ordinal);
      ordinal += static_cast<int>(u.tensors.size());
      const std::optional<ModelUnitKind> kind = model_unit_kind(u.name);
      launches_.push_back(kind ? unit_kernel_launches(*kind, s.model, t) : UnitKernelLaunches{});
    }
    if (p.stage == 1 || p.stage == 2) plan_zero12_reductions();
  }

  // built_micro_steps: how many of each step's grad_accum micro-steps to emit (see schedule_builder.hpp).
  Schedule build(int steps, int built_micro_steps) {
    ScheduleMeta& m = sch_.meta;
    m.scenario = s_.source_file.empty() ? s_.model.name : s_.source_file;
    m.world_size = p_.dp;
    m.nodes = p_.nodes;
    m.gpus_per_node = p_.gpus_per_node;
    m.params = p_.params;
    m.tokens_per_step = tokens_ * s_.training.grad_accum * p_.dp;
    m.steps = steps;
    // About a dozen ops per trace step (gather, quantize, allocs, compute, bucket reduction).
    sch_.ops.reserve(p_.trace.size() * 12 + 64);
    init();
    for (int step = 0; step < steps; ++step) {
      step_ = step;
      const int accum = s_.training.grad_accum;
      const int built = built_micro_steps <= 0 ? accum : std::clamp(built_micro_steps, std::min(2, accum), accum);
      for (int i = 0; i < built; ++i) {
        // The first built - 1 micro-steps are 0, 1, ...; the last built one is always the step's last (accum - 1).
        micro_ = i + 1 == built ? accum - 1 : i;
        last_micro_ = i + 1 == built;
        forward_backward();
        if (step == 0 && i == 0)  // every micro-step is alike: size the op vector once
          sch_.ops.reserve(sch_.ops.size() * built * steps + 16 * p_.sub_groups.size() * steps +
                           2 * p_.allgather_chunks.size() * steps + 256);
      }
      optimizer_step();
    }
    return std::move(sch_);
  }

 private:
  // ---- op helpers -------------------------------------------------------------------------------
  Op base(OpKind k, std::string name, Phase ph, int stream, std::vector<OpId> deps, int layer = -1) {
    Op op;
    op.kind = k;
    op.name = std::move(name);
    op.phase = ph;
    op.stream = stream;
    op.layer = layer;
    op.micro_step = micro_;
    op.deps = std::move(deps);
    std::erase(op.deps, -1);
    return op;
  }
  OpId alloc(std::string buffer, Tier tier, MemCategory cat, const std::string& detail, Bytes bytes,
             Phase ph, int stream, std::vector<OpId> deps = {}, int layer = -1) {
    Op op = base(OpKind::alloc, "alloc." + buffer, ph, stream, std::move(deps), layer);
    op.mem = {std::move(buffer), tier, cat, detail, bytes};
    return sch_.add(std::move(op));
  }
  OpId release(OpId alloc_id, Phase ph, int stream, std::vector<OpId> deps = {}) {
    const Op& a = sch_.ops[alloc_id];
    Op op = base(OpKind::free, "free." + a.mem.buffer, ph, stream, std::move(deps), a.layer);
    op.mem = a.mem;
    return sch_.add(std::move(op));
  }
  OpId compute(std::string name, ComputeKind what, Phase ph, std::vector<OpId> deps, Flops flops,
               Bytes hbm, Elements elements, int layer = -1, Device dev = Device::gpu, int stream = -1) {
    Op op = base(OpKind::compute, std::move(name), ph, stream < 0 ? compute_ : stream, std::move(deps), layer);
    op.compute = {what, dev, flops, hbm, elements};
    return sch_.add(std::move(op));
  }
  OpId collective(std::string name, CollectiveKind what, int group, Bytes bytes, Bytes scale_bytes,
                  DType dt, Phase ph, int stream, std::vector<OpId> deps, int layer = -1) {
    Op op = base(OpKind::collective, std::move(name), ph, stream, std::move(deps), layer);
    op.collective = {what, group, bytes, scale_bytes, dt};
    return sch_.add(std::move(op));
  }
  OpId copy(std::string name, CopyKind what, Bytes bytes, bool pinned, Phase ph, int stream,
            std::vector<OpId> deps, int layer = -1) {
    Op op = base(OpKind::copy, std::move(name), ph, stream, std::move(deps), layer);
    op.copy = {what, bytes, pinned};
    return sch_.add(std::move(op));
  }
  int stream(const char* name) { return sch_.stream(name); }
  // ".s<step>.m<micro>", rebuilt only when the position changes (it names most buffers).
  const std::string& tag() const {
    if (tag_step_ != step_ || tag_micro_ != micro_) {
      tag_ = ".s" + std::to_string(step_) + ".m" + std::to_string(micro_);
      tag_step_ = step_;
      tag_micro_ = micro_;
    }
    return tag_;
  }
  Tier tier_of(OffloadDevice d) const {
    return d == OffloadDevice::nvme ? Tier::nvme : d == OffloadDevice::cpu ? Tier::cpu : Tier::gpu;
  }
  bool optimizer_offloaded() const { return p_.optimizer_device != OffloadDevice::none; }

  // ---- init: persistent model states -------------------------------------------------------------
  void init() {
    const Phase ph = Phase::init;
    const Elements opt = p_.optimizer_partition;
    if (p_.stage < 3) {
      // Stages 1-2: DeepSpeed's flat 16-bit buffer, padded to N partitions (plan.hpp param_partition).
      params_ = alloc("params", Tier::gpu, MemCategory::params, "", e_ * whole_flat(), ph, compute_);
    } else {
      // Every tensor's partition (DeepSpeed's ds_tensor), persistent ones included: the optimizer updates them all
      // and _post_step gathers the persistent ones from theirs.
      // offload_param nvme: the partition's first plan.nvme_params_from elements stay in pinned CPU memory (DeepSpeed's
      // max_in_cpu), the rest is on NVMe (params.partition.nvme, the same layout from that element on).
      const Elements in_cpu = p_.param_device == OffloadDevice::nvme ? p_.nvme_params_from : p_.optimizer_partition;
      const Tier tier = p_.param_device == OffloadDevice::nvme ? Tier::cpu : tier_of(p_.param_device);
      if (in_cpu > 0 || p_.optimizer_partition == 0)
        partition_ = alloc("params.partition", tier, MemCategory::params, "", e_ * in_cpu, ph, compute_);
      if (in_cpu < p_.optimizer_partition)
        partition_nvme_ = alloc("params.partition.nvme", Tier::nvme, MemCategory::params, "nvme",
                                e_ * (p_.optimizer_partition - in_cpu), ph, compute_);
      if (p_.persistent_params > 0)
        persistent_ = alloc("params.persistent", Tier::gpu, MemCategory::params, "persistent",
                            e_ * p_.persistent_params, ph, compute_);
      if (p_.param_swap_buffers > 0) {
        // partitioned_param_swapper.py _configure_aio: the swap-in pool, buffer_count pinned buffers of buffer_size
        // (io-aligned) elements, allocated with the swapper and held for the run, whatever max_in_cpu keeps in CPU
        // memory. Each partition read from NVMe goes into one buffer (FetchStep::swap_in).
        swap_pool_ = alloc("params.swap_in", Tier::cpu, MemCategory::buffers, "param_swap",
                           e_ * p_.param_swap_buffer_elements * p_.param_swap_buffers, ph, compute_);
        swap_reader_.assign(p_.param_swap_buffers, -1);
      }
      if (partition_nvme_ >= 0 && !p_.sub_groups.empty()) {
        // DeepSpeed's partitioned_swap_buffer (stage3.py, building the 16-bit sub-groups:
        // `should_create_fp16_flat_reuse_buffer` -> partitioned_param_swapper.py `reserve_partitioned_swap_space`): one pinned 16-bit buffer, held for the whole
        // run, into which `swap_out_partitioned_params` writes each sub-group's updated weights before their NVMe
        // writes, at offset 0: the io-aligned whole numels of the largest sub-group's params (param_swap_in.hpp).
        param_swap_out_ = alloc("params16.swap_out", Tier::cpu, MemCategory::buffers, "param_swap",
                                e_ * param_swap_out_elements(p_), ph, compute_);
      }
    }
    // 16-bit gradients: whole for stages 0-1, this rank's partition for 2-3 (none on the GPU when the
    // optimizer is offloaded: reduced buckets go straight to the fp32 CPU copy).
    if (p_.stage <= 1)
      grads_ = alloc("grads", Tier::gpu, MemCategory::grads, "", e_ * whole_flat(), ph, compute_);
    else if (!optimizer_offloaded())
      grad_partition_ = alloc("grads.partition", Tier::gpu, MemCategory::grads, "", e_ * opt, ph, compute_);
    if (optimizer_offloaded()) {
      if (p_.stage == 3)
        grads_host16_ = alloc("grads.partition16", Tier::cpu, MemCategory::grads, "partitions_flat", e_ * opt, ph,
                              compute_);
      // The CPU optimizer's fp32 gradients: in host memory, or, with the optimizer on NVMe at stage 3, in the
      // optimizer swapper's gradient swap files (swap_out_gradients in the backward, swapped in with the state).
      const bool swapped = p_.stage == 3 && p_.optimizer_device == OffloadDevice::nvme;
      grads_fp32_ = alloc("grads.fp32", swapped ? Tier::nvme : Tier::cpu, MemCategory::grads, "fp32", kFp32 * opt, ph,
                          compute_);
      optimizer_ = alloc("optimizer", tier_of(p_.optimizer_device), MemCategory::optimizer, "",
                         p_.optimizer_bytes_per_param * opt, ph, compute_);
      if (p_.optimizer_swap_buffers > 0)  // stage 3, optimizer on NVMe: the swapper's pinned pool, for the run
        opt_swap_pool_ = alloc("opt_swap.pool", Tier::cpu, MemCategory::buffers, "nvme_swap",
                               opt_swap_buffer_bytes() * p_.optimizer_swap_buffers, ph, compute_);
      if (p_.stage <= 2) init_zero12_offload_buffers();
    } else {
      optimizer_ = alloc("optimizer", Tier::gpu, MemCategory::optimizer, "", p_.optimizer_bytes_per_param * opt, ph,
                         compute_);
    }
    if (p_.loco) {
      // DeepSpeed keeps, per qgZ gradient matrix, int8 copies of the intra-node error (whole tensor)
      // and of the inter-node error (1/gpus_per_node of it), each with fp32 scales per quant group.
      // Per tensor, model order: [intra error | its scales | inter error | its scales].
      Bytes bytes = 0;
      for (int u = 0; u < static_cast<int>(p_.units.size()); ++u)
        for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k) {
          const TensorShape& t = p_.units[u].tensors[k];
          if (!qgz_applies(t.rows, t.cols, p_.dp)) continue;
          const QgzSizes q = qgz_sizes(t.rows, t.cols, p_.dp, p_.gpus_per_node);
          loco_at_[{u, k}] = bytes;
          bytes += 2 * q.intra.data + q.intra.scales + 2 * q.inter.data + q.inter.scales;
        }
      loco_ = alloc("loco_error", Tier::gpu, MemCategory::buffers, "loco_error", bytes, ph, compute_);
    }
  }

  // ZeRO-1/2 with cpu_offload (stage_1_and_2.py __init__): temp_grad_buffer_for_gpu_offload on the GPU and
  // temp_grad_buffer_for_cpu_offload in host memory (pinned with pin_memory), each of the largest tensor's 16-bit
  // size; with grad_accum > 1 the 16-bit host copies of the whole tensors each rank's partition touches
  // (accumulated_grads_in_cpu: one pinned tensor per parameter, made at the first micro-step; one buffer here).
  void init_zero12_offload_buffers() {
    const Phase ph = Phase::init;
    const Elements P = p_.param_partition;
    Elements widest = 0;
    for (Elements n : flat_layout_.numel) widest = std::max(widest, n);
    offload_temp_ = alloc("grads.offload_temp", Tier::gpu, MemCategory::buffers, "offload_temp", e_ * widest, ph,
                          compute_);
    alloc("grads.offload_temp_cpu", Tier::cpu, MemCategory::buffers, "offload_temp", e_ * widest, ph, compute_);
    // The step's 16-bit weights on their way up (param_buffer_of_bit16_for_cpu_offload_groups: pinned, the
    // partition's size; step(): `bit16_partition_buffer.data.copy_(fp32_partition.data)`, then a non_blocking copy_
    // into the GPU's partition).
    params16_ = alloc("params16.cpu_offload", Tier::cpu, MemCategory::buffers, "param_h2d", e_ * P, ph, compute_);
    if (s_.training.grad_accum <= 1) return;
    std::vector<Bytes> used(static_cast<size_t>(p_.dp), 0);  // per rank
    for (int t = 0; t < static_cast<int>(flat_layout_.numel.size()); ++t)
      for_each_owned_piece(t, [&](int owner, Elements, Elements) {
        accum_at_[{t, owner}] = std::exchange(used[owner], used[owner] + e_ * flat_layout_.numel[t]);
      });
    grads_accum_ = alloc("grads.accumulated16", Tier::cpu, MemCategory::grads, "accumulated",
                         *std::max_element(used.begin(), used.end()), ph, compute_);
  }

  // ---- per-unit compute figures -------------------------------------------------------------------
  // Forward flops: 2 x tokens x matrix params (a GEMM per matrix), the attention core before the output
  // projection (eager 4 b s^2 h, causal flash half that: attention_flops.hpp), the head 2 x tokens x h x
  // vocab (tied or not). Backward: twice the GEMMs, and the attention core's own backward (flash: 2.5 x its
  // forward, the scores recomputed).
  Flops gemm_flops(int u) const {
    const FetchUnit& U = p_.units[u];
    if (U.is_head) return 2.0 * tokens_ * s_.model.hidden * s_.model.vocab;
    if (U.is_embedding) return 0;  // lookup: memory-bound
    Flops f = 0;
    for (const auto& t : U.tensors)
      if (t.is_matrix()) f += 2.0 * tokens_ * t.numel();
    return f;
  }
  Flops forward_flops(int u) const {
    return gemm_flops(u) + (p_.units[u].attention_core ? attention_core_flops(s_.model, s_.training).forward : 0);
  }
  Flops backward_flops(int u) const {
    return 2 * gemm_flops(u) + (p_.units[u].attention_core ? attention_core_flops(s_.model, s_.training).backward : 0);
  }
  // Memory-bound units (embedding lookup, norms): read and write one activation each. Backward, the embedding twice
  // that; a norm five activations, as a fused norm's backward moves them (zrun's norm.cu, apex's FusedRMSNorm /
  // FusedLayerNorm): the dx pass reads x and dy and writes dx, the weight-gradient pass reads x and dy again.
  // Eager attention's core adds the traffic of its s x s scores (attention_flops.hpp), the head its loss's.
  Bytes unit_hbm(int u) const {
    const FetchUnit& U = p_.units[u];
    return U.is_embedding || U.vectors_only() ? 2 * tokens_ * s_.model.hidden * e_ : 0;
  }
  // The loss over the logits (tokens x vocab), as a fused cross-entropy moves them (zrun's head_loss.cu): the
  // forward reads them once (its per-row results are negligible), the backward reads them and writes their
  // gradient in place.
  Bytes logits_bytes() const { return tokens_ * s_.model.vocab * e_; }
  // The MLP's activation kernels (runtime/model/mlp.cu), in units of tokens x ffn_hidden elements of e bytes:
  // forward SwiGLU reads gate and up and writes act (3), GeLU reads up and writes act (2); backward the up half
  // reads d(act) and gate (GeLU: up) and writes d(up) (3), SwiGLU's gate half reads d(act), gate and up and writes
  // d(gate) (4).
  Bytes activation_hbm(int u, bool backward) const {
    const Bytes tf = tokens_ * s_.model.ffn_hidden * e_;
    switch (p_.units[u].activation) {
      case FetchUnit::ActivationPart::up: return (backward ? 3 : s_.model.mlp == MlpKind::gated ? 3 : 2) * tf;
      case FetchUnit::ActivationPart::gate: return backward ? 4 * tf : 0;
      case FetchUnit::ActivationPart::none: return 0;
    }
    return 0;
  }
  Bytes forward_hbm(int u) const {
    return unit_hbm(u) + (p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).forward : 0) +
           (p_.units[u].is_head ? logits_bytes() : 0) + activation_hbm(u, false);
  }
  Bytes backward_hbm(int u) const {
    const Bytes own = p_.units[u].vectors_only() ? 5 * unit_hbm(u) / 2 : 2 * unit_hbm(u);
    return own +
           (p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).backward : 0) +
           (p_.units[u].is_head ? 2 * logits_bytes() : 0) + activation_hbm(u, true);
  }
  // Of those bytes, what eager attention's core GEMMs move (ComputeOp::gemm_hbm_bytes: a GEMM model that prices the
  // unit's gemm_calls counts it in their operand traffic).
  Bytes forward_gemm_hbm(int u) const {
    return p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).forward_gemm : 0;
  }
  Bytes backward_gemm_hbm(int u) const {
    return p_.units[u].attention_core ? attention_scores_hbm_bytes(s_.model, s_.training).backward_gemm : 0;
  }
  Bytes layer_forward_gemm_hbm(int layer) const {
    Bytes b = 0;
    for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) b += forward_gemm_hbm(u);
    return b;
  }
  // Of a unit's FLOPs, those of flash attention's fused kernel (ComputeOp::fused_attention_flops: the attention core on
  // attn.o where the model's attention is flash; eager attention's core is GEMM calls).
  bool flash_core(int u) const { return p_.units[u].attention_core && s_.model.attention == Attention::flash; }
  Flops forward_fused_attention_flops(int u) const {
    return flash_core(u) ? attention_core_flops(s_.model, s_.training).forward : 0;
  }
  Flops backward_fused_attention_flops(int u) const {
    return flash_core(u) ? attention_core_flops(s_.model, s_.training).backward : 0;
  }
  Flops layer_forward_fused_attention_flops(int layer) const {
    Flops f = 0;
    for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) f += forward_fused_attention_flops(u);
    return f;
  }
  Flops layer_forward_flops(int layer) const {
    Flops f = 0;
    for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) f += forward_flops(u);
    return f;
  }
  Bytes layer_forward_hbm(int layer) const {
    Bytes b = 0;
    for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) b += forward_hbm(u);
    return b;
  }
  // The units after the transformer layers (final norm, head): they share the head's activation buffer.
  // Where tensor k of unit u starts in the whole-model flat buffers: DeepSpeed's flat order for stages 1-2
  // (round_robin_gradients deals tensors to ranks), model order for stage 0.
  Elements flat_offset(int u, int k) const {
    if (p_.stage != 1 && p_.stage != 2) return layout_.flat[u][k];
    return flat_layout_.offset[first_ordinal_[u] + k];
  }
  // Stages 1-2: the flat 16-bit buffers hold N partitions (DeepSpeed's padding); stage 0 the model.
  Elements whole_flat() const { return p_.stage == 0 ? p_.params : p_.param_partition * p_.dp; }
  bool in_head(int u) const { return u > 0 && p_.units[u].layer < 0 && !p_.units[u].is_embedding; }
  bool first_of_layer(int u) const { return p_.units[u].layer >= 0 && p_.layers[p_.units[u].layer].first == u; }

  // ---- stage 3 fetch calls ------------------------------------------------------------------------
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

  // ---- version-2 buffer uses: which bytes of which buffers a compute op reads and writes -----------
  void use(OpId op, OpId buffer, Bytes offset, Bytes bytes, Role role, Access access, int unit = -1,
           int tensor = -1) {
    sch_.ops[op].uses.push_back({buffer, offset, bytes, role, access, unit, tensor});
  }
  void use_whole(OpId op, OpId buffer, Role role, Access access) {
    use(op, buffer, 0, sch_.ops[buffer].mem.bytes, role, access);
  }
  // The weights of unit u: the whole-model buffer (stages 0-2), or its gathered buffer and the persistent one.
  void use_params(OpId op, int u) {
    const auto& ts = p_.units[u].tensors;
    size_t gathered = 0;
    for (int k = 0; k < static_cast<int>(ts.size()); ++k) {
      const Bytes bytes = e_ * ts[k].numel();
      if (p_.stage < 3) {
        use(op, params_, e_ * flat_offset(u, k), bytes, Role::param, Access::read, u, k);
      } else if (layout_.gathered[u][k] >= 0) {
        const auto [buffer, offset] = live_.at(u).where.at(gathered++);
        use(op, buffer, offset, bytes, Role::param, Access::read, u, k);
      } else {
        use(op, persistent_, e_ * layout_.persistent[u][k], bytes, Role::param, Access::read, u, k);
      }
    }
  }
  // The gradients a backward segment of unit u produces: its tensors in bucket b, in the whole-model gradient
  // buffer (stages 0-1, accumulated) or at their place in the bucket's buffer (stages 2-3).
  void use_grads(OpId op, int u, size_t b) {
    if (b >= p_.buckets.size()) return;
    Elements offset = 0;
    for (size_t i = 0; i < p_.buckets[b].members.size(); ++i) {
      const auto [mu, k] = p_.buckets[b].members[i];
      const Elements n = p_.buckets[b].tensors[i].numel();
      if (mu == u) {
        if (p_.stage <= 1)
          use(op, grads_, e_ * flat_offset(u, k), e_ * n, Role::grad, Access::read_write, u, k);
        else
          use(op, open_.at(b), e_ * offset, e_ * n, Role::grad, Access::write, u, k);
      }
      offset += n;
    }
  }

  // hpZ (partition_parameters.py all_gather_coalesced: `use_secondary_tensor = params[0].ds_secondary_tensor is not
  // None`): a unit is gathered from its secondary partition on the hpz group once this step's has been kept, that is
  // from the first forward's release on (stage3.py _post_step invalidates them after the step): the backward's
  // gathers, and the forward's of later micro-steps.
  bool secondary(const Member& m) const { return p_.hpz_enabled && hpz_buffers_.count(m.unit) > 0; }
  // DeepSpeed's secondary partition of a tensor: its numel padded to the data-parallel world (_aligned_size), split
  // over the hpz group (_partition_param_sec: secondary_partition_size = aligned // num_ranks_in_param_group).
  Elements secondary_numel(const TensorShape& t) const { return ceil_div(t.numel(), p_.dp) * p_.dp / p_.hpz.size; }
  std::string gathered_name(const Member& m, int call) const {
    return "gathered." + p_.units[m.unit].name + tag() + (m.phase == Phase::forward ? "f" : "b") + ".c" +
           std::to_string(call);
  }

  // Issues one fetch call of DeepSpeed's coordinator (the current module, or the prefetch batch), after
  // `after`, the compute op of the previous trace step (DeepSpeed issues a step's fetches from that
  // step's hook; the dependency keeps the comm stream from running further ahead than the prefetch
  // window).
  void fetch(const std::vector<Member>& members, OpId after) {
    std::vector<Member> with, without;  // with and without a secondary partition, in DeepSpeed's order
    for (const Member& m : members) {
      live_[m.unit] = Live{};
      (secondary(m) ? with : without).push_back(m);
    }
    for (const auto* g : {&with, &without}) {
      if (g->empty()) continue;
      if (p_.sequential_allgather) {
        for (const Member& m : *g)
          for (const auto& id : gathered_ids(m.unit)) issue_call({m}, {id}, after);
      } else {
        std::vector<std::pair<int, int>> ids;
        for (const Member& m : *g)
          for (const auto& id : gathered_ids(m.unit)) ids.push_back(id);
        issue_call(*g, std::move(ids), after);
      }
    }
  }

  // The gathered tensors of unit u, in order, as (unit, tensor index).
  std::vector<std::pair<int, int>> gathered_ids(int u) const {
    std::vector<std::pair<int, int>> ids;
    for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k)
      if (layout_.gathered[u][k] >= 0) ids.push_back({u, k});
    return ids;
  }
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
  // Range [first, first + n) of this rank's partition, as pieces of params.partition (elements before
  // plan.nvme_params_from) and params.partition.nvme (from it on): one piece unless the range straddles that element.
  std::vector<PartitionPiece> partition_pieces(Elements first, Elements n) const {
    const Elements split = partition_nvme_ >= 0 ? p_.nvme_params_from : p_.optimizer_partition;
    std::vector<PartitionPiece> out;
    if (first < split) out.push_back({partition_, e_ * first, e_ * (std::min(first + n, split) - first), 0});
    if (first + n > split) {
      const Elements at = std::max(first, split);
      out.push_back({partition_nvme_, e_ * (at - split), e_ * (first + n - at), e_ * (at - first)});
    }
    return out;
  }
  // The pieces of tensor (u, k)'s partition.
  std::vector<PartitionPiece> tensor_pieces(int u, int k) const {
    return partition_pieces(layout_.partition[u][k], partition_numel(p_.units[u].tensors[k].numel(), p_.dp));
  }
  // This rank's partition of tensor (u, k) in params.partition (and params.partition.nvme).
  void use_partition(OpId op, int u, int k, Role role, Access access) {
    for (const PartitionPiece& q : tensor_pieces(u, k)) use(op, q.buffer, q.at, q.bytes, role, access, u, k);
  }
  // The buffer that holds sub-group [first, first + n): sub-groups never straddle plan.nvme_params_from.
  BufferUse sub_group_params(Elements first, Elements n, Role role = Role::input, Access access = Access::read) const {
    const PartitionPiece q = partition_pieces(first, n).front();
    return {q.buffer, q.at, q.bytes, role, access};
  }
  bool sub_group_on_nvme(Elements first) const { return partition_nvme_ >= 0 && first >= p_.nvme_params_from; }
  // What this rank contributes of the call's tensor i: its partition, or (hpZ) its secondary partition.
  void use_source(const Call& c, OpId op, size_t i, Role role, Access access) {
    const auto [u, k] = c.ids[i];
    const Elements sec_at = gathered_before(u, k, [&](const TensorShape& t) { return secondary_numel(t); });
    if (c.staged.count(u))  // offload_param: the partition's (hpZ: the secondary partition's) copy on the GPU
      return use(op, c.staged.at(u), e_ * (c.sec ? sec_at : staged_offset(u, k)), e_ * c.chunk[i], role, access, u, k);
    if (!c.sec) return use_partition(op, u, k, role, access);
    use(op, hpz_buffers_.at(u), e_ * sec_at, e_ * c.chunk[i], role, access, u, k);
  }
  // offload_param with hpZ: DeepSpeed keeps the secondary partition on offload_param's device
  // (partition_parameters.py _partition_param_sec: torch.empty(..., device=self.remote_device), pinned with
  // pin_memory), and a gather from it first copies it to the GPU (_all_gather_dtype:
  // `p.ds_secondary_tensor.to(device)`): the unit's secondary partitions, one h2d, into a staging buffer that the
  // call reads as it reads the staged partitions. Returns the staging alloc and the h2d.
  std::pair<OpId, OpId> stage_secondary(Call& c, int u, const std::string& what, std::vector<OpId> deps) {
    const FetchUnit& U = p_.units[u];
    const OpId sec = hpz_buffers_.at(u);
    const Bytes bytes = sch_.ops[sec].mem.bytes;
    deps.push_back(hpz_copies_.at(u));
    const OpId staging = alloc("param_h2d." + what, Tier::gpu, MemCategory::buffers, "prefetch", bytes, c.phase,
                               stream("h2d"), deps, U.layer);
    const OpId h2d = copy(c.name + "." + U.name + ".h2d", CopyKind::h2d, bytes, s_.zero.offload_param.pin_memory,
                          c.phase, stream("h2d"), {staging}, U.layer);
    c.staged[u] = staging;
    Elements at = 0;
    for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k) {
      if (layout_.gathered[u][k] < 0) continue;
      const Elements S = secondary_numel(U.tensors[k]);
      use(h2d, sec, e_ * at, e_ * S, Role::input, Access::read, u, k);
      use(h2d, staging, e_ * at, e_ * S, Role::output, Access::write, u, k);
      at += S;
    }
    return {staging, h2d};
  }

  // offload_param nvme: one swap_in call (partitioned_param_swapper.py swap_in: an aio read per parameter, into its
  // buffer, all submitted before the swapper waits) reads `reads` into the swap-in pool: one nvme_read op with a pair
  // per partition, after the previous step's compute and after the copy up of each buffer's previous holder.
  Bytes swap_slot_at(int buffer) const { return e_ * p_.param_swap_buffer_elements * buffer; }
  void read_swap_ins(const std::vector<SwapIn>& reads, Phase ph, OpId after) {
    if (reads.empty()) return;
    std::vector<OpId> deps{after};
    deps.insert(deps.end(), step_end_.begin(), step_end_.end());
    if (host_wait_ >= 0) deps.push_back(host_wait_);
    Bytes bytes = 0;
    std::vector<PartitionPiece> pieces;  // each read's NVMe piece
    for (const SwapIn& r : reads) {
      pieces.push_back(tensor_pieces(r.unit, r.tensor).back());
      bytes += pieces.back().bytes;
      if (swap_reader_[r.buffer] >= 0) deps.push_back(swap_reader_[r.buffer]);
    }
    const FetchUnit& U = p_.units[reads[0].unit];
    const std::string more = reads.size() > 1 ? "+" + std::to_string(reads.size() - 1) : "";
    const OpId op = copy(std::string(ph == Phase::forward ? "fwd." : "bwd.") + U.name + ".t" +
                             std::to_string(reads[0].tensor) + more + tag() + ".r" + std::to_string(swap_reads_++) +
                             ".nvme_read",
                         CopyKind::nvme_read, bytes, true, ph, stream("nvme"), deps, U.layer);
    for (size_t i = 0; i < reads.size(); ++i) {
      const SwapIn& r = reads[i];
      const PartitionPiece& q = pieces[i];
      use(op, q.buffer, q.at, q.bytes, Role::input, Access::read, r.unit, r.tensor);
      use(op, swap_pool_, swap_slot_at(r.buffer), q.bytes, Role::output, Access::write, r.unit, r.tensor);
      swapped_[{r.unit, r.tensor}] = {op, r.buffer};
    }
    last_read_ = op;
  }

  void issue_call(const std::vector<Member>& members, std::vector<std::pair<int, int>> ids, OpId after) {
    const int id = static_cast<int>(calls_.size());
    Call c;
    c.members = members;
    c.ids = std::move(ids);
    for (const auto& [u, k] : c.ids) c.tensors.push_back(p_.units[u].tensors[k]);
    const FetchUnit& U0 = p_.units[members[0].unit];
    c.phase = members[0].phase;
    c.layer = U0.layer;
    c.name = (c.phase == Phase::forward ? "fwd." : "bwd.") + U0.name +
             (members.size() > 1 ? "+" + std::to_string(members.size() - 1) : "");
    const bool sec = secondary(members[0]);
    const int group = sec ? hpz_ : world_;
    c.sec = sec;
    c.n = sec ? p_.hpz.size : p_.dp;
    c.quantized = p_.qwz;
    c.flat = c.tensors.size() > 1;
    for (const TensorShape& t : c.tensors) {
      c.slot.push_back(c.part);
      c.chunk.push_back(sec ? secondary_numel(t) : ceil_div(t.numel(), c.n));
      c.part += c.chunk.back();
    }
    const Phase ph = c.phase;
    const int layer = c.layer;
    const std::string suffix = tag() + ".c" + std::to_string(id);
    // Offloaded params (partition_parameters.py: `p.ds_tensor.to(device)` before the cat / all-gather): each unit's
    // partition is copied to the GPU first, tensor by tensor (NVMe -> CPU -> GPU staging).
    // Offloaded params: each unit's partition comes to the GPU first (NVMe -> CPU -> GPU staging).
    std::vector<OpId> deps{after}, staging;
    deps.insert(deps.end(), step_end_.begin(), step_end_.end());  // a fetch before the step's first compute
    if (host_wait_ >= 0) deps.push_back(host_wait_);  // the host waited for NVMe reads earlier in this step
    if (p_.param_device != OffloadDevice::none) {
      std::vector<OpId> arrived;
      for (const Member& m : members) {
        const FetchUnit& U = p_.units[m.unit];
        const Bytes part_bytes = e_ * U.partition;
        const std::string what = U.name + suffix;
        if (c.sec) {  // hpZ: the secondary partitions, in CPU memory
          const auto [buffer, h2d] = stage_secondary(c, m.unit, what, deps);
          staging.push_back(buffer);
          arrived.push_back(h2d);
          continue;
        }
        std::vector<OpId> d = deps;  // after the previous compute, and the step before
        // offload_param nvme: the unit's partitions on NVMe were read into the swap-in pool (read_swap_ins), and
        // all_gather_coalesced waits for them first (_ensure_availability_of_partitioned_params): synchronize_reads
        // waits for every read issued so far, so the host goes on after the last one.
        bool waits = false;
        for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k)
          if (const auto r = swapped_.find({m.unit, k}); r != swapped_.end()) {
            d.push_back(r->second.read);
            waits |= r->second.read > waited_through_;
          }
        if (waits) {
          d.push_back(last_read_);
          waited_through_ = host_wait_ = last_read_;
        }
        // The NVMe pieces too small for the swapper (DeepSpeed keeps them in memory, zsim on NVMe): read here into a
        // buffer of their own, packed in order: where each tensor's piece lands there.
        std::optional<OpId> cpu_swap;
        std::map<int, Bytes> swap_at;
        Bytes nvme_bytes = 0;
        for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k)
          if (layout_.gathered[m.unit][k] >= 0 && !swapped_.count({m.unit, k}))
            for (const PartitionPiece& q : tensor_pieces(m.unit, k))
              if (q.buffer == partition_nvme_) {
                swap_at[k] = nvme_bytes;
                nvme_bytes += q.bytes;
              }
        if (nvme_bytes > 0) {
          cpu_swap = alloc("param_swap." + what, Tier::cpu, MemCategory::buffers, "param_swap", nvme_bytes, ph,
                           stream("nvme"), d, U.layer);
          d.push_back(copy(c.name + "." + U.name + ".nvme_read", CopyKind::nvme_read, nvme_bytes, true, ph,
                           stream("nvme"), {*cpu_swap}, U.layer));
          for (const auto& [k, at] : swap_at) {
            const PartitionPiece q = tensor_pieces(m.unit, k).back();
            use(d.back(), q.buffer, q.at, q.bytes, Role::input, Access::read, m.unit, k);
            use(d.back(), *cpu_swap, at, q.bytes, Role::output, Access::write, m.unit, k);
          }
        }
        staging.push_back(alloc("param_h2d." + what, Tier::gpu, MemCategory::buffers, "prefetch", part_bytes, ph,
                                stream("h2d"), d, U.layer));
        d = {copy(c.name + "." + U.name + ".h2d", CopyKind::h2d, part_bytes, s_.zero.offload_param.pin_memory, ph,
                  stream("h2d"), {staging.back()}, U.layer)};
        {  // each gathered tensor's chunk: params.partition (CPU) or the swap buffer (NVMe) -> the staging
          c.staged[m.unit] = staging.back();
          for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k)
            if (layout_.gathered[m.unit][k] >= 0) {
              const Bytes at = e_ * staged_offset(m.unit, k);
              const auto pooled = swapped_.find({m.unit, k});
              for (const PartitionPiece& q : tensor_pieces(m.unit, k)) {
                OpId from = q.buffer;
                Bytes from_at = q.at;
                if (q.buffer == partition_nvme_ && pooled != swapped_.end()) {
                  from = swap_pool_;
                  from_at = swap_slot_at(pooled->second.buffer);
                } else if (q.buffer == partition_nvme_) {
                  from = *cpu_swap;
                  from_at = swap_at.at(k);
                }
                use(d[0], from, from_at, q.bytes, Role::input, Access::read, m.unit, k);
                use(d[0], staging.back(), at + q.from, q.bytes, Role::output, Access::write, m.unit, k);
              }
            }
        }
        if (cpu_swap) release(*cpu_swap, ph, stream("h2d"), d);
        for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k)  // the pool buffers this copy reads
          if (const auto r = swapped_.find({m.unit, k}); r != swapped_.end()) swap_reader_[r->second.buffer] = d[0];
        arrived.push_back(d[0]);
      }
      deps = arrived;
    }
    const Elements out = c.part * c.n;  // the gathered (padded) elements
    if (!c.flat && !c.quantized) {
      // DeepSpeed's single-parameter path: gathered straight into the parameter's padded buffer.
      const Member& m = members[0];
      const OpId buf = alloc(gathered_name(m, id), Tier::gpu, MemCategory::buffers, m.prefetch ? "prefetch" : "gathered",
                             e_ * out, ph, comm_, deps, layer);
      live_[m.unit].buffers.push_back(buf);
      live_[m.unit].where.push_back({buf, 0});
      deps.push_back(buf);
      c.gathered = collective(c.name + ".all_gather", CollectiveKind::all_gather, group, e_ * out, 0, p_.dtype, ph,
                              comm_, deps, layer);
      {  // this rank's partition in, the padded tensor out (rank r's chunk at r x partition)
        use_source(c, c.gathered, 0, Role::input, Access::read);
        use(c.gathered, buf, 0, e_ * out, Role::output, Access::write, c.ids[0].first, c.ids[0].second);
      }
    } else if (!c.quantized && !sec && p_.all_reduce_fetch) {
      // stage3_use_all_reduce_for_fetch_params: a zeroed buffer of the params' padded sizes becomes their
      // storage; each partition is copied into its slot and the buffer all-reduced (no copy-out). It is
      // freed with the last of its units (the params are views of it).
      Elements aligned = 0;
      for (const TensorShape& t : c.tensors) aligned += ceil_div(t.numel(), c.n) * c.n;
      const Member& m = members[0];
      const OpId buf = alloc("allreduce" + suffix, Tier::gpu, MemCategory::buffers,
                             m.prefetch ? "prefetch" : "gathered", e_ * aligned, ph, comm_, deps, layer);
      OpId in = buf;
      Elements at = 0;  // the tensor's padded place in the buffer; this rank's partition goes to chunk r of it
      for (size_t i = 0; i < c.tensors.size(); ++i) {
        const Elements chunk = ceil_div(c.tensors[i].numel(), c.n);
        in = copy(c.name + ".copy_in", CopyKind::d2d, e_ * chunk, true, ph, comm_, {in}, layer);
        {
          const auto [u, k] = c.ids[i];
          use_source(c, in, i, Role::input, Access::read);  // the partition, or its staged copy (offload_param)
          use(in, buf, e_ * at, e_ * chunk, Role::output, Access::write, u, k);
          sch_.ops[in].uses.back().rank_stride = e_ * chunk;
        }
        at += chunk * c.n;
      }
      c.gathered = collective(c.name + ".all_reduce", CollectiveKind::all_reduce, group, e_ * aligned, 0, p_.dtype, ph,
                              comm_, {in}, layer);
      {  // a sum (every other rank's slots hold zeros); the output holds the parameters
        use(c.gathered, buf, 0, e_ * aligned, Role::input, Access::read);
        use(c.gathered, buf, 0, e_ * aligned, Role::param, Access::write);
      }
      Bytes offset = 0;  // the call's tensors are its members' gathered tensors, in order, each padded
      for (const Member& mm : members) {
        live_[mm.unit].buffers.push_back(buf);
        for (const TensorShape& t : p_.units[mm.unit].gathered_tensors) {
          live_[mm.unit].where.push_back({buf, offset});
          offset += e_ * ceil_div(t.numel(), c.n) * c.n;
        }
      }
      shared_[buf] = static_cast<int>(members.size());
      c.flat = false;  // no copy-out at the wait
    } else if (!c.quantized) {
      // Coalesced: torch.cat of the partitions into this rank's slice of the flat buffer, one all-gather.
      const OpId flat = alloc("flat" + suffix, Tier::gpu, MemCategory::buffers, "flat", e_ * out, ph, comm_, deps, layer);
      deps.push_back(flat);
      const OpId in = copy(c.name + ".copy_in", CopyKind::d2d, e_ * c.part, true, ph, comm_, deps, layer);
      cat_kernels(in, static_cast<std::int64_t>(c.ids.size()));
      if (sec) sch_.ops[in].copy.group = group;  // rank r's slot: r counts in the hpz group
      c.gathered = collective(c.name + ".all_gather", CollectiveKind::all_gather, group, e_ * out, 0, p_.dtype, ph,
                              comm_, {in}, layer);
      c.temps.push_back(flat);
      c.flat_buf = flat;
      {
        // torch.cat of the partitions into rank r's slot [r x part, (r + 1) x part), then an in-place all-gather.
        for (size_t i = 0; i < c.ids.size(); ++i) {
          const auto [u, k] = c.ids[i];
          use_source(c, in, i, Role::input, Access::read);
          use(in, flat, e_ * c.slot[i], e_ * c.chunk[i], Role::output, Access::write, u, k);
          sch_.ops[in].uses.back().rank_stride = e_ * c.part;
        }
        use(c.gathered, flat, 0, e_ * c.part, Role::input, Access::read);
        sch_.ops[c.gathered].uses.back().rank_stride = e_ * c.part;
        use(c.gathered, flat, 0, e_ * out, Role::output, Access::write);
      }
    } else {
      // qwZ (CUDAQuantizer on the partition, or on the torch.cat of the partitions): int8 values + fp32
      // scales in, the gathered int8 values + scales of the group out; two all-gathers.
      // Uses: the (concatenated) partition in, [own int8 | own scales] of the qwz buffer out; each all-gather from
      // this rank's part into the gathered int8 values / scales that follow it, rank-major.
      const QuantizedSize q = qwz_partition_bytes(c.part);
      std::optional<OpId> cat;
      if (c.flat) {
        cat = alloc("qwz_in" + suffix, Tier::gpu, MemCategory::buffers, "quant", e_ * c.part, ph, comm_, deps, layer);
        const OpId in = copy(c.name + ".copy_in", CopyKind::d2d, e_ * c.part, true, ph, comm_, {*cat}, layer);
        cat_kernels(in, static_cast<std::int64_t>(c.ids.size()));
        for (size_t i = 0; i < c.ids.size(); ++i) {
          const auto [u, k] = c.ids[i];
          use_source(c, in, i, Role::input, Access::read);
          use(in, *cat, e_ * c.slot[i], e_ * c.chunk[i], Role::output, Access::write, u, k);
        }
        deps = {in};
      }
      const OpId qbuf = alloc("qwz" + suffix, Tier::gpu, MemCategory::buffers, "quant", q.total() * (c.n + 1), ph, comm_,
                              deps, layer);
      const OpId qz = compute(c.name + ".quantize", ComputeKind::quantize, ph, {qbuf}, 0, c.part * e_ + q.total(),
                              c.part, layer, Device::gpu, comm_);
      sch_.ops[qz].compute.dtype = DType::int8;
      sch_.ops[qz].compute.kernel_launches = 1;  // CUDAQuantizer.quantize: one kernel over the partition
      {
        if (cat) use(qz, *cat, 0, e_ * c.part, Role::input, Access::read);
        else use_source(c, qz, 0, Role::input, Access::read);
        use(qz, qbuf, 0, q.data, Role::output, Access::write);
        use(qz, qbuf, q.data, q.scales, Role::output, Access::write);
      }
      if (cat) release(*cat, ph, comm_, {qz});
      const OpId ag = collective(c.name + ".all_gather", CollectiveKind::all_gather, group, q.data * c.n, 0, DType::int8,
                                 ph, comm_, {qz}, layer);
      c.gathered = collective(c.name + ".all_gather.scales", CollectiveKind::all_gather, group, q.scales * c.n,
                              q.scales * c.n, DType::fp32, ph, comm_, {qz}, layer);
      {
        use(ag, qbuf, 0, q.data, Role::input, Access::read);
        use(ag, qbuf, q.total(), q.data * c.n, Role::output, Access::write);
        use(c.gathered, qbuf, q.data, q.scales, Role::input, Access::read);
        use(c.gathered, qbuf, q.total() + q.data * c.n, q.scales * c.n, Role::output, Access::write);
      }
      c.temps.push_back(qbuf);
      c.qwz = qbuf;
    }
    c.last_read = c.gathered;
    for (OpId st : staging) release(st, ph, comm_, {c.gathered});
    for (const Member& m : members) live_[m.unit].pending.push_back(id);
    c.unwaited = static_cast<int>(members.size());
    calls_.push_back(std::move(c));
  }

  // The wait of call `id` (AllGatherCoalescedHandle.wait, on the all-gather stream): dequantize (qwZ),
  // then copy each parameter out of the flat buffer into its own storage (coalesced calls).
  void wait_call(int id, OpId after) {
    Call& c = calls_[id];
    if (c.waited) return;
    c.waited = true;
    const Phase ph = c.phase;
    const int layer = c.layer;
    OpId src = c.gathered;
    if (c.quantized) {
      // Every rank's int8 partition dequantized with its own scales into its padded place (a single tensor's
      // padded buffer, or the flat buffer the tensors are copied out of).
      const QuantizedSize q = qwz_partition_bytes(c.part);
      const Elements out = c.part * c.n;
      OpId target;
      if (c.flat) {
        target = alloc("flat" + tag() + ".c" + std::to_string(id), Tier::gpu, MemCategory::buffers, "flat", e_ * out, ph,
                       comm_, {src, after}, layer);
        c.temps.push_back(target);
        c.flat_buf = target;
      } else {
        const Member& m = c.members[0];
        target = alloc(gathered_name(m, id), Tier::gpu, MemCategory::buffers, m.prefetch ? "prefetch" : "gathered",
                       e_ * out, ph, comm_, {src, after}, layer);
        live_[m.unit].buffers.push_back(target);
        live_[m.unit].where.push_back({target, 0});
      }
      src = compute(c.name + ".dequantize", ComputeKind::dequantize, ph, {src, target}, 0, q.total() * c.n + e_ * out,
                    out, layer, Device::gpu, comm_);
      sch_.ops[src].compute.dtype = DType::int8;
      // One kernel over every rank's partition where each is whole blocks of its scales, else one per rank (zrun's
      // executor, runtime/exec/zeropp_ops.cpp qwz_dequantize; the layout is contiguous).
      const Bytes block = ceil_div(q.data, q.scales / kScaleBytes);
      sch_.ops[src].compute.kernel_launches = q.data % block == 0 ? 1 : c.n;
      {  // rank j's int8 values and scales -> its padded partition (blocks: one per rank)
        use(src, c.qwz, q.total(), q.data, Role::input, Access::read);
        use(src, c.qwz, q.total() + q.data * c.n, q.scales, Role::input, Access::read);
        use(src, target, 0, e_ * c.part, Role::output, Access::write);
        for (BufferUse& u : sch_.ops[src].uses) u.blocks = c.n, u.block_stride = u.bytes;
      }
    }
    std::map<int, OpId> done;
    if (c.flat) {
      const OpId flat = c.flat_buf;
      size_t i = 0;  // the call's tensor index
      for (const Member& m : c.members) {
        const FetchUnit& U = p_.units[m.unit];
        const OpId buf = alloc(gathered_name(m, id), Tier::gpu, MemCategory::buffers, m.prefetch ? "prefetch" : "gathered",
                               e_ * (U.gathered + hpz_tail(m.unit)), ph, comm_, {src, after}, U.layer);
        live_[m.unit].buffers.push_back(buf);
        for (size_t k = 0, off = 0; k < U.gathered_tensors.size(); off += U.gathered_tensors[k++].numel())
          live_[m.unit].where.push_back({buf, e_ * static_cast<Bytes>(off)});
        for (size_t j = 0, off = 0; j < U.gathered_tensors.size(); off += U.gathered_tensors[j++].numel(), ++i) {
          const TensorShape& t = U.gathered_tensors[j];
          src = copy((m.phase == Phase::forward ? "fwd." : "bwd.") + U.name + ".copy_out", CopyKind::d2d,
                     e_ * t.numel(), true, ph, comm_, {src, buf}, U.layer);
          {  // the tensor's chunk of every rank's slot (strided), its numel bytes out (padding dropped)
            const auto [u, k] = c.ids.at(i);
            use(src, flat, e_ * c.slot.at(i), e_ * c.chunk.at(i), Role::input, Access::read, u, k);
            sch_.ops[src].uses.back().blocks = c.n;
            sch_.ops[src].uses.back().block_stride = e_ * c.part;
            use(src, buf, e_ * static_cast<Bytes>(off), e_ * t.numel(), Role::output, Access::write, u, k);
          }
        }
        done[m.unit] = src;
      }
    }
    c.last_read = src;
    for (const Member& m : c.members) {
      const OpId d = c.flat ? done[m.unit] : src;
      live_[m.unit].done = std::max(live_[m.unit].done, d);
    }
  }

  // hpZ (_partition_param_sec, at the release after the step's first gather of the unit): each gathered tensor's
  // secondary partition, elements [j S, (j + 1) S) of it for rank j of the hpz group, copied into the unit's hpz
  // buffer (kept until the step). The copy reads S elements whatever is left of the tensor (DeepSpeed copies what
  // there is and leaves the rest of the slice unset; nothing reads it): past a tensor lies the next one, and past the
  // last the tail the unit's gathered buffer has for this (hpz_tail).
  void keep_secondary(int u, OpId gathered) {
    const FetchUnit& U = p_.units[u];
    Elements sec = 0;
    for (const auto& t : U.gathered_tensors) sec += secondary_numel(t);
    // With offload_param the secondary partition lives in (pinned) CPU memory, as the partition does
    // (_partition_param_sec: device=self.remote_device; stage_secondary).
    const bool on_cpu = p_.param_device == OffloadDevice::cpu;
    const OpId buf = alloc("hpz." + U.name + ".s" + std::to_string(step_), on_cpu ? Tier::cpu : Tier::gpu,
                           MemCategory::buffers, "hpz", e_ * sec, Phase::forward, comm_, {gathered}, U.layer);
    hpz_buffers_[u] = buf;
    const OpId cp = copy("fwd." + U.name + ".hpz_copy", on_cpu ? CopyKind::d2h : CopyKind::d2d, e_ * sec,
                         !on_cpu || s_.zero.offload_param.pin_memory, Phase::forward, comm_, {gathered, buf}, U.layer);
    hpz_copies_[u] = cp;
    sch_.ops[cp].copy.group = hpz_;
    if (!on_cpu) per_tensor_kernels(cp, static_cast<std::int64_t>(U.gathered_tensors.size()));  // per param
    size_t g = 0;  // the tensor's place among the unit's gathered tensors (live_.where)
    Elements at = 0;
    for (int k = 0; k < static_cast<int>(U.tensors.size()); ++k) {
      if (layout_.gathered[u][k] < 0) continue;
      const Elements S = secondary_numel(U.tensors[k]);
      const auto [from, offset] = live_.at(u).where.at(g++);
      use(cp, from, offset, e_ * S, Role::input, Access::read, u, k);
      sch_.ops[cp].uses.back().rank_stride = e_ * S;
      use(cp, buf, e_ * at, e_ * S, Role::output, Access::write, u, k);
      at += S;
    }
    live_[u].done = std::max(live_[u].done, cp);
  }
  // hpZ: what a unit's gathered buffer holds past its last tensor, so that the secondary copy's slice of it stays in
  // the buffer (its padding to the data-parallel world).
  Elements hpz_tail(int u) const {
    if (!p_.hpz_enabled || p_.units[u].gathered_tensors.empty()) return 0;
    const TensorShape& last = p_.units[u].gathered_tensors.back();
    return ceil_div(last.numel(), p_.dp) * p_.dp - last.numel();
  }

  // Unit u is needed now (fetch_sub_module's wait): waits for its calls; a call's temporaries are freed
  // once all its units have been waited for.
  void await_unit(int u, OpId after) {
    Live& l = live_[u];
    for (int id : l.pending) {
      wait_call(id, after);
      Call& c = calls_[id];
      if (--c.unwaited == 0)
        for (OpId t : c.temps) release(t, c.phase, comm_, {c.last_read});
    }
    l.pending.clear();
    if (p_.hpz_enabled && !hpz_buffers_.count(u) && !p_.units[u].gathered_tensors.empty()) keep_secondary(u, l.done);
  }

  // ---- gradient reduction -------------------------------------------------------------------------
  bool reduces_this_micro_step() const { return p_.stage >= 2 || last_micro_; }

  // The bucket now filling (the first one not yet reduced) gets its buffer when its first gradient is
  // produced (stages 2-3; stages 0-1 reduce in place in the whole gradient buffer).
  void open_current_bucket(int u) {
    if (p_.stage < 2 || next_reduce_ >= p_.buckets.size() || open_.count(next_reduce_)) return;
    open_[next_reduce_] = alloc("bucket." + std::to_string(next_reduce_) + tag(), Tier::gpu, MemCategory::buffers,
                                "bucket", e_ * p_.buckets[next_reduce_].elements, Phase::backward, compute_, {},
                                p_.units[u].layer);
    flush_bucket_free();
  }

  // With overlap_comm a bucket's buffer is still being reduced while the next one fills (double
  // buffering): its free is placed after the next bucket's alloc. Without it the free follows at once.
  void flush_bucket_free() {
    if (pending_free_) release(pending_free_->first, Phase::backward, rs_, {pending_free_->second});
    pending_free_.reset();
  }

  // Reduces the bucket now filling, which the backward segment `bwd` of unit u has completed.
  void reduce_current_bucket(int u, OpId bwd) {
    const size_t i = next_reduce_++;
    if (!reduces_this_micro_step()) return;
    if (defer_reductions()) {
      deferred_.push_back({i, u});
      return;
    }
    emit_reduction(i, u, bwd);
  }

  // DeepSpeed reduces stage 0 (buffered all-reduce fallback) and stage 1 without overlap_comm after the
  // whole backward pass, at the gradient-accumulation boundary; otherwise from the gradient hooks.
  bool defer_reductions() const { return p_.stage == 0 || (p_.stage == 1 && !p_.overlap_comm); }

  void emit_deferred_reductions() {
    if (p_.stage == 1 && !deferred_.empty()) {
      // Stage 1 without overlap_comm: reduce_gradients walks the parameters in model order after the
      // backward pass, so its buckets fill in that order (not the backward order of the hooks).
      for (size_t k = 0; k < boundary_calls_.size(); ++k) {
        const OpId done = emit_zero12_calls(boundary_calls_[k], "bwd.bucket" + std::to_string(k), last_bwd_, -1,
                                            flat_home());
        if (optimizer_offloaded())
          reduce_done_.push_back(copy_grads_to_cpu(boundary_ordinals_[k], "bwd.bucket" + std::to_string(k), done, -1,
                                                   -1));
        else
          reduce_done_.push_back(done);
        serial_dep_ = done;
      }
      deferred_.clear();
      return;
    }
    for (auto [i, u] : deferred_) emit_reduction(i, u, last_bwd_);
    deferred_.clear();
  }

  // ZeRO-1/2: DeepSpeed's calls per bucket (sim/plan/grad_reduction.hpp), for the plan's buckets
  // (backward order, as the gradient hooks fill them) and, for stage 1 without overlap_comm, the buckets
  // reduce_gradients fills in model order.
  void plan_zero12_reductions() {
    const auto& z = s_.zero;
    const FlatGradLayout layout = flat_grad_layout(p_, z.round_robin_gradients);
    flat_layout_ = layout;
    bucket_ordinals_ = bucket_tensor_ordinals(p_);
    ReductionSettings rs;
    rs.reduce_scatter = z.reduce_scatter;
    rs.multi_rank_bucket_allreduce = z.use_multi_rank_bucket_allreduce;
    rs.contiguous_gradients = z.contiguous_gradients || optimizer_offloaded();
    rs.reduce_bucket_size = z.reduce_bucket_size;
    sequential_calls_ = rs.contiguous_gradients && (rs.multi_rank_bucket_allreduce || !rs.reduce_scatter);
    for (const auto& ts : bucket_ordinals_) bucket_calls_.push_back(bucket_reduction_calls(ts, layout, rs));
    if (p_.stage == 1 && !p_.overlap_comm) {
      std::vector<int> model_order(layout.numel.size());
      for (size_t t = 0; t < model_order.size(); ++t) model_order[t] = static_cast<int>(t);
      for (const auto& ts : fill_buckets(model_order, layout, z.reduce_bucket_size)) {
        boundary_calls_.push_back(bucket_reduction_calls(ts, layout, rs));
        boundary_ordinals_.push_back(ts);
      }
    }
  }

  // Where the gradients a ZeRO-1/2 bucket reduces lie in the schedule: stage 2 in the bucket's buffer (its tensors in
  // bucket order, as the hooks copied them in), stage 1 in the whole gradient buffer (DeepSpeed's flat order).
  struct GradHome {
    OpId buffer = -1;
    std::map<int, Elements> at;  // tensor ordinal -> its first element in `buffer`
    Bytes where(const GradPiece& g) const { return at.at(g.tensor) + g.first; }
  };
  GradHome bucket_home(size_t i) const {
    GradHome h{open_.at(i), {}};
    Elements at = 0;
    for (int t : bucket_ordinals_.at(i)) {
      h.at[t] = at;
      at += flat_layout_.numel[t];
    }
    return h;
  }
  GradHome flat_home() const {
    GradHome h{grads_, {}};
    for (size_t t = 0; t < flat_layout_.offset.size(); ++t) h.at[static_cast<int>(t)] = flat_layout_.offset[t];
    return h;
  }
  // A copy op's pairs: each piece from `from` (at its place there) to `to` (consecutively from `to_first`), or back.
  void use_pieces(OpId op, const std::vector<GradPiece>& pieces, const GradHome& home, OpId flat, Elements flat_first,
                  bool to_flat) {
    Elements pos = flat_first;
    for (const GradPiece& g : pieces) {
      const Bytes a = e_ * home.where(g), b = e_ * pos, n = e_ * g.elements;
      if (to_flat) {
        use(op, home.buffer, a, n, Role::input, Access::read);
        use(op, flat, b, n, Role::output, Access::write);
      } else {
        use(op, flat, b, n, Role::input, Access::read);
        use(op, home.buffer, a, n, Role::output, Access::write);
      }
      pos += g.elements;
    }
  }
  // The first element of the pieces in `home` when they fill one range there (in any order), else -1: a collective
  // that DeepSpeed runs on a view can run in place on that range (a reduction is elementwise).
  static Elements contiguous_range(std::vector<GradPiece> pieces, const GradHome& home) {
    if (pieces.empty()) return -1;
    std::sort(pieces.begin(), pieces.end(),
              [&](const GradPiece& a, const GradPiece& b) { return home.where(a) < home.where(b); });
    for (size_t k = 1; k < pieces.size(); ++k)
      if (home.where(pieces[k - 1]) + pieces[k - 1].elements != home.where(pieces[k])) return -1;
    return home.where(pieces.front());
  }

  // A gradient reduction in place on `n` elements at byte `offset` of `buffer` (-1: no uses written), in the
  // communication dtype: when it differs from the training dtype, DeepSpeed reduces `tensor.to(comm dtype)`, a new
  // buffer, and copies the result back into the tensor on the ranks that receive it (stage_1_and_2.py
  // allreduce_bucket, gradient_reduction_w_predivide; engine.py allreduce_bucket): a cast buffer, a cast copy in,
  // the collective, a cast copy back (on the root only for a reduce), the buffer freed.
  OpId reduce_in_place(const std::string& name, CollectiveKind kind, int root, OpId buffer, Bytes offset, Elements n,
                       std::vector<OpId> deps, int layer) {
    const Phase ph = Phase::backward;
    const bool uses = buffer >= 0;
    const bool reduce = kind == CollectiveKind::reduce;
    const std::string cname = name + (reduce ? ".reduce" : ".all_reduce");
    if (p_.comm_dtype == p_.dtype) {
      const OpId c = collective(cname, kind, world_, e_ * n, 0, p_.dtype, ph, rs_, deps, layer);
      sch_.ops[c].collective.root = root;
      if (uses) {
        use(c, buffer, offset, e_ * n, Role::input, Access::read);
        use(c, buffer, offset, e_ * n, Role::output, Access::write);
      }
      return c;
    }
    const Bytes cb = dtype_bits(p_.comm_dtype) / 8;
    const OpId buf = alloc("comm_cast." + name + tag(), Tier::gpu, MemCategory::buffers, "comm_cast", cb * n, ph, rs_,
                           deps, layer);
    const OpId in = copy(name + ".cast", CopyKind::d2d, cb * n, true, ph, rs_, {buf}, layer);
    set_cast(in, p_.dtype, p_.comm_dtype);
    const OpId c = collective(cname, kind, world_, cb * n, 0, p_.comm_dtype, ph, rs_, {in}, layer);
    sch_.ops[c].collective.root = root;
    const OpId back = copy(name + ".cast_back", CopyKind::d2d, e_ * n, true, ph, rs_, {c}, layer);
    set_cast(back, p_.comm_dtype, p_.dtype);
    sch_.ops[back].copy.rank = reduce ? root : -1;
    if (uses) {
      use(in, buffer, offset, e_ * n, Role::input, Access::read);
      use(in, buf, 0, cb * n, Role::output, Access::write);
      use(c, buf, 0, cb * n, Role::input, Access::read);
      use(c, buf, 0, cb * n, Role::output, Access::write);
      use(back, buf, 0, cb * n, Role::input, Access::read);
      use(back, buffer, offset, e_ * n, Role::output, Access::write);
    }
    return release(buf, ph, rs_, {back});
  }
  void set_cast(OpId op, DType from, DType to) {
    sch_.ops[op].copy.cast = true;
    sch_.ops[op].copy.cast_from = from;
    sch_.ops[op].copy.cast_to = to;
  }
  // The kernels a d2d copy runs (CopyOp::kernel_launches): a torch.cat of `inputs` tensors one per 128 of them
  // (PyTorch's CUDA cat copies its inputs in batches of CAT_ARRAY_BATCH_SIZE = 128, one kernel a batch:
  // aten/src/ATen/native/cuda/Shape.cu), a loop of DeepSpeed's over `n` parameters one per parameter.
  void cat_kernels(OpId op, std::int64_t inputs) {
    sch_.ops[op].copy.kernel_launches = static_cast<int>(std::max<std::int64_t>(1, ceil_div(inputs, 128)));
  }
  void per_tensor_kernels(OpId op, std::int64_t n) {
    sch_.ops[op].copy.kernel_launches = static_cast<int>(std::max<std::int64_t>(1, n));
  }

  // One op per DeepSpeed call: per ReductionCall, the flat buffer and its torch.cat (d2d), the all_reduce or
  // reduce (with its casts to and from communication_data_type), and the copy of each slice back out of the flat
  // buffer (on its owner only). `home`: where the call's gradient pieces lie (buffer -1: no uses written).
  OpId emit_zero12_calls(const std::vector<ReductionCall>& calls, const std::string& name, OpId bwd, int layer,
                         const GradHome& home) {
    const Phase ph = Phase::backward;
    OpId last = bwd;
    const bool uses = home.buffer >= 0;
    for (size_t k = 0; k < calls.size(); ++k) {
      const ReductionCall& c = calls[k];
      const std::string cname = calls.size() > 1 ? name + ".call" + std::to_string(k) : name;
      std::vector<OpId> deps{bwd};
      std::optional<OpId> flat, staged;
      OpId target = -1;  // the buffer the collective runs in, in place
      Bytes at = 0;
      if (c.flatten) {
        flat = alloc("flat." + cname + tag(), Tier::gpu, MemCategory::buffers, "reduce_flat", e_ * c.elements, ph,
                     rs_, deps, layer);
        deps = {copy(cname + ".flatten", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {*flat}, layer)};
        cat_kernels(deps[0], static_cast<std::int64_t>(c.pieces.size()));  // self.flatten: torch.cat
        if (uses) use_pieces(deps[0], c.pieces, home, *flat, 0, true);
        target = *flat;
      } else if (uses) {
        const Elements first = contiguous_range(c.pieces, home);
        if (first >= 0) {
          target = home.buffer;
          at = e_ * first;
        } else {
          // Stage 1 with round_robin_gradients: the call's gradients are not one range of the flat buffer. DeepSpeed
          // reduces them in its ipg bucket buffer, into which the hook copied each gradient
          // (reduce_independent_p_g_buckets_and_remove_grads: `new_grad_tensor.copy_(grad_reduc)`); so does the
          // schedule (a `bucket` buffer and a `.to_bucket` copy), and it copies the result back into `grads` on the
          // ranks that receive it, where the step reads it (DeepSpeed: copy_grads_in_partition).
          staged = alloc("ipg." + cname + tag(), Tier::gpu, MemCategory::buffers, "bucket", e_ * c.elements, ph, rs_,
                         deps, layer);
          deps = {copy(cname + ".to_bucket", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {*staged}, layer)};
          per_tensor_kernels(deps[0], static_cast<std::int64_t>(c.pieces.size()));  // each hook's copy_
          use_pieces(deps[0], c.pieces, home, *staged, 0, true);
          target = *staged;
        }
      }
      last = reduce_in_place(cname, c.kind, c.root, target, at, c.elements, deps, layer);
      if (staged) {
        last = copy(cname + ".from_bucket", CopyKind::d2d, e_ * c.elements, true, ph, rs_, {last}, layer);
        per_tensor_kernels(last, static_cast<std::int64_t>(c.pieces.size()));
        sch_.ops[last].copy.rank = c.kind == CollectiveKind::reduce ? c.root : -1;
        use_pieces(last, c.pieces, home, *staged, 0, false);
        last = release(*staged, ph, rs_, {last});
      }
      const OpId coll = last;
      Elements pos = 0;
      for (size_t j = 0; j < c.copy_out.size(); ++j) {
        last = copy(cname + ".copy_out" + std::to_string(j), CopyKind::d2d, e_ * c.copy_out[j].elements, true, ph,
                    rs_, {coll}, layer);
        sch_.ops[last].copy.rank = c.copy_out[j].owner;
        per_tensor_kernels(last, static_cast<std::int64_t>(c.copy_out[j].pieces.size()));  // buf.copy_(synced) each
        if (uses) use_pieces(last, c.copy_out[j].pieces, home, *flat, pos, false);  // back to its place
        pos += c.copy_out[j].elements;
      }
      if (flat) last = release(*flat, ph, rs_, {last});
    }
    return last;
  }

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

  // Stage 2: copy_grads_in_partition (stage_1_and_2.py reduce_ipg_grads): each rank copies the reduced
  // gradients it owns out of the bucket into its gradient partition, adding to what earlier micro-steps left
  // there (DeepSpeed: the next micro-step's autograd accumulates into the partition's views). One copy per
  // (tensor, owner) overlap, run by that owner.
  OpId copy_grads_in_partition(size_t i, const std::string& name, OpId done, int layer) {
    const Elements P = p_.param_partition;
    Elements at = 0;  // the tensor's first element in the bucket
    OpId last = done;
    int k = 0;
    for (int t : bucket_ordinals_.at(i)) {
      const Elements begin = flat_layout_.offset[t];
      for_each_owned_piece(t, [&](int owner, Elements a, Elements b) {
        const OpId c = copy(name + ".copy_grads_in_partition" + std::to_string(k++), CopyKind::d2d, e_ * (b - a), true,
                            Phase::backward, rs_, {done}, layer);
        sch_.ops[c].copy.rank = owner;
        if (open_.count(i)) {
          use(c, open_.at(i), e_ * (at + a - begin), e_ * (b - a), Role::input, Access::read);
          use(c, grad_partition_, e_ * (a - owner * P), e_ * (b - a), Role::output, Access::read_write);
        }
        last = c;
      });
      at += flat_layout_.numel[t];
    }
    return last;
  }

  // ZeRO-1/2 with optimizer offload: copy_grads_in_partition (stage_1_and_2.py), run after each reduction on the
  // reduction's stream (reduce_ipg_grads), per tensor with elements in a rank's partition, by that rank:
  // - grad_accum > 1, async_accumulate_grad_in_cpu_via_gpu, on the whole tensor (param.numel()) in 16 bits: at
  //   micro-step 0 a d2h into the tensor's pinned host buffer (accumulated_grads_in_cpu); after, an h2d of that buffer
  //   into temp_grad_buffer_for_gpu_offload and an add into the reduced gradient on the GPU. DeepSpeed's current code
  //   copies the sum back down at micro-step 0 only; the schedule copies it back at every micro-step before the
  //   boundary, as DeepSpeed's earlier releases did (`if not self.is_gradient_accumulation_boundary`), so that the host
  //   copy is the running sum for any grad_accum (for 2 micro-steps the two agree).
  // - at the boundary, async_inplace_copy_grad_to_fp32_buffer_from_gpu: the partition's elements are converted on the
  //   GPU (`src_tensor.to(master_weights_and_grads_dtype)`: a transient fp32 tensor, here one buffer per bucket reused
  //   tensor after tensor) and copied down in fp32 into the CPU optimizer's gradients.
  // `bucket`: the bucket's buffer (stage 2, tensors in `ordinals` order), or -1: the whole gradient buffer (stage 1).
  OpId copy_grads_to_cpu(const std::vector<int>& ordinals, const std::string& name, OpId done, int layer, OpId bucket) {
    const Phase ph = Phase::backward;
    const Elements P = p_.param_partition;
    const bool accumulate = s_.training.grad_accum > 1, uses = sequential_calls_ || bucket < 0;
    const bool pinned = s_.zero.offload_optimizer.pin_memory;
    const OpId src = bucket >= 0 ? bucket : grads_;
    Elements widest = 0;  // the largest (tensor, owner) piece: the fp32 conversion's buffer
    for (int t : ordinals) for_each_owned_piece(t, [&](int, Elements a, Elements b) { widest = std::max(widest, b - a); });
    OpId last = done, fp32 = -1;
    if (last_micro_)
      last = fp32 = alloc("grads.to_fp32." + name + tag(), Tier::gpu, MemCategory::buffers, "offload_cast",
                          kFp32 * widest, ph, rs_, {done}, layer);
    Elements at = 0;  // the tensor's first element in the bucket
    int k = 0;
    for (int t : ordinals) {
      const Elements begin = flat_layout_.offset[t], numel = flat_layout_.numel[t];
      const Bytes from = e_ * (bucket >= 0 ? at : begin);  // the tensor's gradient in `src`
      for_each_owned_piece(t, [&](int owner, Elements a, Elements b) {
        const std::string piece = name + ".t" + std::to_string(k++);
        auto on_owner = [&](OpId c) {
          sch_.ops[c].copy.rank = owner;
          return last = c;
        };
        if (accumulate) {
          const Bytes acc = accum_at_.at({t, owner});
          auto down = [&](const std::string& what) {
            const OpId c = on_owner(copy(piece + what, CopyKind::d2h, e_ * numel, pinned, ph, rs_, {last}, layer));
            if (uses) use_copy(sch_.ops[c], {src, from, e_ * numel}, {grads_accum_, acc, e_ * numel});
          };
          if (micro_ == 0) {
            down(".accum_d2h");
          } else {
            const OpId up = on_owner(copy(piece + ".accum_h2d", CopyKind::h2d, e_ * numel, pinned, ph, rs_, {last},
                                          layer));
            const OpId add = on_owner(copy(piece + ".accum_add", CopyKind::d2d, e_ * numel, true, ph, rs_, {up}, layer));
            if (uses) {
              use_copy(sch_.ops[up], {grads_accum_, acc, e_ * numel}, {offload_temp_, 0, e_ * numel});
              use(add, offload_temp_, 0, e_ * numel, Role::input, Access::read);
              use(add, src, from, e_ * numel, Role::output, Access::read_write);
            }
            if (!last_micro_) down(".accum_d2h");
          }
        }
        if (last_micro_) {
          const OpId cast = on_owner(copy(piece + ".to_fp32", CopyKind::d2d, kFp32 * (b - a), true, ph, rs_, {last},
                                          layer));
          set_cast(cast, p_.dtype, DType::fp32);
          const OpId d = on_owner(copy(piece + ".d2h", CopyKind::d2h, kFp32 * (b - a), pinned, ph, rs_, {cast}, layer));
          if (uses) {
            use_copy(sch_.ops[cast], {src, from + e_ * (a - begin), e_ * (b - a)}, {fp32, 0, kFp32 * (b - a)});
            use_copy(sch_.ops[d], {fp32, 0, kFp32 * (b - a)}, {grads_fp32_, kFp32 * (a - owner * P), kFp32 * (b - a)});
          }
        }
      });
      at += numel;
    }
    if (fp32 >= 0) last = release(fp32, ph, rs_, {last});
    return last;
  }

  void emit_reduction(size_t i, int u, OpId bwd) {
    const GradBucket& b = p_.buckets[i];
    const std::string name = "bwd.bucket" + std::to_string(i);
    const int layer = p_.units[u].layer;
    OpId done;
    if (p_.stage == 1 || p_.stage == 2) {
      // Stage 2 reduces in the bucket's buffer (its tensors in bucket order); stage 1 with overlap_comm in the whole
      // gradient buffer, each gradient at its flat offset.
      done = emit_zero12_calls(bucket_calls_[i], name, bwd, layer, p_.stage == 2 ? bucket_home(i) : flat_home());
      // Stage 2 keeps the reduced gradients of its partition: copy_grads_in_partition with contiguous_gradients;
      // without, the in-partition param.grad tensors stay and the step flattens them (reduce_ipg_grads,
      // independent_gradient_partition_epilogue -> get_flat_partition): the same bytes, into grads.partition here.
      if (p_.stage == 2 && !optimizer_offloaded()) done = copy_grads_in_partition(i, name, done, layer);
    } else if (p_.stage == 0) {
      // In place in the whole gradient buffer: a bucket is a run of consecutive tensors in model order.
      Elements first = p_.params;
      for (const auto& [mu, k] : b.members) first = std::min(first, flat_offset(mu, k));
      done = reduce_in_place(name, CollectiveKind::all_reduce, -1, grads_, e_ * first, b.elements, {bwd}, layer);
    } else if (p_.qgz) {
      done = qgz_reduce(i, name, bwd, layer);
    } else {
      done = zero3_reduce(i, all_members(b), name, bwd, layer);
    }
    if (optimizer_offloaded() && (p_.stage == 1 || p_.stage == 2)) {
      done = copy_grads_to_cpu(bucket_ordinals_.at(i), name, done, layer, p_.stage == 2 ? open_.at(i) : -1);
    }
    if (open_.count(i)) {
      pending_free_ = {open_[i], done};
      if (!p_.overlap_comm) flush_bucket_free();
      open_.erase(i);
    }
    reduce_done_.push_back(done);
    if (!p_.overlap_comm) serial_dep_ = done;
  }

  // ZeRO-3 (stage3.py __reduce_and_partition_ipg_grads -> __avg_scatter_grads -> coalesced_collectives.py
  // reduce_scatter_coalesced -> partition_grads): the bucket's gradients, each cut into dp chunks of
  // ceil(numel / dp), are interleaved rank-major into a new flat buffer (torch.cat, padding after short chunks),
  // reduce-scattered in place (rank r keeps slot r), and each tensor's reduced chunk is added into its place in
  // grads.partition (copy_ at micro-step 0, add_ after). A bucket of
  // one tensor that divides evenly is reduce-scattered in the bucket buffer itself, without the cat.
  //
  // With a communication_data_type other than the training dtype, __avg_scatter_grads first casts each gradient
  // (`g.to(communication_data_type)`, new tensors: one cast copy of the bucket here), interleaves and
  // reduce-scatters in that dtype, then casts this rank's reduced chunks back (`g.to(self.dtype)`, new tensors)
  // before partition_grads adds them.
  //
  // `members` are the bucket's tensors this call reduces (all of them, or qgZ's fallback tensors), in bucket order.
  static std::vector<size_t> all_members(const GradBucket& b) {
    std::vector<size_t> m(b.tensors.size());
    for (size_t j = 0; j < m.size(); ++j) m[j] = j;
    return m;
  }
  // Offset of each of the bucket's tensors in its buffer (bucket order).
  static std::vector<Elements> bucket_offsets(const GradBucket& b) {
    std::vector<Elements> at;
    Elements off = 0;
    for (const TensorShape& t : b.tensors) at.push_back(std::exchange(off, off + t.numel()));
    return at;
  }
  OpId zero3_reduce(size_t i, const std::vector<size_t>& members, const std::string& name, OpId bwd, int layer) {
    const GradBucket& b = p_.buckets[i];
    const Phase ph = Phase::backward;
    const int n = p_.dp;
    const bool cast = p_.comm_dtype != p_.dtype;
    const Bytes ce = dtype_bits(p_.comm_dtype) / 8;  // bytes of a reduced element
    const std::vector<Elements> at = bucket_offsets(b);
    std::vector<Elements> slot(b.tensors.size(), 0);  // per member: offset in a rank's slot
    Elements part = 0, elements = 0;
    for (size_t j : members) {
      slot[j] = part;
      part += ceil_div(b.tensors[j].numel(), n);
      elements += b.tensors[j].numel();
    }
    const bool in_place = b.tensors.size() == 1 && b.tensors[0].numel() % n == 0;
    // The bucket buffer the backward wrote (a cast of part of a bucket, beside qgZ, has none yet).
    const bool uses = open_.count(i) > 0 && (!cast || members.size() == b.tensors.size());
    std::vector<OpId> deps{bwd};
    OpId flat = uses ? open_.at(i) : -1;
    std::vector<OpId> temps;  // freed after the partition copy
    if (cast) {
      const OpId buf = alloc("comm_cast." + std::to_string(i) + tag(), Tier::gpu, MemCategory::buffers, "comm_cast",
                             ce * elements, ph, rs_, deps, layer);
      const OpId c = copy(name + ".cast", CopyKind::d2d, ce * elements, true, ph, rs_, {buf}, layer);
      set_cast(c, p_.dtype, p_.comm_dtype);
      per_tensor_kernels(c, static_cast<std::int64_t>(members.size()));  // [g.to(communication_data_type) ...]
      for (size_t j : members) {  // all of the bucket's tensors where there are uses
        if (!uses) break;
        const auto [u, k] = b.members[j];
        use(c, flat, e_ * at[j], e_ * b.tensors[j].numel(), Role::input, Access::read, u, k);
        use(c, buf, ce * at[j], ce * b.tensors[j].numel(), Role::output, Access::write, u, k);
      }
      deps = {c};
      flat = uses ? buf : -1;
      temps.push_back(buf);
    }
    if (!in_place) {
      const OpId cat = alloc("interleave." + std::to_string(i) + tag(), Tier::gpu, MemCategory::buffers, "interleave",
                             ce * part * n, ph, rs_, deps, layer);
      const OpId c = copy(name + ".interleave", CopyKind::d2d, ce * elements, true, ph, rs_, {cat}, layer);
      // The cat's inputs (coalesced_collectives.py reduce_scatter_coalesced): for each rank and member, its chunk
      // when not empty and a padding tensor when short. Each rank has one input of each member (its full chunk, or an
      // empty chunk's padding) but the rank of a short last chunk, which has two (the chunk and its padding).
      std::int64_t inputs = 0;
      for (size_t j : members) inputs += n + (b.tensors[j].numel() % ceil_div(b.tensors[j].numel(), n) != 0);
      cat_kernels(c, inputs);
      for (size_t j : members) {
        if (!uses) break;
        // Tensor j's full chunks (strided in the output by a rank's slot), then its short last chunk.
        const auto [u, k] = b.members[j];
        const Elements numel = b.tensors[j].numel(), chunk = ceil_div(numel, n), full = numel / chunk,
                       rest = numel % chunk;
        use(c, flat, ce * at[j], ce * chunk, Role::input, Access::read, u, k);
        sch_.ops[c].uses.back().blocks = static_cast<int>(full);
        sch_.ops[c].uses.back().block_stride = ce * chunk;
        use(c, cat, ce * slot[j], ce * chunk, Role::output, Access::write, u, k);
        sch_.ops[c].uses.back().blocks = static_cast<int>(full);
        sch_.ops[c].uses.back().block_stride = ce * part;
        if (rest > 0) {
          use(c, flat, ce * (at[j] + full * chunk), ce * rest, Role::input, Access::read, u, k);
          use(c, cat, ce * (slot[j] + full * part), ce * rest, Role::output, Access::write, u, k);
        }
      }
      deps = {c};
      flat = uses ? cat : -1;
      temps.push_back(cat);
    }
    OpId done = collective(name + ".reduce_scatter", CollectiveKind::reduce_scatter, world_, ce * part * n, 0,
                           p_.comm_dtype, ph, rs_, deps, layer);
    if (uses) {
      use(done, flat, 0, ce * part * n, Role::input, Access::read);
      use(done, flat, 0, ce * part, Role::output, Access::write);
      sch_.ops[done].uses.back().rank_stride = ce * part;
    }
    Bytes src_stride = e_ * part;  // where this rank's reduced chunks are: slot r of `flat`, or the cast-back buffer
    if (cast) {
      const OpId back = alloc("comm_cast_back." + std::to_string(i) + tag(), Tier::gpu, MemCategory::buffers,
                              "comm_cast", e_ * part, ph, rs_, {done}, layer);
      const OpId c = copy(name + ".cast_back", CopyKind::d2d, e_ * part, true, ph, rs_, {done, back}, layer);
      set_cast(c, p_.comm_dtype, p_.dtype);
      per_tensor_kernels(c, static_cast<std::int64_t>(members.size()));  // [g.to(self.dtype) ...] per partition
      for (size_t j : members) {
        if (!uses) break;
        const auto [u, k] = b.members[j];
        const Elements chunk = ceil_div(b.tensors[j].numel(), n);
        use(c, flat, ce * slot[j], ce * chunk, Role::input, Access::read, u, k);
        sch_.ops[c].uses.back().rank_stride = ce * part;
        use(c, back, e_ * slot[j], e_ * chunk, Role::output, Access::write, u, k);
      }
      done = c;
      flat = uses ? back : -1;
      src_stride = 0;
      temps.push_back(back);
    }
    if (optimizer_offloaded()) {
      std::vector<ReducedChunk> chunks;
      for (size_t j : members) {
        const auto [u, k] = b.members[j];
        chunks.push_back({u, k, e_ * slot[j], ceil_div(b.tensors[j].numel(), n), layout_.partition[u][k]});
      }
      done = partition_grads_to_cpu(chunks, uses ? flat : -1, src_stride, name, done, layer);
    } else {
      done = copy(name + ".partition", CopyKind::d2d, e_ * part, true, ph, rs_, {done}, layer);
      per_tensor_kernels(done, static_cast<std::int64_t>(members.size()));  // partition_grads: copy_ / add_ per param
      for (size_t j : members) {
        if (!uses) break;
        const auto [u, k] = b.members[j];
        use(done, flat, e_ * slot[j], e_ * ceil_div(b.tensors[j].numel(), n), Role::input, Access::read, u, k);
        sch_.ops[done].uses.back().rank_stride = src_stride;
        use_grad_partition(done, u, k);
      }
    }
    for (OpId t : temps) done = release(t, ph, rs_, {done});
    return done;
  }
  // One tensor's reduced chunk on this rank: `from` bytes into the reduction's buffer (plus the rank's index x the
  // buffer's rank stride), `elements` long, element `to` of the rank's gradient partition.
  struct ReducedChunk {
    int unit = -1, tensor = -1;
    Bytes from = 0;
    Elements elements = 0, to = 0;
  };
  // Stage 3 with optimizer offload: partition_grads (stage3.py), on the reduction's stream, tensor by tensor. The
  // 16-bit gradient partitions live in host memory (grad_partitions_flat_buffer: pinned with pin_memory, of
  // gradient_accumulation_dtype, which is the training dtype under ZeRO: engine.py get_data_types). At micro-step 0
  // the reduced chunk is copied down into it and back up (`grad_buffer.to(grad_partition.device)`, a GPU copy that
  // partition_grads keeps in the `buffers` it returns: one buffer per bucket here); after, the host partition comes up,
  // the reduced chunk is added on the GPU and the sum goes back down ("adding directly to cpu is very slow"). At the
  // boundary (_offload_grad_partition_at_boundary) the GPU copy is converted to fp32 (`.to(master_weights_and_grads_
  // dtype)`: a transient tensor, one buffer per bucket here reused chunk after chunk) and copied down into the CPU
  // optimizer's fp32 gradients. `src` < 0: ops without uses.
  OpId partition_grads_to_cpu(const std::vector<ReducedChunk>& chunks, OpId src, Bytes rank_stride,
                              const std::string& name, OpId done, int layer) {
    const Phase ph = Phase::backward;
    const bool pinned = s_.zero.offload_optimizer.pin_memory, uses = src >= 0;
    Elements total = 0, widest = 0;
    for (const ReducedChunk& c : chunks) total += c.elements, widest = std::max(widest, c.elements);
    const OpId gpu16 = alloc("grads.partition16.gpu." + name + tag(), Tier::gpu, MemCategory::buffers, "grad_buffer",
                             e_ * total, ph, rs_, {done}, layer);
    // With the optimizer on NVMe the fp32 conversions are kept for the bucket (offload_fp32_gradients) and swapped out
    // together at its end; on the CPU each is copied down at once and its buffer reused.
    const bool swap = p_.optimizer_device == OffloadDevice::nvme;
    OpId last = gpu16, fp32 = -1;
    if (last_micro_)
      last = fp32 = alloc("grads.to_fp32." + name + tag(), Tier::gpu, MemCategory::buffers, "offload_cast",
                          kFp32 * (swap ? total : widest), ph, rs_, {gpu16}, layer);
    Bytes at = 0;  // the chunk's place in gpu16
    for (size_t j = 0; j < chunks.size(); ++j) {
      const ReducedChunk& c = chunks[j];
      const Bytes bytes = e_ * c.elements, host = e_ * c.to;
      const std::string piece = name + ".t" + std::to_string(j);
      auto step = [&](const std::string& what, CopyKind kind, Bytes moved) {
        return last = copy(piece + what, kind, moved, kind == CopyKind::d2d || pinned, ph, rs_, {last}, layer);
      };
      BufferUse reduced{src, c.from, bytes, Role::input, Access::read, c.unit, c.tensor};
      reduced.rank_stride = rank_stride;
      const BufferUse on_gpu{gpu16, at, bytes, Role::input, Access::read, c.unit, c.tensor};
      const BufferUse on_host{grads_host16_, host, bytes, Role::input, Access::read, c.unit, c.tensor};
      if (micro_ == 0) {
        const OpId down = step(".d2h16", CopyKind::d2h, bytes), up = step(".h2d16", CopyKind::h2d, bytes);
        if (uses) use_copy(sch_.ops[down], reduced, on_host), use_copy(sch_.ops[up], on_host, on_gpu);
      } else {
        const OpId up = step(".h2d16", CopyKind::h2d, bytes), add = step(".add", CopyKind::d2d, bytes),
                   down = step(".d2h16", CopyKind::d2h, bytes);
        if (uses) {
          use_copy(sch_.ops[up], on_host, on_gpu);
          sch_.ops[add].uses.push_back(reduced);
          sch_.ops[add].uses.push_back({gpu16, at, bytes, Role::output, Access::read_write, c.unit, c.tensor});
          use_copy(sch_.ops[down], on_gpu, on_host);
        }
      }
      if (last_micro_) {
        const OpId cast = step(".to_fp32", CopyKind::d2d, kFp32 * c.elements);
        set_cast(cast, p_.dtype, DType::fp32);
        const BufferUse temp{fp32, swap ? kFp32 * (at / e_) : 0, kFp32 * c.elements, Role::input, Access::read, c.unit, c.tensor};
        if (uses) use_copy(sch_.ops[cast], on_gpu, temp);
        if (!swap) {
          const OpId down = step(".d2h", CopyKind::d2h, kFp32 * c.elements);
          if (uses)
            use_copy(sch_.ops[down], temp,
                     {grads_fp32_, kFp32 * c.to, kFp32 * c.elements, Role::output, Access::write, c.unit, c.tensor});
        }
      }
      at += bytes;
    }
    if (swap && last_micro_) last = swap_out_gradients(chunks, total, uses ? fp32 : -1, name, last, layer);
    if (fp32 >= 0) last = release(fp32, ph, rs_, {last});
    return release(gpu16, ph, rs_, {last});
  }
  // The optimizer on NVMe: _swap_out_offload_fp32_gradients -> the optimizer swapper's swap_out_gradients
  // (swap_tensor/optimizer_utils.py _swap_out_gradients -> AsyncTensorSwapper.swap_out_tensors): each fp32 gradient
  // chunk is copied into pinned swap memory and written, asynchronously, to its place in the sub-group's gradient
  // swap file (here: its range of grads.fp32 on the NVMe tier). The step's swap-in reads them back with the state.
  // `total`: the chunks' elements; `fp32` < 0: ops without uses.
  // The chunks are staged through the swapper's pinned pool (`allocate_all` into the AsyncTensorSwapper), in turn
  // around it: a chunk waits for the writes of the chunks that held its bytes before. A chunk larger than the pool
  // (zsim's sub-groups may cut a tensor, DeepSpeed's never do) gets a pinned buffer of its own.
  OpId swap_out_gradients(const std::vector<ReducedChunk>& chunks, Elements total, OpId fp32, const std::string& name,
                          OpId after, int layer) {
    const Phase ph = Phase::backward;
    const Bytes pool_bytes = opt_swap_pool_ >= 0 ? sch_.ops[opt_swap_pool_].mem.bytes : 0;
    std::optional<OpId> own;
    if (std::any_of(chunks.begin(), chunks.end(), [&](const ReducedChunk& c) { return kFp32 * c.elements > pool_bytes; }))
      own = alloc("grads.swap_out." + name + tag(), Tier::cpu, MemCategory::buffers, "nvme_swap", kFp32 * total, ph,
                  rs_, {after}, layer);
    OpId last = own ? *own : after;
    const OpId buffer = own ? *own : opt_swap_pool_;
    std::vector<OpId> writes;
    Bytes at = 0;
    for (size_t j = 0; j < chunks.size(); ++j) {
      const ReducedChunk& c = chunks[j];
      const Bytes bytes = kFp32 * c.elements;
      const std::string piece = name + ".t" + std::to_string(j);
      // Where the chunk is staged: its place in its own buffer, or the pool's next bytes (from 0 when it does not fit),
      // at an io-aligned slot as AsyncTensorSwapper inserts it (`_io_aligned_numel`: 1024 bytes).
      Bytes place = at;
      std::vector<OpId> deps{last};
      if (!own) {
        if (pool_at_ + bytes > pool_bytes) pool_at_ = 0;
        place = pool_at_;
        pool_at_ += kFp32 * swap_io_aligned(c.elements, kFp32);
        for (auto it = pool_writes_.begin(); it != pool_writes_.end();)  // the writes out of these bytes before
          if (it->first.first < place + bytes && place < it->first.second) deps.push_back(it->second), it = pool_writes_.erase(it);
          else ++it;
      }
      last = copy(piece + ".d2h", CopyKind::d2h, bytes, true, ph, rs_, deps, layer);
      const OpId w = copy(piece + ".grad_nvme_write", CopyKind::nvme_write, bytes, true, ph, stream("nvme"), {last},
                          layer);
      if (fp32 >= 0) {
        use_copy(sch_.ops[last], {fp32, at, bytes}, {buffer, place, bytes});
        use_copy(sch_.ops[w], {buffer, place, bytes}, {grads_fp32_, kFp32 * c.to, bytes});
      }
      if (!own) pool_writes_.push_back({{place, place + bytes}, w});
      writes.push_back(w);
      at += bytes;
    }
    if (own) grad_writes_.push_back(release(*own, ph, stream("nvme"), writes));
    else grad_writes_.insert(grad_writes_.end(), writes.begin(), writes.end());
    return last;
  }
  // partition_grads (stage3.py): `grad_buffer.copy_(grad_partition)` at micro-step 0, `add_` after.
  void use_grad_partition(OpId op, int u, int k) {
    use(op, grad_partition_, e_ * layout_.partition[u][k], e_ * partition_numel(p_.units[u].tensors[k].numel(), p_.dp),
        Role::output, micro_ == 0 ? Access::write : Access::read_write, u, k);
  }

  // One hop's peer-major region: per tensor (in bucket order) its chunk's values and scales offsets inside a peer's
  // block, and the block's bytes.
  struct QgzPeerLayout {
    std::vector<Bytes> values_at, scales_at;
    Bytes block = 0;
  };
  static QgzPeerLayout qgz_peer_layout(const std::vector<std::pair<Bytes, Bytes>>& chunks) {
    auto pad = [](Bytes b) { return (b + 15) / 16 * 16; };
    QgzPeerLayout l;
    for (const auto& [values, scales] : chunks) {
      l.values_at.push_back(l.block);
      l.block += pad(values);
      l.scales_at.push_back(l.block);
      l.block += pad(scales);
    }
    return l;
  }

  // qgZ (stage3.py __avg_scatter_grads -> coalesced_collectives.py all_to_all_quant_reduce, or
  // all_to_all_loco_quant_reduce with LoCo): per gradient matrix whose numel divides by 2 x world, an int4 swizzled
  // quantize, the intra-node all-to-all (values and scales), a dequant-reduce that requantizes for the inter-node
  // all-to-all, and the final dequant-reduce into this rank's partition (the average over every rank), which is
  // added into grads.partition. The bucket's other tensors are reduce-scattered (zero3_reduce: coalesced here, one
  // reduce_scatter_coalesced call per tensor in DeepSpeed). The schedule issues each hop once for the bucket (DeepSpeed:
  // per tensor, values and scales apart, each an all_to_all_single); the kernels' uses name every tensor's ranges,
  // tagged with the tensor, and each all-to-all moves its regions whole.
  //
  // The bucket's qgz buffer is five regions: [intra send | intra receive | inter send | inter receive | reduced]. The
  // first four are peer-major: one block per peer of the hop's group, and in each block every tensor's chunk for that
  // peer, [int4 values | scales], each part padded to 16 bytes (qgz_peer_layout), so that an all-to-all sends one
  // piece to each peer rather than one per tensor and peer; each region at least DeepSpeed's bytes for the bucket
  // (quantization.hpp qgz_sizes: its scales count max(rows, cols, world) groups, of which the kernels' blocks use world
  // x qgz_blocks_per_partition intra and nodes x that inter). The last holds each tensor's reduced partition in the
  // training dtype. LoCo's error feedback (a `state` use of each hop's int8 error and its scales in the persistent
  // loco_error buffer) is read and updated by the quantize and the requantizing dequant-reduce.
  OpId qgz_reduce(size_t i, const std::string& name, OpId bwd, int layer) {
    const GradBucket& b = p_.buckets[i];
    const Phase ph = Phase::backward;
    const int n = p_.dp, L = p_.gpus_per_node, nodes = p_.nodes;
    const std::vector<Elements> at = bucket_offsets(b);
    std::vector<size_t> quant, plain;
    QuantizedSize intra, inter;
    Elements quant_elems = 0, reduced = 0;
    std::vector<std::pair<Bytes, Bytes>> intra_chunks, inter_chunks;  // per quantized tensor, one peer's
    for (size_t j = 0; j < b.tensors.size(); ++j) {
      const TensorShape& t = b.tensors[j];
      if (!qgz_applies(t.rows, t.cols, n)) {
        plain.push_back(j);
        continue;
      }
      quant.push_back(j);
      const QgzSizes q = qgz_sizes(t.rows, t.cols, n, L);
      intra.data += q.intra.data;
      intra.scales += q.intra.scales;
      inter.data += q.inter.data;
      inter.scales += q.inter.scales;
      quant_elems += t.numel();
      reduced += t.numel() / n;
      const Bytes nb = qgz_blocks_per_partition(t.rows, t.cols, n);
      intra_chunks.push_back({q.intra.data / L, kScaleBytes * nodes * nb});  // nodes partitions for each local peer
      inter_chunks.push_back({q.inter.data / nodes, kScaleBytes * nb});      // one partition for each node
    }
    const bool uses = open_.count(i) > 0 && !optimizer_offloaded();
    std::vector<OpId> ends;
    if (!quant.empty()) {
      const Elements mid = quant_elems / L;
      const QgzPeerLayout l1 = qgz_peer_layout(intra_chunks), l2 = qgz_peer_layout(inter_chunks);
      const Bytes sent1 = L * l1.block, sent2 = nodes * l2.block;  // what each all-to-all moves
      const Bytes r1 = std::max(intra.total(), sent1), r2 = 2 * r1, r3 = r2 + std::max(inter.total(), sent2),
                  r4 = r3 + (r3 - r2);
      const OpId qbuf = alloc(name + ".qgz" + tag(), Tier::gpu, MemCategory::buffers, "quant", r4 + e_ * reduced, ph, rs_,
                              {bwd}, layer);
      const OpId q = compute(name + ".quantize", ComputeKind::quantize, ph, {qbuf}, 0,
                             quant_elems * e_ + intra.total(), quant_elems, layer, Device::gpu, rs_);
      const OpId a1 = collective(name + ".all_to_all.intra", CollectiveKind::all_to_all, intra_, intra.total(),
                                 intra.scales, DType::int4, ph, rs_, {q}, layer);
      const OpId d1 = compute(name + ".dequant_reduce.intra", ComputeKind::dequant_reduce, ph, {a1}, 0,
                              intra.total() + inter.total(), quant_elems, layer, Device::gpu, rs_);
      const OpId a2 = collective(name + ".all_to_all.inter", CollectiveKind::all_to_all, inter_, inter.total(),
                                 inter.scales, DType::int4, ph, rs_, {d1}, layer);
      const OpId d2 = compute(name + ".dequant_reduce.inter", ComputeKind::dequant_reduce, ph, {a2}, 0,
                              inter.total() + ceil_div(mid, nodes) * e_, mid, layer, Device::gpu, rs_);
      for (OpId c : {q, d1, d2}) sch_.ops[c].compute.dtype = DType::int4;
      // Kernels tensor by tensor, as DeepSpeed's all_to_all_quant_reduce (runtime/comm/coalesced_collectives.py:
      // swizzle_quant, quantized_reduction, dequantize per tensor) and zrun's executor run them; LoCo adds the
      // error's dequantize and its quantize back around the quantize and the requantizing dequant-reduce.
      const int tensors = static_cast<int>(quant.size());
      sch_.ops[q].compute.kernel_launches = tensors * (p_.loco ? 3 : 1);
      sch_.ops[d1].compute.kernel_launches = tensors * (p_.loco ? 3 : 1);
      sch_.ops[d2].compute.kernel_launches = tensors;
      OpId last = d2;
      if (uses) {
        // Each all-to-all: its send region whole in, its receive region whole out (one block per peer).
        use(a1, qbuf, 0, sent1, Role::input, Access::read);
        use(a1, qbuf, r1, sent1, Role::output, Access::write);
        use(a2, qbuf, r2, sent2, Role::input, Access::read);
        use(a2, qbuf, r3, sent2, Role::output, Access::write);
        const OpId part = copy(name + ".partition", CopyKind::d2d, e_ * reduced, true, ph, rs_, {d2}, layer);
        per_tensor_kernels(part, static_cast<std::int64_t>(quant.size()));  // partition_grads: one per param
        Bytes c4 = 0;  // this tensor's offset in the reduced region
        for (size_t x = 0; x < quant.size(); ++x) {
          const size_t j = quant[x];
          const TensorShape& t = b.tensors[j];
          const auto [u, k] = b.members[j];
          const QgzSizes z = qgz_sizes(t.rows, t.cols, n, L);
          const Bytes p = e_ * (t.numel() / n);
          auto tagged = [&](OpId op, OpId buf, Bytes off, Bytes bytes, Role role, Access a) {
            use(op, buf, off, bytes, role, a, u, k);
          };
          // A tensor's chunk in every peer's block of a region: `blocks` pieces at the region's block stride.
          auto chunked = [&](OpId op, Bytes region, const QgzPeerLayout& l, size_t which, bool values, Bytes bytes,
                             int blocks, Role role, Access a) {
            use(op, qbuf, region + (values ? l.values_at[which] : l.scales_at[which]), bytes, role, a, u, k);
            sch_.ops[op].uses.back().blocks = blocks;
            sch_.ops[op].uses.back().block_stride = l.block;
          };
          const auto [v1, s1] = intra_chunks[x];
          const auto [v2, s2] = inter_chunks[x];
          tagged(q, open_.at(i), e_ * at[j], e_ * t.numel(), Role::input, Access::read);
          chunked(q, 0, l1, x, true, v1, L, Role::output, Access::write);
          chunked(q, 0, l1, x, false, s1, L, Role::output, Access::write);
          chunked(d1, r1, l1, x, true, v1, L, Role::input, Access::read);
          chunked(d1, r1, l1, x, false, s1, L, Role::input, Access::read);
          chunked(d1, r2, l2, x, true, v2, nodes, Role::output, Access::write);
          chunked(d1, r2, l2, x, false, s2, nodes, Role::output, Access::write);
          chunked(d2, r3, l2, x, true, v2, nodes, Role::input, Access::read);
          chunked(d2, r3, l2, x, false, s2, nodes, Role::input, Access::read);
          tagged(d2, qbuf, r4 + c4, p, Role::output, Access::write);
          if (p_.loco) {  // [intra error int8 | its scales | inter error int8 | its scales]
            const Bytes e0 = loco_at_.at({u, k});
            tagged(q, loco_, e0, 2 * z.intra.data, Role::state, Access::read_write);
            tagged(q, loco_, e0 + 2 * z.intra.data, z.intra.scales, Role::state, Access::read_write);
            const Bytes e1 = e0 + 2 * z.intra.data + z.intra.scales;
            tagged(d1, loco_, e1, 2 * z.inter.data, Role::state, Access::read_write);
            tagged(d1, loco_, e1 + 2 * z.inter.data, z.inter.scales, Role::state, Access::read_write);
          }
          tagged(part, qbuf, r4 + c4, p, Role::input, Access::read);
          use_grad_partition(part, u, k);
          c4 += p;
        }
        last = part;
      } else if (optimizer_offloaded()) {
        std::vector<ReducedChunk> chunks;  // sizes only: qgZ with the optimizer offloaded has no uses yet
        for (size_t j : quant) {
          const auto [u, k] = b.members[j];
          chunks.push_back({u, k, 0, b.tensors[j].numel() / n, layout_.partition[u][k]});
        }
        last = partition_grads_to_cpu(chunks, -1, 0, name, d2, layer);
      }
      ends.push_back(release(qbuf, ph, rs_, {last}));
    }
    if (!plain.empty()) ends.push_back(zero3_reduce(i, plain, name, bwd, layer));
    return ends.back();
  }

  // ---- forward / backward of one micro-step ---------------------------------------------------------
  std::vector<OpId> compute_deps(std::vector<OpId> deps) {
    if (serial_dep_ >= 0) deps.push_back(serial_dep_);
    serial_dep_ = -1;
    deps.insert(deps.end(), step_end_.begin(), step_end_.end());
    step_end_.clear();  // every later op of the step follows this compute
    return deps;
  }

  // The backward of unit u, cut into segments where gradient buckets fill, so that each bucket is
  // reduced (and its buffer reused) while the rest of the backward goes on, as DeepSpeed's hooks do.
  // `annotate` adds the uses every segment shares (weights, saved activations).
  // `after_last` (if set) runs right after the unit's last compute op, before that segment's bucket reduction.
  OpId backward(int u, std::vector<OpId> deps, const std::function<void(OpId)>& annotate,
                const std::function<void(OpId)>& after_last = nullptr) {
    const FetchUnit& U = p_.units[u];
    const Phase ph = Phase::backward;
    const Flops flops = backward_flops(u);
    const Bytes hbm = backward_hbm(u);
    Elements left = U.params;
    if (left == 0) {  // a tied head: its gradient lands in the embedding's, reduced with it
      // Stages 2-3 keep no whole gradient buffer: the embedding weight's gradient is held from here until the
      // embedding's backward adds its own part and its bucket takes it (autograd accumulates, then the hook fires).
      const Bytes tied_bytes = e_ * p_.units[0].tensors[0].numel();
      if (p_.stage >= 2)
        tied_grad_ = alloc("grads.tied" + tag(), Tier::gpu, MemCategory::grads, "tied", tied_bytes, ph, compute_);
      const OpId c = compute("bwd." + U.name, ComputeKind::backward, ph, deps, flops, hbm, 0, U.layer);
      sch_.ops[c].unit = u;
      sch_.ops[c].compute.kernel_launches = launches_[u].backward;
      annotate(c);
      if (p_.stage >= 2)
        use(c, tied_grad_, 0, tied_bytes, Role::grad, Access::write, 0, 0);
      else
        use(c, grads_, e_ * flat_offset(0, 0), tied_bytes, Role::grad, Access::read_write, 0, 0);
      if (after_last) after_last(c);
      return c;
    }
    OpId bwd = -1;
    for (int part = 0; left > 0; ++part) {
      Elements seg = left;
      bool closes = false;
      if (next_reduce_ < p_.buckets.size() && p_.buckets[next_reduce_].closes_after == u) {
        seg = std::min(left, p_.buckets[next_reduce_].closing_elements);
        closes = true;
      }
      open_current_bucket(u);
      const double share = static_cast<double>(seg) / static_cast<double>(U.params);
      const bool whole = part == 0 && seg == left;
      bwd = compute(whole ? "bwd." + U.name : "bwd." + U.name + ".part" + std::to_string(part), ComputeKind::backward,
                    ph, part == 0 ? deps : compute_deps({}), flops * share, static_cast<Bytes>(hbm * share), 0,
                    U.layer);
      sch_.ops[bwd].unit = u;
      if (part == 0) sch_.ops[bwd].compute.kernel_launches = launches_[u].backward;  // zrun runs it all in the first
      sch_.ops[bwd].compute.gemm_hbm_bytes = static_cast<Bytes>(backward_gemm_hbm(u) * share);
      sch_.ops[bwd].compute.fused_attention_flops = backward_fused_attention_flops(u) * share;
      annotate(bwd);
      use_grads(bwd, u, next_reduce_);
      if (U.is_embedding && tied_grad_ >= 0) use_whole(bwd, tied_grad_, Role::grad, Access::read);
      left -= seg;
      if (left == 0 && after_last) after_last(bwd);
      if (closes) reduce_current_bucket(u, bwd);
    }
    return bwd;
  }

  void forward_backward() {
    next_reduce_ = 0;
    live_.clear();                    // stage 3: gathered units
    calls_.clear();
    shared_.clear();
    std::map<int, OpId> acts, work;   // per layer (head logits under -2): saved activations, recompute set
    std::map<int, OpId> fwd_work;     // full checkpointing: per layer, the working set of its forward
    OpId grads = -1;                  // the backward's activation gradients
    constexpr int kHead = -2;
    for (size_t i = 0; i < p_.trace.size(); ++i) {
      const FetchStep& st = p_.trace[i];
      const FetchUnit& U = p_.units[st.unit];
      const int layer = st.layer;
      // fetch_sub_module: the module's call, the wait for its params, then the prefetch batch's call.
      std::vector<Member> now, ahead;
      // A recompute step stands for the layer's modules run one by one: one call per module, each after its own reads
      // (a module released after the recompute gives its pool buffers to the next: plan.cpp make_trace).
      if (!st.recompute) read_swap_ins(st.swap_in, st.phase, last_compute_);
      for (int u : st.fetch) {
        now.push_back({u, st.phase, false});
        if (!st.recompute) continue;
        std::vector<SwapIn> own;
        for (const SwapIn& r : st.swap_in)
          if (r.unit == u) own.push_back(r);
        read_swap_ins(own, st.phase, last_compute_);
        fetch(now, last_compute_), now.clear();
      }
      if (!now.empty()) fetch(now, last_compute_);
      for (int u : st.uses)
        if (live_.count(u)) await_unit(u, last_compute_);
      for (size_t k = 0; k < st.prefetch.size(); ++k) ahead.push_back({st.prefetch[k], st.prefetch_phase[k], true});
      if (!ahead.empty()) fetch(ahead, last_compute_);
      read_swap_ins(st.swap_in_ahead, st.phase, last_compute_);
      std::vector<OpId> deps;
      for (int u : st.uses)
        if (live_.count(u)) deps.push_back(live_[u].done);
      deps = compute_deps(deps);
      if (host_wait_ >= 0) deps.push_back(host_wait_);  // issued once the host's wait for NVMe reads is over
      host_wait_ = -1;
      // The weights of every unit the step uses, and the saved activations of its layer (or the logits).
      auto annotate = [&](OpId op) {
        for (int u : st.uses) use_params(op, u);
        const int key = in_head(st.unit) ? kHead : layer;
        if (acts.count(key)) use_whole(op, acts[key], Role::activation, st.phase == Phase::forward ? Access::read_write
                                                                                                    : Access::read);
        if (st.phase == Phase::forward && fwd_work.count(layer))
          use_whole(op, fwd_work[layer], Role::activation, Access::read_write);
        if (st.phase == Phase::backward && !st.recompute && work.count(layer))
          use_whole(op, work[layer], Role::activation, Access::read);
        if (st.phase == Phase::backward && !st.recompute) use_whole(op, grads, Role::activation, Access::read_write);
      };
      // The last backward step (the embedding's) frees the activation gradients right after its compute.
      const bool last_backward = st.phase == Phase::backward && !st.recompute && i + 1 == p_.trace.size();
      OpId c;
      if (st.recompute) {
        const std::string name = "L" + std::to_string(layer);
        work[layer] = alloc("recompute." + name + tag(), Tier::gpu, MemCategory::activations, "recompute",
                            p_.activations.per_layer_work_bytes, st.phase, compute_, {}, layer);
        c = compute("recompute." + name, ComputeKind::recompute, st.phase, deps, layer_forward_flops(layer),
                    layer_forward_hbm(layer), 0, layer);
        for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u)
          sch_.ops[c].compute.kernel_launches += launches_[u].recompute;
        sch_.ops[c].compute.gemm_hbm_bytes = layer_forward_gemm_hbm(layer);
        sch_.ops[c].compute.fused_attention_flops = layer_forward_fused_attention_flops(layer);
        for (int u : st.uses) use_params(c, u);
        use_whole(c, acts.at(layer), Role::activation, Access::read);
        use_whole(c, work[layer], Role::activation, Access::write);
      } else if (st.phase == Phase::forward) {
        // A layer's activation buffer starts with its input, which the unit before it writes (the embedding,
        // or the previous layer's last unit): it is allocated just before that unit computes. So is the head's
        // (final norm and head: the last layer's output, the logits), which the last layer's last unit feeds.
        const int next = st.unit + 1;
        int feeds = -1;  // the activation key (layer, or kHead) this unit's output starts
        if (next < static_cast<int>(p_.units.size()) && first_of_layer(next)) feeds = p_.units[next].layer;
        if (next < static_cast<int>(p_.units.size()) && in_head(next) && !in_head(st.unit)) feeds = kHead;
        if (feeds >= 0) acts[feeds] = alloc_layer_acts(feeds);
        if (feeds == kHead)
          acts[kHead] = alloc("act.logits" + tag(), Tier::gpu, MemCategory::activations, "logits",
                              p_.activations.head_bytes, st.phase, compute_);
        if (first_of_layer(st.unit) && !acts.count(layer)) acts[layer] = alloc_layer_acts(layer);
        // Full checkpointing: the layer's forward computes its whole working set before keeping only its input.
        if (ckpt_ && first_of_layer(st.unit))
          fwd_work[layer] = alloc("act.fwd_work.L" + std::to_string(layer) + tag(), Tier::gpu, MemCategory::activations,
                                  "forward_work", p_.activations.per_layer_work_bytes, st.phase, compute_, {}, layer);
        c = compute("fwd." + U.name, ComputeKind::forward, st.phase, deps, forward_flops(st.unit),
                    forward_hbm(st.unit), 0, layer);
        sch_.ops[c].compute.kernel_launches = launches_[st.unit].forward;
        sch_.ops[c].compute.gemm_hbm_bytes = forward_gemm_hbm(st.unit);
        sch_.ops[c].compute.fused_attention_flops = forward_fused_attention_flops(st.unit);
        annotate(c);
        if (feeds != -1) use_whole(c, acts[feeds], Role::activation, Access::write);
        if (layer >= 0 && p_.layers[layer].last == st.unit && fwd_work.count(layer)) {
          release(fwd_work[layer], st.phase, compute_, {c});
          fwd_work.erase(layer);
        }
      } else {
        if (!st.recompute && grads < 0)  // the first backward op writes the first activation gradient
          grads = alloc("act.grad" + tag(), Tier::gpu, MemCategory::activations, "grad",
                        p_.activations.backward_grad_bytes, st.phase, compute_);
        c = backward(st.unit, deps, annotate,
                     last_backward ? std::function<void(OpId)>([&](OpId last) {
                       release(grads, Phase::backward, compute_, {last});
                     })
                                   : nullptr);
        last_bwd_ = c;
        if (U.is_embedding && tied_grad_ >= 0) {
          release(tied_grad_, st.phase, compute_, {c});
          tied_grad_ = -1;
        }
        if (first_of_layer(st.unit)) {
          if (work.count(layer)) release(work[layer], st.phase, compute_, {c});
          if (acts.count(layer)) release(acts[layer], st.phase, compute_, {c});
          work.erase(layer);
          acts.erase(layer);
        }
        if (in_head(st.unit) && !in_head(st.unit - 1) && acts.count(kHead)) {  // the first head unit's backward
          release(acts[kHead], st.phase, compute_, {c});
          acts.erase(kHead);
        }
      }
      for (int u : st.release) {
        for (OpId b : live_[u].buffers)
          if (!shared_.count(b) || --shared_[b] == 0) release(b, st.phase, compute_, {c});
        live_.erase(u);
        for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k) swapped_.erase({u, k});
      }
      sch_.ops[c].unit = st.recompute ? -1 : st.unit;
      last_compute_ = c;
    }
    emit_deferred_reductions();
    flush_bucket_free();
  }

  OpId alloc_layer_acts(int layer) {
    return alloc("act.L" + std::to_string(layer) + tag(), Tier::gpu, MemCategory::activations, "",
                 ckpt_ ? p_.activations.per_layer_checkpoint : p_.activations.per_layer_no_recompute, Phase::forward,
                 compute_, {}, layer);
  }

  // ---- optimizer step -----------------------------------------------------------------------------
  // The next training step starts where this one ends: DeepSpeed's step() returns (CPU Adam runs on the calling
  // host thread) before the next forward is issued, and the next fetches read the weights it wrote. The step's last
  // op on each stream (a stream runs its ops in program order; a buffer's free ends nothing the next step waits for)
  // becomes a dep of the next micro-step's first compute and of the fetches issued before it.
  void optimizer_step() {
    const OpId first = static_cast<OpId>(sch_.ops.size());
    emit_optimizer_step();
    std::map<int, OpId> last_on;
    for (OpId id = first; id < static_cast<OpId>(sch_.ops.size()); ++id)
      if (sch_.ops[id].kind != OpKind::free) last_on[sch_.ops[id].stream] = id;
    step_end_.clear();
    for (const auto& [stream, id] : last_on) step_end_.push_back(id);
  }
  void emit_optimizer_step() {
    const Phase ph = Phase::step;
    micro_ = s_.training.grad_accum - 1;
    std::vector<OpId> ready = reduce_done_;
    reduce_done_.clear();
    ready.insert(ready.end(), grad_writes_.begin(), grad_writes_.end());
    grad_writes_.clear();
    pool_writes_.clear();  // every staged write is in `ready`; the next backward stages from the pool's start
    pool_at_ = 0;
    if (serial_dep_ >= 0) ready.push_back(serial_dep_);
    serial_dep_ = -1;
    std::vector<OpId> param_ready;
    int g = 0;
    Elements sub_first = 0, next_first = 0;
    for (Elements sub : p_.sub_groups) {
      sub_first = next_first;
      next_first += sub;
      const std::string name = "step.sub" + std::to_string(g++);
      if (!optimizer_offloaded()) {
        // Adam on the GPU: reads fp32 master/m/v + 16-bit grad, writes fp32 master/m/v + 16-bit param.
        // With 16-bit training DeepSpeed first upcasts the sub-group's gradient partition into an fp32
        // copy (the master's .grad), freed after the update.
        const OpId up = e_ < kFp32 ? alloc("grads.fp32." + std::to_string(g) + ".s" + std::to_string(step_), Tier::gpu,
                                           MemCategory::grads, "fp32", kFp32 * sub, ph, compute_, ready)
                                   : -1;
        // With offloaded params the updated 16-bit weights are written on the GPU, then copied down into the partition
        // (stage3.py: the fp16 partition on the CPU `.copy_(` the fp32 master on the GPU: a temporary on the GPU).
        const OpId w16 = p_.param_device != OffloadDevice::none
                             ? alloc("params16." + std::to_string(g) + ".s" + std::to_string(step_), Tier::gpu,
                                     MemCategory::buffers, "param_d2h", e_ * sub, ph, compute_, ready)
                             : -1;
        const OpId opt = compute(name + ".adam", ComputeKind::optimizer, ph, ready, 10.0 * sub,
                                 sub * (2 * p_.optimizer_bytes_per_param + 2 * e_), sub);
        if (up >= 0) release(up, ph, compute_, {opt});
        if (w16 >= 0) {
          use(opt, grad_partition_, e_ * sub_first, e_ * sub, Role::grad, Access::read);
          use(opt, optimizer_, p_.optimizer_bytes_per_param * sub_first, p_.optimizer_bytes_per_param * sub, Role::state,
              Access::read_write);
          use_whole(opt, w16, Role::param, Access::write);
        }
        if (p_.stage == 3 && p_.param_device == OffloadDevice::none) {
          // Stage 3: sub-group g over elements [first, first + sub) of this rank's partition: its 16-bit gradients,
          // its [master | exp_avg | exp_avg_sq] block of the optimizer buffer, its 16-bit partition out.
          use(opt, grad_partition_, e_ * sub_first, e_ * sub, Role::grad, Access::read);
          use(opt, optimizer_, p_.optimizer_bytes_per_param * sub_first, p_.optimizer_bytes_per_param * sub, Role::state,
              Access::read_write);
          use(opt, partition_, e_ * sub_first, e_ * sub, Role::param, Access::write);
        }
        if (p_.stage == 0) {
          // Stage 0: one sub-group, the whole model: 16-bit gradients in, [master | exp_avg | exp_avg_sq] state,
          // 16-bit weights out.
          use_whole(opt, grads_, Role::grad, Access::read);
          use_whole(opt, optimizer_, Role::state, Access::read_write);
          use_whole(opt, params_, Role::param, Access::write);
        } else if (p_.stage <= 2) {
          // Stages 1-2: this rank's partition of the flat buffers (one sub-group).
          const Bytes part = e_ * p_.param_partition;
          if (p_.stage == 1)
            sch_.ops[opt].uses.push_back({grads_, 0, part, Role::grad, Access::read, -1, -1, part});
          else
            use_whole(opt, grad_partition_, Role::grad, Access::read);
          use_whole(opt, optimizer_, Role::state, Access::read_write);
          sch_.ops[opt].uses.push_back({params_, 0, part, Role::param, Access::write, -1, -1, part});
        }
        param_ready.push_back(opt);
        if (p_.param_device != OffloadDevice::none) param_ready.back() = write_back_params(name, sub_first, sub, opt, w16);
        continue;
      }
      std::vector<OpId> deps = ready;
      std::optional<OpId> swap;
      const Bytes state = p_.optimizer_bytes_per_param * sub;
      // Where the sub-group's state lies: its block of the optimizer buffer (CPU), or the swap buffer it is read into.
      BufferUse state_use{optimizer_, p_.optimizer_bytes_per_param * sub_first, state};
      BufferUse grad_use{grads_fp32_, kFp32 * sub_first, kFp32 * sub};
      if (opt_swap_pool_ >= 0) {
        // Stage 3, the optimizer on NVMe (the plan runs ZeRO-1/2's as CPU offload, as DeepSpeed does).
        // swap_in_optimizer_state: the sub-group's state, then its swapped-out gradients, into the swapper's pool (the
        // state in its first buffers, the gradients in the one after them), once the previous sub-group's state is
        // written out (swap_out_optimizer_state waits for its writes, then frees the buffers) and the backward's
        // gradient writes are done (_flush_gradient_swapper: `ready` holds them).
        swap = opt_swap_pool_;
        const Bytes grads = kFp32 * sub, grads_at = opt_swap_buffer_bytes() * (p_.optimizer_bytes_per_param / kFp32);
        if (last_state_write_ >= 0) deps.push_back(last_state_write_);
        deps = {copy(name + ".nvme_read", CopyKind::nvme_read, state, true, ph, stream("nvme"), deps)};
        use_copy(sch_.ops[deps[0]], state_use, {*swap, 0, state});
        deps = {copy(name + ".grad_nvme_read", CopyKind::nvme_read, grads, true, ph, stream("nvme"), deps)};
        use_copy(sch_.ops[deps[0]], grad_use, {*swap, grads_at, grads});
        grad_use = {*swap, grads_at, grads};
        state_use = {*swap, 0, state};
      }
      // Without param offload CPU Adam writes the 16-bit weights into a host buffer that the h2d copy takes to the
      // GPU: stages 1-2 the persistent param_buffer_of_bit16_for_cpu_offload_groups, stage 3 a transient (torch's
      // copy_ of the fp32 master into the GPU's 16-bit partition converts on the CPU first).
      const OpId weights16 = p_.param_device != OffloadDevice::none ? -1
                             : p_.stage <= 2 ? params16_
                                             : alloc("params16." + std::to_string(g) + ".s" + std::to_string(step_),
                                                     Tier::cpu, MemCategory::buffers, "param_h2d", e_ * sub, ph,
                                                     stream("cpu"), deps);
      // offload_param nvme: CPU Adam's 16-bit weights go into the write-back buffer, which the previous sub-group's
      // NVMe write must have left (swap_out_partitioned_params: synchronize_writes() before reusing the pool).
      // A sub-group within max_in_cpu is in CPU memory, as with offload_param cpu.
      const bool params_on_nvme = p_.param_device == OffloadDevice::nvme && sub_group_on_nvme(sub_first);
      std::vector<OpId> adam_deps = deps;
      if (params_on_nvme && last_param_write_ >= 0) adam_deps.push_back(last_param_write_);
      OpId opt = compute(name + ".cpu_adam", ComputeKind::optimizer, ph, adam_deps, 10.0 * sub, 0, sub, -1, Device::cpu,
                         stream("cpu"));
      // With the partition in host memory CPU Adam writes its 16-bit weights there (stage3.py
      // `_reassign_or_swap_out_partitioned_parameters`: the fp16 flat's `.data.copy_(` the fp32 master).
      use_cpu_adam(sch_.ops[opt], grad_use, state_use,
                   weights16 >= 0     ? whole(sch_.ops[weights16], Role::param, Access::write)
                   : params_on_nvme ? BufferUse{param_swap_out_, 0, e_ * sub, Role::param, Access::write}
                                      : sub_group_params(sub_first, sub, Role::param, Access::write));
      if (swap) {
        const OpId w = copy(name + ".nvme_write", CopyKind::nvme_write, state, true, ph, stream("nvme"), {opt});
        use_copy(sch_.ops[w], {*swap, 0, state}, {optimizer_, p_.optimizer_bytes_per_param * sub_first, state});
        last_state_write_ = w;
      }
      if (p_.param_device == OffloadDevice::none) {
        opt = copy(name + ".h2d", CopyKind::h2d, e_ * sub, s_.zero.offload_optimizer.pin_memory, ph, stream("h2d"),
                   {opt});
        {
          // Into this rank's partition: params.partition (stage 3), or its slot of the flat params (stages 1-2).
          BufferUse to{p_.stage == 3 ? partition_ : params_, e_ * sub_first, e_ * sub};
          if (p_.stage < 3) to.rank_stride = e_ * p_.param_partition;
          use_copy(sch_.ops[opt], whole(sch_.ops[weights16], Role::input, Access::read), to);
          if (p_.stage == 3) release(weights16, ph, stream("h2d"), {opt});
        }
      } else if (params_on_nvme) {
        // stage3.py `_partitioned_params_swap_out` -> swap_out_partitioned_params: the sub-group's weights to the
        // params' swap files (here: the sub-group's range of params.partition.nvme).
        opt = copy(name + ".param_nvme_write", CopyKind::nvme_write, e_ * sub, true, ph, stream("nvme"), {opt});
        use_copy(sch_.ops[opt], {param_swap_out_, 0, e_ * sub, Role::input, Access::read},
                 sub_group_params(sub_first, sub));
        last_param_write_ = opt;
      }
      param_ready.push_back(opt);
    }
    if (p_.stage == 1 || p_.stage == 2) {
      // all_gather_dp_groups: shard k of every rank's partition, gathered into place in the flat buffer.
      const Bytes part = e_ * p_.param_partition;
      Bytes at = 0;
      int c = 0;
      for (Elements chunk : p_.allgather_chunks) {
        const OpId ag = collective("step.all_gather" + std::to_string(c++), CollectiveKind::all_gather, world_,
                                   e_ * chunk * p_.dp, 0, p_.dtype, ph, comm_, param_ready);
        if (p_.param_device == OffloadDevice::none) {
          sch_.ops[ag].uses.push_back({params_, at, e_ * chunk, Role::input, Access::read, -1, -1, part});
          sch_.ops[ag].uses.push_back({params_, at, e_ * chunk, Role::output, Access::write, -1, -1, 0, p_.dp, part});
        }
        at += e_ * chunk;
      }
    }
    if (p_.stage == 3) gather_persistent(param_ready);
    for (auto& [u, a] : hpz_buffers_) release(a, ph, comm_, param_ready);
    hpz_buffers_.clear();
    hpz_copies_.clear();
  }

  // stage3.py _post_step: persistent_parameters[0].all_gather(persistent_parameters) -> partition_parameters.py
  // _allgather_params_coalesced: per persistent tensor, a padded buffer of dp x ceil(numel / dp) and one
  // all-gather of its updated partition into it. DeepSpeed then points the parameter at the buffer; the schedule's
  // params.persistent is fixed, so the tensor is copied into it and the buffer freed.
  void gather_persistent(const std::vector<OpId>& after) {
    if (persistent_ < 0) return;
    const Phase ph = Phase::step;
    for (int u = 0; u < static_cast<int>(p_.units.size()); ++u)
      for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k) {
        if (layout_.persistent[u][k] < 0) continue;
        const TensorShape& t = p_.units[u].tensors[k];
        const Elements chunk = partition_numel(t.numel(), p_.dp);
        const std::string what = p_.units[u].name + "." + t.name;
        const OpId buf = alloc("persistent_gather." + what + ".s" + std::to_string(step_), Tier::gpu,
                               MemCategory::buffers, "gathered", e_ * chunk * p_.dp, ph, comm_, after, p_.units[u].layer);
        const bool uses = true;
        // Offloaded params: the updated partition comes to the GPU first (`ds_tensor.to(device)`); its piece on NVMe
        // (past max_in_cpu) is read into a pinned host buffer first, as every other partition (zsim keeps a persistent
        // tensor's partition where its place in the partition says; DeepSpeed keeps a small one on the GPU when its
        // sub-group is on NVMe: docs/schedule-semantics.md "Offload").
        std::optional<OpId> staged, swap;
        std::vector<OpId> deps{buf};
        if (p_.param_device != OffloadDevice::none) {
          std::vector<OpId> d = after;
          const std::vector<PartitionPiece> pieces = tensor_pieces(u, k);
          const PartitionPiece& last = pieces.back();
          if (last.buffer == partition_nvme_) {
            swap = alloc("persistent_swap." + what + ".s" + std::to_string(step_), Tier::cpu, MemCategory::buffers,
                         "param_swap", last.bytes, ph, stream("nvme"), after, p_.units[u].layer);
            const OpId rd = copy("step.persistent." + what + ".nvme_read", CopyKind::nvme_read, last.bytes, true, ph,
                                 stream("nvme"), {*swap}, p_.units[u].layer);
            use(rd, last.buffer, last.at, last.bytes, Role::input, Access::read, u, k);
            use(rd, *swap, 0, last.bytes, Role::output, Access::write, u, k);
            d = {rd};
          }
          staged = alloc("persistent_h2d." + what + ".s" + std::to_string(step_), Tier::gpu, MemCategory::buffers,
                         "prefetch", e_ * chunk, ph, stream("h2d"), d, p_.units[u].layer);
          const OpId h = copy("step.persistent." + what + ".h2d", CopyKind::h2d, e_ * chunk,
                              s_.zero.offload_param.pin_memory, ph, stream("h2d"), {*staged}, p_.units[u].layer);
          for (const PartitionPiece& q : pieces) {
            if (q.buffer == partition_nvme_) use(h, *swap, 0, q.bytes, Role::input, Access::read, u, k);
            else use(h, q.buffer, q.at, q.bytes, Role::input, Access::read, u, k);
            use(h, *staged, q.from, q.bytes, Role::output, Access::write, u, k);
          }
          if (swap) release(*swap, ph, stream("h2d"), {h});
          deps.push_back(h);
        }
        const OpId ag = collective("step.persistent." + what + ".all_gather", CollectiveKind::all_gather, world_,
                                   e_ * chunk * p_.dp, 0, p_.dtype, ph, comm_, deps, p_.units[u].layer);
        if (uses) {
          if (staged) use(ag, *staged, 0, e_ * chunk, Role::input, Access::read, u, k);
          else use_partition(ag, u, k, Role::input, Access::read);
          use(ag, buf, 0, e_ * chunk * p_.dp, Role::output, Access::write, u, k);
        }
        if (staged) release(*staged, ph, comm_, {ag});
        const OpId cp = copy("step.persistent." + what + ".copy", CopyKind::d2d, e_ * t.numel(), true, ph, comm_, {ag},
                             p_.units[u].layer);
        if (uses) {
          use(cp, buf, 0, e_ * t.numel(), Role::input, Access::read, u, k);
          use(cp, persistent_, e_ * layout_.persistent[u][k], e_ * t.numel(), Role::output, Access::write, u, k);
        }
        release(buf, ph, comm_, {cp});
      }
  }

  // GPU optimizer with offloaded params: the updated 16-bit weights of sub-group [first, first + sub) (in the GPU
  // buffer w16) go back to the CPU partition, or (NVMe) into the write-back buffer and from there to the swap file
  // (stage3.py `_partitioned_params_swap_out`: the fp32 master narrowed per parameter, copied into the pinned 16-bit
  // pool of swap_out_partitioned_params, then written). Frees w16 after its copy.
  OpId write_back_params(const std::string& name, Elements first, Elements sub, OpId opt, OpId w16) {
    const Phase ph = Phase::step;
    const bool on_nvme = sub_group_on_nvme(first);
    std::vector<OpId> deps{opt};
    if (on_nvme && last_param_write_ >= 0) deps.push_back(last_param_write_);
    OpId d = copy(name + ".param_d2h", CopyKind::d2h, e_ * sub, s_.zero.offload_param.pin_memory, ph, stream("d2h"),
                  deps);
    const BufferUse to_host = on_nvme ? BufferUse{param_swap_out_, 0, e_ * sub} : sub_group_params(first, sub);
    use_copy(sch_.ops[d], whole(sch_.ops[w16], Role::input, Access::read), to_host);
    release(w16, ph, stream("d2h"), {d});
    if (on_nvme) {
      d = copy(name + ".param_nvme_write", CopyKind::nvme_write, e_ * sub, true, ph, stream("nvme"), {d});
      use_copy(sch_.ops[d], {param_swap_out_, 0, e_ * sub, Role::input, Access::read}, sub_group_params(first, sub));
      last_param_write_ = d;
    }
    return d;
  }

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

}  // namespace

Schedule make_schedule(const Scenario& s, const Plan& p, int steps) {
  return Builder(s, p).build(std::max(1, steps), 0);
}

Schedule make_schedule_with_micro_steps(const Scenario& s, const Plan& p, int steps, int built_micro_steps) {
  return Builder(s, p).build(std::max(1, steps), built_micro_steps);
}

}  // namespace zsim
