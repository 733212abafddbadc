// The schedule builder's optimizer step: the GPU or CPU optimizer over sub-groups, NVMe state swaps, the
// 16-bit weights written back, and stage 3's persistent-parameter gather.
#include "sim/plan/deepspeed_step_kernels.hpp"
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

// The next training step starts where this one ends: DeepSpeed's step() returns (CPU Adam runs on the calling
// host thread) before the next forward is issued, and the next fetches read the weights it wrote. The step's last
// op on each stream (a stream runs its ops in program order; a buffer's free ends nothing the next step waits for)
// becomes a dep of the next micro-step's first compute and of the fetches issued before it.
void Builder::optimizer_step() {
  const OpId first = static_cast<OpId>(sch_.ops.size());
  // DeepSpeed at stages 1-2 with the optimizer on the GPU (stage_1_and_2.py step): the partition's gradients are
  // first flattened (flatten_dense_tensors_aligned, training dtype), then converted to fp32 (`.to(fp32)`, the
  // sub-group's grads.fp32 below): the flat copy lives beside the gradient partition until the update is done.
  OpId step_grads = -1;
  if (deepspeed() && (p_.stage == 1 || p_.stage == 2) && !optimizer_offloaded())
    step_grads = alloc("grads.step_flat" + tag(), Tier::gpu, MemCategory::grads, "step_flat",
                       e_ * p_.optimizer_partition, Phase::step, compute_);
  emit_optimizer_step();
  const OpId step_done = static_cast<OpId>(sch_.ops.size()) - 1;
  if (step_grads >= 0) release(step_grads, Phase::step, compute_, {step_done});
  if (lazy_grad_partition() && grad_partition_ >= 0) {  // dropped with the step (zero_grad: the params' .grad views)
    release(grad_partition_, Phase::step, compute_, {step_done});
    grad_partition_ = -1;
  }
  std::map<int, OpId> last_on;
  for (OpId id = first; id < static_cast<OpId>(sch_.ops.size()); ++id)
    if (sch_.ops[id].kind != OpKind::free) last_on[sch_.ops[id].stream] = id;
  step_end_.clear();
  for (const auto& [stream, id] : last_on) step_end_.push_back(id);
}

