// The schedule builder's ZeRO-3 gradient reduction (reduce_scatter_coalesced into the partition) and the
// gradient partitions' offload to the CPU and NVMe.
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

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
std::vector<size_t> Builder::all_members(const GradBucket& b) {
  std::vector<size_t> m(b.tensors.size());
  for (size_t j = 0; j < m.size(); ++j) m[j] = j;
  return m;
}

// Offset of each of the bucket's tensors in its buffer (bucket order).
std::vector<Elements> Builder::bucket_offsets(const GradBucket& b) {
  std::vector<Elements> at;
  Elements off = 0;
  for (const TensorShape& t : b.tensors) at.push_back(std::exchange(off, off + t.numel()));
  return at;
}

OpId Builder::zero3_reduce(size_t i, const std::vector<size_t>& members, const std::string& name, OpId bwd, int layer) {
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
  // One tensor that divides evenly is reduce-scattered where it lies (reduce_scatter_coalesced: `tensors[0].view(-1)`):
  // a bucket of one, or (runtime deepspeed) one of qgZ's fallback calls, at its offset in the bucket.
  const bool in_place = members.size() == 1 && b.tensors[members[0]].numel() % n == 0 &&
                        (b.tensors.size() == 1 || p_.runtime == RuntimeKind::deepspeed);
  const Bytes base = in_place ? ce * at[members[0]] : 0;  // where the reduce-scatter's input starts in `flat`
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
    use(done, flat, base, ce * part * n, Role::input, Access::read);
    use(done, flat, base, ce * part, Role::output, Access::write);
    sch_.ops[done].uses.back().rank_stride = ce * part;
  }
  Bytes src_stride = e_ * part;  // where this rank's reduced chunks are: slot r of `flat`, or the cast-back buffer
  Bytes src_base = base;         // and where slot 0 starts there
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
    src_base = 0;
    temps.push_back(back);
  }
  if (optimizer_offloaded()) {
    std::vector<ReducedChunk> chunks;
    for (size_t j : members) {
      const auto [u, k] = b.members[j];
      chunks.push_back({u, k, src_base + e_ * slot[j], ceil_div(b.tensors[j].numel(), n), layout_.partition[u][k]});
    }
    done = partition_grads_to_cpu(chunks, uses ? flat : -1, src_stride, name, done, layer);
  } else {
    done = copy(name + ".partition", CopyKind::d2d, e_ * part, true, ph, rs_, {done}, layer);
    per_tensor_kernels(done, static_cast<std::int64_t>(members.size()));  // partition_grads: copy_ / add_ per param
    for (size_t j : members) {
      if (!uses) break;
      const auto [u, k] = b.members[j];
      use(done, flat, src_base + e_ * slot[j], e_ * ceil_div(b.tensors[j].numel(), n), Role::input, Access::read, u, k);
      sch_.ops[done].uses.back().rank_stride = src_stride;
      use_grad_partition(done, u, k);
    }
  }
  for (OpId t : temps) done = release(t, ph, rs_, {done});
  return done;
}

