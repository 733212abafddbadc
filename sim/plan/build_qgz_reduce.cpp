// The schedule builder's ZeRO++ qgZ reduction: int4 quantized hierarchical all-to-alls (with LoCo).
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

Builder::QgzPeerLayout Builder::qgz_peer_layout(const std::vector<std::pair<Bytes, Bytes>>& chunks) {
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
OpId Builder::qgz_reduce(size_t i, const std::string& name, OpId bwd, int layer) {
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
    // A hop's all-to-alls: zrun's one for the bucket (its peer-major regions), or DeepSpeed's two per tensor (its
    // int4 values, then its fp32 scales: all_to_all_single of intra_quant_int4 / intra_q_scales, then of
    // global_input_tensor / global_scales), in bucket order.
    const bool per_tensor = p_.runtime == RuntimeKind::deepspeed;
    auto hop = [&](const char* which, int group, const QuantizedSize& bucket, bool inter_hop, OpId after) {
      std::vector<OpId> ops;
      if (!per_tensor) {
        ops.push_back(collective(name + ".all_to_all." + which, CollectiveKind::all_to_all, group, bucket.total(),
                                 bucket.scales, DType::int4, ph, rs_, {after}, layer));
        return ops;
      }
      for (size_t x = 0; x < quant.size(); ++x) {
        const TensorShape& t = b.tensors[quant[x]];
        const QuantizedSize z = inter_hop ? qgz_sizes(t.rows, t.cols, n, L).inter : qgz_sizes(t.rows, t.cols, n, L).intra;
        const std::string what = name + ".t" + std::to_string(quant[x]) + ".all_to_all." + which;
        ops.push_back(collective(what, CollectiveKind::all_to_all, group, z.data, 0, DType::int4, ph, rs_,
                                 {ops.empty() ? after : ops.back()}, layer));
        ops.push_back(collective(what + ".scales", CollectiveKind::all_to_all, group, z.scales, z.scales, DType::fp32,
                                 ph, rs_, {ops.back()}, layer));
      }
      return ops;
    };
    const std::vector<OpId> a1 = hop("intra", intra_, intra, false, q);
    const OpId d1 = compute(name + ".dequant_reduce.intra", ComputeKind::dequant_reduce, ph, {a1.back()}, 0,
                            intra.total() + inter.total(), quant_elems, layer, Device::gpu, rs_);
    const std::vector<OpId> a2 = hop("inter", inter_, inter, true, d1);
    const OpId d2 = compute(name + ".dequant_reduce.inter", ComputeKind::dequant_reduce, ph, {a2.back()}, 0,
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
      if (!per_tensor) {  // each all-to-all: its send region whole in, its receive region whole out (a block a peer)
        use(a1[0], qbuf, 0, sent1, Role::input, Access::read);
        use(a1[0], qbuf, r1, sent1, Role::output, Access::write);
        use(a2[0], qbuf, r2, sent2, Role::input, Access::read);
        use(a2[0], qbuf, r3, sent2, Role::output, Access::write);
      }
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
        if (per_tensor) {  // DeepSpeed's calls: the tensor's values, then its scales, in every peer's block
          chunked(a1[2 * x], 0, l1, x, true, v1, L, Role::input, Access::read);
          chunked(a1[2 * x], r1, l1, x, true, v1, L, Role::output, Access::write);
          chunked(a1[2 * x + 1], 0, l1, x, false, s1, L, Role::input, Access::read);
          chunked(a1[2 * x + 1], r1, l1, x, false, s1, L, Role::output, Access::write);
          chunked(a2[2 * x], r2, l2, x, true, v2, nodes, Role::input, Access::read);
          chunked(a2[2 * x], r3, l2, x, true, v2, nodes, Role::output, Access::write);
          chunked(a2[2 * x + 1], r2, l2, x, false, s2, nodes, Role::input, Access::read);
          chunked(a2[2 * x + 1], r3, l2, x, false, s2, nodes, Role::output, Access::write);
        }
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
  // The bucket's other tensors: zrun reduce-scatters them together; DeepSpeed one reduce_scatter_coalesced([tensor])
  // each (all_to_all_quant_reduce's fallback for vectors and matrices that do not divide by 2 x world).
  if (!plain.empty() && p_.runtime != RuntimeKind::deepspeed) ends.push_back(zero3_reduce(i, plain, name, bwd, layer));
  if (p_.runtime == RuntimeKind::deepspeed)
    for (size_t j : plain) ends.push_back(zero3_reduce(i, {j}, name + ".t" + std::to_string(j), bwd, layer));
  return ends.back();
}

}  // namespace zsim::build