void Builder::emit_optimizer_step() {
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
  ready = grad_norm_all_reduces(ready);  // runtime deepspeed: the update waits for the gradient norm
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
      // BF16_Optimizer (DeepSpeed, stage 0 with bf16) keeps that fp32 copy for the run (grads.fp32, init).
      const bool held = deepspeed() && grads_fp32_ >= 0;
      const std::string sg = std::to_string(g) + ".s" + std::to_string(step_);
      const OpId up = e_ < kFp32 && !held ? alloc("grads.fp32." + sg, Tier::gpu, MemCategory::grads, "fp32",
                                                  kFp32 * sub, ph, compute_, ready)
                                          : -1;
      // Stage 3 under DeepSpeed (stage3.py _prepare_fp32_grad_for_sub_group): `self.flatten(averaged_gradients)`
      // (torch.cat of the sub-group's 16-bit gradient partitions: a new flat tensor) `.to(fp32)`: the flat copy lives
      // until the fp32 copy is made.
      std::vector<OpId> adam_ready = ready;
      if (up >= 0 && deepspeed() && p_.stage == 3) {
        const OpId flat = alloc("grads.step_flat." + sg, Tier::gpu, MemCategory::grads, "step_flat", e_ * sub, ph,
                                compute_, ready);
        const OpId cat = copy(name + ".flatten", CopyKind::d2d, e_ * sub, true, ph, compute_, {flat, up});
        const OpId cast = copy(name + ".to_fp32", CopyKind::d2d, kFp32 * sub, true, ph, compute_, {cat});
        set_cast(cast, p_.dtype, DType::fp32);
        use(cat, grad_partition_, e_ * sub_first, e_ * sub, Role::input, Access::read);
        use_whole(cat, flat, Role::output, Access::write);
        use_whole(cast, flat, Role::input, Access::read);
        use_whole(cast, up, Role::output, Access::write);
        release(flat, ph, compute_, {cast});
        adam_ready = {cast};
      }
      // With offloaded params the updated 16-bit weights go down into the partition (stage3.py
      // `_reassign_or_swap_out_partitioned_parameters`: the CPU fp16 flat `.data.copy_(` the fp32 master on the GPU).
      // Runtime zrun writes them on the GPU first (a 16-bit temporary); under DeepSpeed the copy is blocking, so torch
      // converts on the CPU (Copy.cu copy_kernel_cuda): the fp32 master crosses, nothing new on the GPU.
      const OpId w16 = p_.param_device != OffloadDevice::none && !deepspeed()
                           ? alloc("params16." + sg, Tier::gpu, MemCategory::buffers, "param_d2h", e_ * sub, ph,
                                   compute_, ready)
                           : -1;
      // Under DeepSpeed the step's Python also runs its gradient norm, flatten, cast, unscale and write-back as
      // kernels of their own (deepspeed_step_kernels.hpp), on the compute stream around Adam: priced with it.
      const Bytes deepspeed_extra =
          deepspeed() ? deepspeed_step_extra_bytes_per_param(
                            {p_.stage, p_.bf16_optimizer, false, p_.param_device != OffloadDevice::none}, e_)
                      : 0;
      const OpId opt = compute(name + ".adam", ComputeKind::optimizer, ph, adam_ready, 10.0 * sub,
                               sub * (2 * p_.optimizer_bytes_per_param + 2 * e_ + deepspeed_extra), sub);
      if (up >= 0) release(up, ph, compute_, {opt});
      if (p_.param_device != OffloadDevice::none) {
        use(opt, grad_partition_, e_ * sub_first, e_ * sub, Role::grad, Access::read);
        use(opt, optimizer_, p_.optimizer_bytes_per_param * sub_first, p_.optimizer_bytes_per_param * sub, Role::state,
            Access::read_write);
        if (w16 >= 0) use_whole(opt, w16, Role::param, Access::write);
      }
      if (p_.stage == 3 && p_.param_device == OffloadDevice::none) {
        // Stage 3: sub-group g over elements [first, first + sub) of this rank's partition: its 16-bit gradients,
        // its [master | exp_avg | exp_avg_sq] block of the optimizer buffer, its 16-bit partition out.
        use(opt, grad_partition_, e_ * sub_first, e_ * sub, Role::grad, Access::read);
        use(opt, optimizer_, p_.optimizer_bytes_per_param * sub_first, p_.optimizer_bytes_per_param * sub, Role::state,
            Access::read_write);
        use(opt, partition_, e_ * sub_first, e_ * sub, Role::param, Access::write);
      }
      if (p_.stage == 0 && !p_.bf16_optimizer) {
        // Stage 0: one sub-group, the whole model: 16-bit gradients in, [master | exp_avg | exp_avg_sq] state,
        // 16-bit weights out.
        use_whole(opt, grads_, Role::grad, Access::read);
        use_whole(opt, optimizer_, Role::state, Access::read_write);
        use_whole(opt, params_, Role::param, Access::write);
      } else if (p_.stage <= 2) {
        // Stages 1-2 (and BF16_Optimizer): this rank's partition of the flat buffers (one sub-group).
        const Bytes part = e_ * p_.param_partition;
        if (p_.stage <= 1)
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
    // copy_ of the fp32 master into the GPU's 16-bit partition converts on the CPU first). Stages 1-2 under
    // DeepSpeed 0.14.5 have no such buffer: CPU Adam updates the fp32 master alone (fp32_up_then_cast).
    const bool fp32_up = fp32_up_then_cast();
    const OpId weights16 = p_.param_device != OffloadDevice::none || fp32_up ? -1
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
    if (deepspeed()) adam_deps = {unscale_on_cpu(name, grad_use, sub, adam_deps)};
    OpId opt = compute(name + ".cpu_adam", ComputeKind::optimizer, ph, adam_deps, 10.0 * sub, 0, sub, -1, Device::cpu,
                       stream("cpu"));
    // With the partition in host memory CPU Adam writes its 16-bit weights there (stage3.py
    // `_reassign_or_swap_out_partitioned_parameters`: the fp16 flat's `.data.copy_(` the fp32 master).
    const BufferUse master{state_use.alloc, state_use.offset, kFp32 * sub, Role::param, Access::write};
    use_cpu_adam(sch_.ops[opt], grad_use, state_use,
                 weights16 >= 0     ? whole(sch_.ops[weights16], Role::param, Access::write)
                 : fp32_up          ? master
                 : params_on_nvme ? BufferUse{param_swap_out_, 0, e_ * sub, Role::param, Access::write}
                                    : sub_group_params(sub_first, sub, Role::param, Access::write));
    if (swap) {
      const OpId w = copy(name + ".nvme_write", CopyKind::nvme_write, state, true, ph, stream("nvme"), {opt});
      use_copy(sch_.ops[w], {*swap, 0, state}, {optimizer_, p_.optimizer_bytes_per_param * sub_first, state});
      last_state_write_ = w;
    }
    if (fp32_up) {
      opt = copy_fp32_master_up(name, master, sub_first, sub, opt);
    } else if (p_.param_device == OffloadDevice::none) {
      // Stage 3: the transient is the CPU's conversion of the fp32 master (converting_copy_pinned).
      const bool pinned = p_.stage == 3 ? converting_copy_pinned(s_.zero.offload_optimizer.pin_memory)
                                        : s_.zero.offload_optimizer.pin_memory;
      opt = copy(name + ".h2d", CopyKind::h2d, e_ * sub, pinned, ph, stream("h2d"), {opt});
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
  if (p_.stage <= 2) {  // (stage 0: BF16_Optimizer's update_lp_params under runtime deepspeed)
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

// DeepSpeed's unscale_and_clip_grads before each CPU Adam (stage_1_and_2.py line 1981, stage3.py line 2118):
// `grad.data.mul_(1. / combined_scale)` over the sub-group's fp32 gradients in host memory, unconditionally (a scale
// of 1 too): torch's CPU mul_, reading and writing 4 bytes an element (host-memory bytes: op_work.cpp prices them
// at CPU Adam's measured rate per byte).
OpId Builder::unscale_on_cpu(const std::string& name, BufferUse grads, Elements sub, std::vector<OpId> deps) {
  const OpId op = compute(name + ".unscale", ComputeKind::optimizer, Phase::step, std::move(deps), 1.0 * sub,
                          2 * kFp32 * sub, sub, -1, Device::cpu, stream("cpu"));
  grads.role = Role::grad;
  grads.access = Access::read_write;
  sch_.ops[op].uses.push_back(grads);
  return op;
}

// Stages 1-2 with the optimizer on the CPU under DeepSpeed 0.14.5 (stage_1_and_2.py step(), line 1877:
// `bit16_partitions[partition_id].data.copy_(fp32_partition.to(get_accelerator().current_device_name()).data)`):
// the updated fp32 master goes up whole into a new GPU tensor (4 bytes an element, pinned with pin_memory), a cast
// copies it into this rank's 16-bit partition, and the tensor is freed. Later DeepSpeed writes the 16-bit weights
// into a pinned host buffer first (param_buffer_of_bit16_for_cpu_offload_groups) and copies those up; zrun does.
bool Builder::fp32_up_then_cast() const {
  return deepspeed() && p_.stage <= 2 && p_.param_device == OffloadDevice::none;
}

OpId Builder::copy_fp32_master_up(const std::string& name, BufferUse master, Elements first, Elements sub,
                                  OpId adam) {
  const Phase ph = Phase::step;
  // On the current (compute) stream, as `.to()` allocates and copies (blocking: the step ends after it anyway).
  const OpId up = alloc(name + ".fp32_up", Tier::gpu, MemCategory::buffers, "param_h2d", kFp32 * sub, ph, compute_,
                        {adam});
  const OpId h2d =
      copy(name + ".h2d", CopyKind::h2d, kFp32 * sub, s_.zero.offload_optimizer.pin_memory, ph, compute_, {up});
  master.role = Role::input;
  use_copy(sch_.ops[h2d], master, whole(sch_.ops[up], Role::output, Access::write));
  const OpId cast = copy(name + ".cast", CopyKind::d2d, e_ * sub, true, ph, compute_, {h2d});
  set_cast(cast, DType::fp32, p_.dtype);
  BufferUse to{params_, e_ * first, e_ * sub};
  to.rank_stride = e_ * p_.param_partition;
  use_copy(sch_.ops[cast], whole(sch_.ops[up], Role::input, Access::read), to);
  release(up, ph, compute_, {cast});
  return cast;
}

// stage3.py _post_step: persistent_parameters[0].all_gather(persistent_parameters) -> partition_parameters.py
// _allgather_params_coalesced: per persistent tensor, a padded buffer of dp x ceil(numel / dp) and one
// all-gather of its updated partition into it. DeepSpeed then points the parameter at the buffer; the schedule's
// params.persistent is fixed, so the tensor is copied into it and the buffer freed.
void Builder::gather_persistent(const std::vector<OpId>& after) {
  if (persistent_ < 0) return;
  // runtime deepspeed with one rank and the parameters on the GPU: the partition is the parameter; nothing to gather.
  if (p_.runtime == RuntimeKind::deepspeed && p_.dp == 1 && p_.param_device == OffloadDevice::none) return;
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
OpId Builder::write_back_params(const std::string& name, Elements first, Elements sub, OpId opt, OpId w16) {
  const Phase ph = Phase::step;
  const bool on_nvme = sub_group_on_nvme(first);
  std::vector<OpId> deps{opt};
  if (on_nvme && last_param_write_ >= 0) deps.push_back(last_param_write_);
  // w16 < 0 (runtime deepspeed): the fp32 master crosses and the CPU converts it (see emit_optimizer_step), through
  // a temporary CPU tensor torch allocates for it: pageable, whatever pin_memory says (converting_copy_pinned).
  const Bytes crossing = w16 >= 0 ? e_ * sub : kFp32 * sub;
  OpId d = copy(name + ".param_d2h", CopyKind::d2h, crossing,
                w16 >= 0 ? s_.zero.offload_param.pin_memory : converting_copy_pinned(s_.zero.offload_param.pin_memory),
                ph, stream("d2h"), deps);
  const BufferUse to_host = on_nvme ? BufferUse{param_swap_out_, 0, e_ * sub} : sub_group_params(first, sub);
  use_copy(sch_.ops[d],
           w16 >= 0 ? whole(sch_.ops[w16], Role::input, Access::read)
                    : BufferUse{optimizer_, p_.optimizer_bytes_per_param * first, kFp32 * sub},
           to_host);
  if (w16 >= 0) release(w16, ph, stream("d2h"), {d});
  if (on_nvme) {
    d = copy(name + ".param_nvme_write", CopyKind::nvme_write, e_ * sub, true, ph, stream("nvme"), {d});
    use_copy(sch_.ops[d], {param_swap_out_, 0, e_ * sub, Role::input, Access::read}, sub_group_params(first, sub));
    last_param_write_ = d;
  }
  return d;
}

}  // namespace zsim::build