// Stage 3 with optimizer offload: partition_grads (stage3.py), on the reduction's stream, tensor by tensor. The
// 16-bit gradient partitions live in host memory (grad_partitions_flat_buffer: pinned with pin_memory, of
// gradient_accumulation_dtype, which is the training dtype under ZeRO: engine.py get_data_types). At micro-step 0
// the reduced chunk is copied down into it and back up (`grad_buffer.to(grad_partition.device)`); after, the host
// partition comes up, the reduced chunk is added on the GPU and the sum goes back down ("adding directly to cpu is
// very slow").
//
// Runtime deepspeed (DeepSpeed 0.14.5's partition_grads as it runs): the GPU copy is a new tensor per parameter,
// dropped when the loop rebinds `grad_buffer` to the next parameter's host slice, so one lives at a time. At the
// boundary `_constant_buffered_norm2(grad_buffer)` takes its norm in float64, `.double()` of slices of at most
// 250M elements (one transient a slice), and `fp32_grad_tensor.copy_(grad_buffer)` copies it down into the CPU
// optimizer's fp32 gradients: a blocking copy, so torch converts on the CPU (Copy.cu copy_kernel_cuda:
// "For blocking transfers conversions are performed on CPU to avoid allocating extra GPU memory"): no fp32 copy on
// the GPU. With the optimizer on NVMe the fp32 copies (`grad_buffer.float()`) are kept for the bucket
// (offload_fp32_gradients) and swapped out together at its end.
// Runtime zrun: one GPU copy for the bucket, and one fp32 conversion buffer reused chunk after chunk.
// `src` < 0: ops without uses.
OpId Builder::partition_grads_to_cpu(const std::vector<ReducedChunk>& chunks, OpId src, Bytes rank_stride, const std::string& name, OpId done, int layer) {
  const Phase ph = Phase::backward;
  const bool pinned = s_.zero.offload_optimizer.pin_memory, uses = src >= 0;
  const bool per_tensor = deepspeed();  // a GPU copy per parameter, freed before the next one's
  Elements total = 0, widest = 0;
  for (const ReducedChunk& c : chunks) total += c.elements, widest = std::max(widest, c.elements);
  OpId gpu16 = per_tensor ? -1
                          : alloc("grads.partition16.gpu." + name + tag(), Tier::gpu, MemCategory::buffers,
                                  "grad_buffer", e_ * total, ph, rs_, {done}, layer);
  const bool swap = p_.optimizer_device == OffloadDevice::nvme;
  OpId last = per_tensor ? done : gpu16, fp32 = -1;
  if (last_micro_ && (swap || !per_tensor))
    last = fp32 = alloc("grads.to_fp32." + name + tag(), Tier::gpu, MemCategory::buffers, "offload_cast",
                        kFp32 * (swap ? total : widest), ph, rs_, {last}, layer);
  Bytes in_bucket = 0;  // the chunk's place in the bucket's 16-bit elements (x e_)
  for (size_t j = 0; j < chunks.size(); ++j) {
    const ReducedChunk& c = chunks[j];
    const Bytes bytes = e_ * c.elements, host = e_ * c.to;
    const std::string piece = name + ".t" + std::to_string(j);
    if (per_tensor)
      last = gpu16 = alloc("grads.partition16.gpu." + piece + tag(), Tier::gpu, MemCategory::buffers, "grad_buffer",
                           bytes, ph, rs_, {last}, layer);
    const Bytes at = per_tensor ? 0 : in_bucket;  // the chunk's place in gpu16
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
    if (last_micro_ && per_tensor) constant_buffered_norm2(uses ? gpu16 : -1, c, piece, last, layer);
    const BufferUse to_cpu{grads_fp32_, kFp32 * c.to, kFp32 * c.elements, Role::output, Access::write, c.unit, c.tensor};
    if (last_micro_ && per_tensor && !swap) {
      // fp32_grad_tensor.copy_(grad_buffer): the 16-bit copy crosses into torch's temporary CPU tensor, the CPU
      // converts (converting_copy_pinned).
      const OpId down = last = copy(piece + ".d2h", CopyKind::d2h, bytes, converting_copy_pinned(pinned), ph, rs_,
                                    {last}, layer);
      if (uses) use_copy(sch_.ops[down], on_gpu, to_cpu);
    } else if (last_micro_) {
      const OpId cast = step(".to_fp32", CopyKind::d2d, kFp32 * c.elements);
      set_cast(cast, p_.dtype, DType::fp32);
      const BufferUse temp{fp32, swap ? kFp32 * (in_bucket / e_) : 0, kFp32 * c.elements, Role::input, Access::read,
                           c.unit, c.tensor};
      if (uses) use_copy(sch_.ops[cast], on_gpu, temp);
      if (!swap) {
        const OpId down = step(".d2h", CopyKind::d2h, kFp32 * c.elements);
        if (uses) use_copy(sch_.ops[down], temp, to_cpu);
      }
    }
    if (per_tensor) last = release(gpu16, ph, rs_, {last});
    in_bucket += bytes;
  }
  if (swap && last_micro_) last = swap_out_gradients(chunks, total, uses ? fp32 : -1, name, last, layer);
  if (fp32 >= 0) last = release(fp32, ph, rs_, {last});
  return per_tensor ? last : release(gpu16, ph, rs_, {last});
}

// stage3.py _constant_buffered_norm2 (DeepSpeed 0.14.5): `part.data.double().norm(2)**2.0` for each slice of at most
// buffer_size = 250M elements of the GPU copy: a float64 copy of the slice lives while its norm is taken. `gpu16` < 0:
// ops without uses.
void Builder::constant_buffered_norm2(OpId gpu16, const ReducedChunk& c, const std::string& piece, OpId& last,
                                      int layer) {
  constexpr Elements kNormSliceElements = 250'000'000;  // _constant_buffered_norm2's buffer_size default
  constexpr Bytes kFp64 = 8;
  const Phase ph = Phase::backward;
  int k = 0;
  for (Elements from = 0; from < c.elements; from += kNormSliceElements, ++k) {
    const Elements n = std::min(kNormSliceElements, c.elements - from);
    const std::string slice = piece + ".norm" + std::to_string(k);
    const OpId d = alloc("grads.norm64." + slice + tag(), Tier::gpu, MemCategory::buffers, "grad_norm", kFp64 * n,
                         ph, rs_, {last}, layer);
    last = copy(slice + ".double", CopyKind::d2d, kFp64 * n, true, ph, rs_, {d}, layer);
    set_cast(last, p_.dtype, DType::fp64);
    if (gpu16 >= 0) use_copy(sch_.ops[last], {gpu16, e_ * from, e_ * n, Role::input, Access::read, c.unit, c.tensor},
                             {d, 0, kFp64 * n, Role::output, Access::write, c.unit, c.tensor});
    last = release(d, ph, rs_, {last});
  }
}

// The optimizer on NVMe: _swap_out_offload_fp32_gradients -> the optimizer swapper's swap_out_gradients
// (swap_tensor/optimizer_utils.py _swap_out_gradients -> AsyncTensorSwapper.swap_out_tensors): each fp32 gradient
// chunk is copied into pinned swap memory and written, asynchronously, to its place in the sub-group's gradient
// swap file (here: its range of grads.fp32 on the NVMe tier). The step's swap-in reads them back with the state.
// `total`: the chunks' elements; `fp32` < 0: ops without uses.
// The chunks are staged through the swapper's pinned pool (`allocate_all` into the AsyncTensorSwapper), in turn
// around it: a chunk waits for the writes of the chunks that held its bytes before. A chunk larger than the pool
// (zsim's sub-groups may cut a tensor, DeepSpeed's never do) gets a pinned buffer of its own.
OpId Builder::swap_out_gradients(const std::vector<ReducedChunk>& chunks, Elements total, OpId fp32, const std::string& name, OpId after, int layer) {
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
void Builder::use_grad_partition(OpId op, int u, int k) {
  use(op, grad_partition_, e_ * layout_.partition[u][k], e_ * partition_numel(p_.units[u].tensors[k].numel(), p_.dp),
      Role::output, micro_ == 0 ? Access::write : Access::read_write, u, k);
}

}  // namespace zsim::build
