#include "sim/plan/schedule_builder.hpp"

#include "sim/plan/schedule_builder_state.hpp"

namespace zsim {
namespace build {

Builder::Builder(const Scenario& s, const Plan& p) : s_(s), p_(p), e_(p.elem_bytes), layout_(tensor_layout(p)) {
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
Schedule Builder::build(int steps, int built_micro_steps) {
  ScheduleMeta& m = sch_.meta;
  m.scenario = s_.source_file.empty() ? s_.model.name : s_.source_file;
  m.world_size = p_.dp;
  m.nodes = p_.nodes;
  m.gpus_per_node = p_.gpus_per_node;
  m.params = p_.params;
  m.tokens_per_step = tokens_ * s_.training.grad_accum * p_.dp;
  m.steps = steps;
  if (s_.runtime == RuntimeKind::deepspeed) {
    m.framework = "deepspeed";
    m.zero_stage = p_.stage;
  }
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

Op Builder::base(OpKind k, std::string name, Phase ph, int stream, std::vector<OpId> deps, int layer) {
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

OpId Builder::alloc(std::string buffer, Tier tier, MemCategory cat, const std::string& detail, Bytes bytes, Phase ph, int stream, std::vector<OpId> deps, int layer) {
  Op op = base(OpKind::alloc, "alloc." + buffer, ph, stream, std::move(deps), layer);
  op.mem = {std::move(buffer), tier, cat, detail, bytes};
  return sch_.add(std::move(op));
}

OpId Builder::release(OpId alloc_id, Phase ph, int stream, std::vector<OpId> deps) {
  const Op& a = sch_.ops[alloc_id];
  Op op = base(OpKind::free, "free." + a.mem.buffer, ph, stream, std::move(deps), a.layer);
  op.mem = a.mem;
  return sch_.add(std::move(op));
}

OpId Builder::compute(std::string name, ComputeKind what, Phase ph, std::vector<OpId> deps, Flops flops, Bytes hbm, Elements elements, int layer, Device dev, int stream) {
  Op op = base(OpKind::compute, std::move(name), ph, stream < 0 ? compute_ : stream, std::move(deps), layer);
  op.compute = {what, dev, flops, hbm, elements};
  return sch_.add(std::move(op));
}

OpId Builder::collective(std::string name, CollectiveKind what, int group, Bytes bytes, Bytes scale_bytes, DType dt, Phase ph, int stream, std::vector<OpId> deps, int layer) {
  Op op = base(OpKind::collective, std::move(name), ph, stream, std::move(deps), layer);
  op.collective = {what, group, bytes, scale_bytes, dt};
  return sch_.add(std::move(op));
}

OpId Builder::copy(std::string name, CopyKind what, Bytes bytes, bool pinned, Phase ph, int stream, std::vector<OpId> deps, int layer) {
  Op op = base(OpKind::copy, std::move(name), ph, stream, std::move(deps), layer);
  op.copy = {what, bytes, pinned};
  return sch_.add(std::move(op));
}

// ".s<step>.m<micro>", rebuilt only when the position changes (it names most buffers).
const std::string& Builder::tag() const {
  if (tag_step_ != step_ || tag_micro_ != micro_) {
    tag_ = ".s" + std::to_string(step_) + ".m" + std::to_string(micro_);
    tag_step_ = step_;
    tag_micro_ = micro_;
  }
  return tag_;
}

void Builder::init() {
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
  else if (!optimizer_offloaded() && !lazy_grad_partition())
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
  if (deepspeed() && p_.stage == 3 && s_.zero.contiguous_gradients)
    // stage3.py __init__: `self.__ipg_bucket_flat_buffer = torch.empty(self.reduce_bucket_size, dtype=self.dtype,
    // device=...)`, held for the run whatever the model's size; every bucket is copied into it.
    ipg_.push_back(alloc("ipg_flat_buffer", Tier::gpu, MemCategory::buffers, "bucket",
                         e_ * s_.zero.reduce_bucket_size, ph, compute_));
  if (deepspeed() && p_.stage == 0 && s_.training.precision == Precision::bf16)
    // bf16 at stage 0 runs BF16_Optimizer (engine.py _configure_bf16_optimizer): besides the fp32 master and the
    // model's own bf16 .grad tensors, a flat fp32 gradient buffer of the whole model (bf16_optimizer.py
    // fp32_groups_gradients_flat), held for the run; the bf16 gradients are accumulated into it after the backward.
    grads_fp32_ = alloc("grads.fp32", Tier::gpu, MemCategory::grads, "fp32", kFp32 * p_.params, ph, compute_);
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
void Builder::init_zero12_offload_buffers() {
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
  // Not under DeepSpeed 0.14.5, whose step copies the fp32 master up instead (Builder::copy_fp32_master_up).
  if (!fp32_up_then_cast())
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

}  // namespace build

Schedule make_schedule(const Scenario& s, const Plan& p, int steps) {
  return build::Builder(s, p).build(std::max(1, steps), 0);
}

Schedule make_schedule_with_micro_steps(const Scenario& s, const Plan& p, int steps, int built_micro_steps) {
  return build::Builder(s, p).build(std::max(1, steps), built_micro_steps);
}

}  // namespace zsim
