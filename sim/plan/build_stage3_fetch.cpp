// The schedule builder's ZeRO-3 parameter fetches: DeepSpeed's coordinator's all-gather calls (coalesced, qwZ,
// hpZ, sequential), their waits and releases, offload_param's staging and NVMe swap-ins.
#include "sim/plan/schedule_builder_state.hpp"
#include <stdexcept>

namespace zsim::build {

std::string Builder::gathered_name(const Member& m, int call) const {
  return "gathered." + p_.units[m.unit].name + tag() + (m.phase == Phase::forward ? "f" : "b") + ".c" +
         std::to_string(call);
}

// Issues one fetch call of DeepSpeed's coordinator (the current module, or the prefetch batch), after
// `after`, the compute op of the previous trace step (DeepSpeed issues a step's fetches from that
// step's hook; the dependency keeps the comm stream from running further ahead than the prefetch
// window).
void Builder::fetch(const std::vector<Member>& members, OpId after) {
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
std::vector<std::pair<int, int>> Builder::gathered_ids(int u) const {
  std::vector<std::pair<int, int>> ids;
  for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k)
    if (layout_.gathered[u][k] >= 0) ids.push_back({u, k});
  return ids;
}

// Range [first, first + n) of this rank's partition, as pieces of params.partition (elements before
// plan.nvme_params_from) and params.partition.nvme (from it on): one piece unless the range straddles that element.
std::vector<Builder::PartitionPiece> Builder::partition_pieces(Elements first, Elements n) const {
  const Elements split = partition_nvme_ >= 0 ? p_.nvme_params_from : p_.optimizer_partition;
  std::vector<PartitionPiece> out;
  if (first < split) out.push_back({partition_, e_ * first, e_ * (std::min(first + n, split) - first), 0});
  if (first + n > split) {
    const Elements at = std::max(first, split);
    out.push_back({partition_nvme_, e_ * (at - split), e_ * (first + n - at), e_ * (at - first)});
  }
  return out;
}

// The buffer that holds sub-group [first, first + n): sub-groups never straddle plan.nvme_params_from.
BufferUse Builder::sub_group_params(Elements first, Elements n, Role role, Access access) const {
  const PartitionPiece q = partition_pieces(first, n).front();
  return {q.buffer, q.at, q.bytes, role, access};
}

// What this rank contributes of the call's tensor i: its partition, or (hpZ) its secondary partition.
void Builder::use_source(const Call& c, OpId op, size_t i, Role role, Access access) {
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
std::pair<OpId, OpId> Builder::stage_secondary(Call& c, int u, const std::string& what, std::vector<OpId> deps) {
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

void Builder::read_swap_ins(const std::vector<SwapIn>& reads, Phase ph, OpId after) {
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

void Builder::issue_call(const std::vector<Member>& members, std::vector<std::pair<int, int>> ids, OpId after) {
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
void Builder::wait_call(int id, OpId after) {
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
void Builder::keep_secondary(int u, OpId gathered) {
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
Elements Builder::hpz_tail(int u) const {
  if (!p_.hpz_enabled || p_.units[u].gathered_tensors.empty()) return 0;
  const TensorShape& last = p_.units[u].gathered_tensors.back();
  return ceil_div(last.numel(), p_.dp) * p_.dp - last.numel();
}

// Unit u is needed now (fetch_sub_module's wait): waits for its calls; a call's temporaries are freed
// once all its units have been waited for.
void Builder::await_unit(int u, OpId after) {
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

// runtime deepspeed (deepspeed_fetch.hpp): fetch_sub_module's call and prefetch batch, each one __all_gather_params
// call (split by secondary partition in fetch()), issued in the hooks' order; its wait for the module's parameters; a
// recompute's release of a module gathered again before the recompute (its buffers freed after the compute that last
// read them, the previous step's). With one rank and the parameters on the GPU DeepSpeed gathers nothing
// (partition_parameters.py all_gather_coalesced: `num_partitions == 1` -> _no_gather_coalesced, `param.data =
// ds_tensor.data`): the unit's tensors are read where params.partition holds them.
void Builder::run_fetch_actions(const FetchStep& st) {
  const bool no_gather = p_.dp == 1 && p_.param_device == OffloadDevice::none;
  for (const FetchAction& a : st.actions) {
    switch (a.kind) {
      case FetchAction::Kind::gather: {
        if (no_gather) {
          for (int u : a.units) {
            Live l;
            for (int k = 0; k < static_cast<int>(p_.units[u].tensors.size()); ++k)
              if (layout_.gathered[u][k] >= 0) l.where.push_back({partition_, e_ * layout_.partition[u][k]});
            live_[u] = std::move(l);
          }
          break;
        }
        std::vector<Member> members;
        for (int u : a.units) {
          if (live_.count(u)) throw std::logic_error("schedule: " + p_.units[u].name + " gathered twice");
          members.push_back({u, st.phase, a.prefetch});
        }
        fetch(members, last_compute_);
        break;
      }
      case FetchAction::Kind::wait:
        for (int u : a.units)
          if (live_.count(u)) await_unit(u, last_compute_);
        break;
      case FetchAction::Kind::release:
        for (int u : a.units) {
          for (OpId b : live_[u].buffers)
            if (!shared_.count(b) || --shared_[b] == 0) release(b, st.phase, compute_, {last_compute_, live_[u].done});
          live_.erase(u);
        }
        break;
    }
  }
}

}  // namespace zsim::build
