#include "sim/engine/op_work.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cost_models/collective_cost.hpp"
#include "cost_models/compute_cost.hpp"
#include "cost_models/gemm_model.hpp"
#include "cost_models/measured_curve.hpp"
#include "cost_models/transfer_cost.hpp"
#include "sim/report/comm_volume.hpp"

namespace zsim {

namespace {

// DeepSpeedCPUAdam's host-memory bytes a parameter (fp32, AdamW): it reads the weight, gradient and both moments
// and writes the weight and both moments back (DeepSpeed csrc/includes/cpu_adam.h Step_AVX).
constexpr double kCpuAdamBytesPerParam = 28.0;

FlowPath scaled(const FlowPath& p, double coefficient) {
  FlowPath out;
  if (coefficient <= 0) return out;
  for (FlowUse u : p) out.push_back({u.link, u.coefficient * coefficient});
  return out;
}

void append(FlowPath& to, const FlowPath& more) { to.insert(to.end(), more.begin(), more.end()); }

// Rate the route gives a flow alone (its bottleneck).
double alone_rate(const FlowPath& route, const RankLinks& links) {
  double r = std::numeric_limits<double>::infinity();
  for (FlowUse u : route) r = std::min(r, links.bytes_per_s[u.link] / u.coefficient);
  return r;
}

void require_capacity(const Op& op, const FlowPath& route, const RankLinks& links) {
  for (FlowUse u : route)
    if (!(links.bytes_per_s[u.link] > 0))
      throw std::invalid_argument("op " + std::to_string(op.id) + " '" + op.name + "' needs link " +
                                  links.names[u.link] + ", which has zero bandwidth in the cluster spec");
}

// A collective priced by a measured bus bandwidth (efficiency.nvlink_busbw, group_busbw): its bus bytes as one flow
// over `route`, scaled so that the flow alone runs at `busbw`, sharing its links as any flow; no fixed part (the
// latency steps are in the figure).
OpWork at_measured_busbw(const CollectiveOp& col, int n, const FlowPath& route, double busbw, const RankLinks& links) {
  OpWork w;
  w.route = scaled(route, alone_rate(route, links) / busbw);
  w.algorithm = col.what == CollectiveKind::all_to_all ? CollectiveAlgorithm::pairwise : CollectiveAlgorithm::ring;
  w.flow_bytes = bus_bytes(col.what, static_cast<double>(col.bytes), n);
  w.side = SideKind::link_collective;
  return w;
}

OpWork collective_work(const Op& op, const Schedule& s, const ClusterSpec& c, const RankLinks& links) {
  OpWork w;
  const CollectiveOp& col = op.collective;
  const ProcessGroup& g = s.groups.at(col.group);
  const int n = g.size;
  if (col.bytes <= 0) return w;
  if (n <= 1) {
    // NCCL's one-rank path (src/enqueue.cc: nRanks == 1 -> ncclLaunchOneRank): an out-of-place call copies the
    // buffer, an averaging one (ncclAvg: PreMulSum) runs a kernel over it; an all-gather in place (the stage-3 fetch's
    // all_gather_into_tensor of the rank's slot of its own output) moves nothing, and neither would an in-place plain
    // sum, but DeepSpeed's reductions divide the gradients by the world size in a kernel of their own (zrun: ncclAvg).
    // The kernels read and write the bytes once: measured (efficiency.one_rank_collective: zrun calibrate's calls on a
    // one-rank communicator), its kind's latency plus the bytes at its rate (the line over all kinds where the kind has
    // none); otherwise a device copy.
    if (col.what == CollectiveKind::all_gather && collective_in_place(op)) return w;
    w.side = SideKind::collective;
    const auto& all = c.efficiency.one_rank_collective;
    const EfficiencySpec::OneRankLine& own = col.what == CollectiveKind::all_gather       ? all.all_gather
                                             : col.what == CollectiveKind::reduce_scatter ? all.reduce_scatter
                                             : col.what == CollectiveKind::all_reduce     ? all.all_reduce
                                                                                          : EfficiencySpec::OneRankLine{};
    const EfficiencySpec::OneRankLine one = own.GBps > 0 ? own : EfficiencySpec::OneRankLine{all.latency_us, all.GBps};
    if (one.GBps > 0)
      w.fixed_s = one.latency_us * 1e-6 + static_cast<double>(col.bytes) / GBps_to_bytes_per_s(one.GBps);
    else
      w.fixed_s = device_copy_s(col.bytes, c.gpu.hbm_GBps, c.efficiency.hbm_for(HbmKind::copy));
    return w;
  }
  const double S = static_cast<double>(col.bytes);
  const int k = g.nodes_spanned();
  const auto measured = c.efficiency.nvlink_busbw.find(to_string(col.what));
  if (k <= 1 && measured != c.efficiency.nvlink_busbw.end() && !measured->second.empty()) {
    // Measured on this node's links (efficiency.nvlink_busbw): the kind's bus bandwidth at this size over NVLink.
    require_capacity(op, links.nvlink, links);
    return at_measured_busbw(col, n, links.nvlink, interpolated_busbw(measured->second, S), links);
  }
  Seconds inter_latency = links.nvlink_latency_s;  // a group on one node has no network steps
  if (k <= 1) {
    w.route = links.nvlink;
  } else {
    inter_latency = links.ib_latency_s;
    const Bytes sent = bytes_sent_per_gpu(col.what, col.bytes, n);
    const Bytes cross = cross_node_bytes_per_gpu(col.what, col.bytes, g);
    const double c_nic = sent > 0 ? std::min(1.0, static_cast<double>(cross) / static_cast<double>(sent)) : 1.0;
    append(w.route, scaled(links.nic, c_nic));
    if (g.ranks_per_node > 1) append(w.route, scaled(links.nvlink, 1.0 - c_nic));
    append(w.route, scaled(links.leaf_uplink, c_nic * off_leaf_fraction(col.what, k, links.nodes_per_leaf)));
  }
  require_capacity(op, w.route, links);
  if (k > 1) {
    // Measured on a group of this shape (efficiency.group_busbw): the kind's bus bandwidth at this size over the
    // network route above.
    const auto shape = c.efficiency.group_busbw.find(group_busbw_shape(n, k));
    if (shape != c.efficiency.group_busbw.end())
      if (const auto kind = shape->second.find(to_string(col.what)); kind != shape->second.end() && !kind->second.empty())
        return at_measured_busbw(col, n, w.route, interpolated_busbw(kind->second, S), links);
  }
  const CollectiveLink link{links.nvlink_latency_s, inter_latency, alone_rate(w.route, links)};
  w.algorithm = choose_algorithm(col.what, S, n, k, link);
  w.fixed_s = latency_s(col.what, w.algorithm, n, k, link);
  w.flow_bytes = bandwidth_bytes(col.what, w.algorithm, S, n);
  w.side = SideKind::link_collective;
  return w;
}

OpWork copy_work(const Op& op, const ClusterSpec& c, const RankLinks& links) {
  OpWork w;
  if (op.copy.bytes <= 0 || op.copy.rank > 0) return w;  // rank 0's program: others' copies cost it nothing
  w.flow_bytes = static_cast<double>(op.copy.bytes);
  switch (op.copy.what) {
    case CopyKind::h2d:
    case CopyKind::d2h: {
      const double frac = op.copy.pinned ? 1.0 : c.efficiency.pageable_fraction(op.copy.what == CopyKind::h2d);
      if (!(frac > 0)) throw std::invalid_argument("efficiency.pageable_pcie_fraction must be > 0");
      w.route = scaled(op.copy.what == CopyKind::h2d ? links.h2d : links.d2h, 1.0 / frac);
      w.fixed_s = links.pcie_latency_s;
      break;
    }
    case CopyKind::nvme_read:
    case CopyKind::nvme_write: {
      // One request's line for a transfer of at most one request, where the cluster gives it: its latency, and its
      // bytes over the NVMe route scaled from the route's rate to that line's.
      const bool read = op.copy.what == CopyKind::nvme_read;
      w.route = read ? links.nvme_read : links.nvme_write;
      w.fixed_s = read ? links.nvme_read_latency_s : links.nvme_write_latency_s;
      const double one_GBps = read ? c.nvme.one_request_read_GBps : c.nvme.one_request_write_GBps;
      const double stream_GBps = read ? c.nvme.read_GBps : c.nvme.write_GBps;
      if (one_GBps > 0 && stream_GBps > 0 && op.copy.bytes <= kNvmeRequestBytes) {
        w.route = scaled(w.route, stream_GBps / one_GBps);
        w.fixed_s = (read ? c.nvme.one_request_read_latency_us : c.nvme.one_request_write_latency_us) * 1e-6;
      }
      // A larger transfer where the cluster gives figures per size (one process alone on the disk): its bytes over
      // the route scaled from the line's rate to the figure interpolated at its size, so that the node's ranks still
      // share the disk; no fixed part (the latency is in the figure).
      const auto& by_size = read ? c.nvme.read_GBps_by_size : c.nvme.write_GBps_by_size;
      if (!by_size.empty() && stream_GBps > 0 && op.copy.bytes > kNvmeRequestBytes) {
        w.route = scaled(w.route, stream_GBps / log_log_interpolated(by_size, static_cast<double>(op.copy.bytes),
                                                                     read ? "nvme.read_GBps_by_size"
                                                                          : "nvme.write_GBps_by_size"));
        w.fixed_s = 0;
      }
      break;
    }
    case CopyKind::d2d: {  // HBM to HBM on the rank's own GPU: no shared link, the HBM roofline
      // The kernels write `bytes` and read as many (a cast: in its source dtype's size), and read the
      // destination too where they add into it (an output use read_write: DeepSpeed's add_); each of the copy's
      // kernel_launches costs efficiency.launch_us.
      w.flow_bytes = 0;
      const bool adds = copy_adds(op);
      const double out = static_cast<double>(op.copy.bytes);
      double in = op.copy.cast ? out * dtype_bits(op.copy.cast_from) / dtype_bits(op.copy.cast_to) : out;
      if (adds) in += out;
      w.fixed_s = memory_bound_s(static_cast<Bytes>(in + out), c.gpu.hbm_GBps, c.efficiency.hbm_for(HbmKind::copy)) +
                  op.copy.kernel_launches * c.efficiency.launch_us * 1e-6;
      w.side = copy_run(op) == CopyRun::memcpy_per_piece ? SideKind::memcpy : SideKind::kernel;
      return w;
    }
  }
  require_capacity(op, w.route, links);
  return w;
}

// Which kind of memory-bound kernel a unit's hbm_bytes are (the schedule builder's convention,
// docs/schedule-semantics.md "Compute figures"): the embedding lookup a gather (copy), a unit of vectors only a
// norm, the head the loss's cross-entropy over the vocabulary, the attention core (attn.o, eager) the causal
// softmax over its scores.
HbmKind unit_hbm_kind(const ModelUnit& u) {
  if (u.hbm_kind == "copy") return HbmKind::copy;
  if (u.hbm_kind == "norm") return HbmKind::norm;
  if (u.hbm_kind == "softmax") return HbmKind::softmax;
  if (u.hbm_kind == "activation") return HbmKind::activation;
  if (u.hbm_kind == "cross_entropy") return HbmKind::cross_entropy;
  // Not given (a schedule file written before the key): by the unit.
  if (u.name == "embedding") return HbmKind::copy;
  if (u.name == "head") return HbmKind::cross_entropy;
  bool vectors_only = !u.tensors.empty();
  for (const ModelTensor& t : u.tensors) vectors_only &= t.cols == 0;
  return vectors_only ? HbmKind::norm : HbmKind::softmax;
}

// The memory-bound time of a forward, backward or recompute op's hbm_bytes, each kind at its efficiency
// (efficiency.hbm_for; a backward op's bytes at the backward kernels' kind, backward_of: the loss's backward rewrites
// the logits its forward only reads, the softmax's and the norm's backward move more bytes per launch), less `priced`: the bytes its GEMM calls move that the GEMM model already counts
// (gemm_hbm_bytes where the model prices the unit's calls, else 0). A recompute runs a whole layer: its norms read
// and write one activation each (2 x tokens x hidden x e bytes, as the builder counts them), the rest is eager
// attention's scores.
Seconds layer_memory_s(const Op& op, const Schedule& s, const ClusterSpec& c, Bytes priced) {
  const Bytes bytes = op.compute.hbm_bytes - std::min(priced, op.compute.hbm_bytes);
  const ScheduleModel& m = s.model;
  auto at = [&](HbmKind k, Bytes b) { return memory_bound_s(b, c.gpu.hbm_GBps, c.efficiency.hbm_for(k)); };
  if (op.unit >= 0 && op.unit < static_cast<int>(m.units.size())) {
    const HbmKind k = unit_hbm_kind(m.units[op.unit]);
    return at(op.compute.what == ComputeKind::backward ? backward_of(k) : k, bytes);
  }
  if (op.compute.what == ComputeKind::recompute && op.layer >= 0) {
    const Bytes e = dtype_bits(m.dtype) / 8;
    const Bytes norm_unit = 2 * m.micro_batch * m.seq_len * m.hidden * e;
    // The MLP activation's forward (schedule_builder.cpp activation_hbm): SwiGLU reads gate and up and writes act,
    // GeLU reads up and writes act.
    const Bytes activation_forward = (m.gated_mlp ? 3 : 2) * m.micro_batch * m.seq_len * m.ffn_hidden * e;
    Bytes norms = 0, activation = 0;
    for (const ModelUnit& u : m.units) {
      if (u.layer != op.layer) continue;
      if (unit_hbm_kind(u) == HbmKind::norm) norms += norm_unit;
      if (unit_hbm_kind(u) == HbmKind::activation) activation = activation_forward;
    }
    norms = std::min(norms, bytes);
    activation = std::min(activation, bytes - norms);
    return at(HbmKind::norm, norms) + at(HbmKind::activation, activation) +
           at(HbmKind::softmax, bytes - norms - activation);
  }
  return at(HbmKind::norm, bytes);
}

// The long kernels of a forward, backward or recompute op, for the wait of a side kernel issued beside it
// (OpWork::kernel_mean_s, kernel_residual_s): each GEMM call of its unit (the GEMM model's time of one call, or its
// FLOPs at the constant efficiency), flash attention's fused kernel as one; an op of GEMM FLOPs but no listed shapes as
// one kernel of that time. The memory-bound kernels between them are short and count as no wait.
void set_long_kernels(OpWork& w, const std::vector<GemmShape>& gemms, int bytes_per_element, double peak_tflops,
                      const GemmModel& model, double gemm_efficiency, Seconds gemm_time_s, Seconds fused_s,
                      const std::vector<GemmShape>& misaligned = {}, double misaligned_efficiency = 0) {
  double calls = 0, sum_s = 0, sum_sq = 0;
  auto add = [&](Seconds one_s, double n) {
    if (!(one_s > 0) || !(n > 0)) return;
    calls += n;
    sum_s += n * one_s;
    sum_sq += n * one_s * one_s;
  };
  for (const GemmShape& g : gemms)
    add(model.present() ? gemm_model_s(g.m, g.n, g.k, g.batch, bytes_per_element, peak_tflops, model)
                        : gemm_s(gemm_call_flops(g), peak_tflops, gemm_efficiency),
        static_cast<double>(g.calls));
  for (const GemmShape& g : misaligned)
    add(gemm_s(gemm_call_flops(g), peak_tflops, misaligned_efficiency), static_cast<double>(g.calls));
  if (gemms.empty() && misaligned.empty()) add(gemm_time_s, 1);
  add(fused_s, 1);
  if (calls == 0 || !(w.fixed_s > 0)) return;
  w.kernel_mean_s = sum_s / calls;
  w.kernel_residual_s = std::min(sum_sq / (2 * w.fixed_s), w.fixed_s);
}

// Moves the GEMMs with a misaligned dimension (cost_models' gemm_aligned) out of `gemms` and returns them, when `take`.
std::vector<GemmShape> take_misaligned(std::vector<GemmShape>& gemms, int bytes_per_element, bool take) {
  std::vector<GemmShape> out;
  if (!take) return out;
  auto aligned_end = std::stable_partition(gemms.begin(), gemms.end(),
                                           [&](const GemmShape& g) { return gemm_aligned(g, bytes_per_element); });
  out.assign(aligned_end, gemms.end());
  gemms.erase(aligned_end, gemms.end());
  return out;
}

Flops gemm_flops(const std::vector<GemmShape>& gemms) {
  double flops = 0;
  for (const GemmShape& g : gemms) flops += gemm_call_flops(g) * static_cast<double>(g.calls);
  return flops;
}

OpWork compute_work(const Op& op, const Schedule& s, const ClusterSpec& c, const SimOptions& o) {
  OpWork w;
  const ComputeOp& cp = op.compute;
  if (cp.device == Device::cpu) {
    const double cores = static_cast<double>(c.host.cores) / c.gpus_per_node;  // the node's cores, per rank
    if (cp.elements > 0 && !(cores > 0))
      throw std::invalid_argument("op '" + op.name + "' runs on the CPU but host.cores is 0");
    // Every rank of the node runs its CPU Adam at once (a data-parallel step): at the rate calibrate measured for as
    // many ranks at once on its cores (efficiency.cpu_adam_measured), where the profile has them; else its cores' rate,
    // at most its share of the node's ceiling (efficiency.cpu_adam_node_params_per_s; 0 = none).
    // Another pass over host memory (hbm_bytes given: DeepSpeed's unscale mul_) runs at CPU Adam's rate per byte:
    // both are bound by the host's memory bandwidth (one H200 host, DeepSpeed's profiled offload step: the unscale
    // 7.5 ms beside Adam's 24.5 ms, 0.305x; bytes 8 / 28, 0.286x; docs/deepspeed-time.md).
    const double adam_equivalents = cp.hbm_bytes > 0 ? static_cast<double>(cp.hbm_bytes) / kCpuAdamBytesPerParam
                                                     : static_cast<double>(cp.elements);
    const auto measured = c.efficiency.cpu_adam_measured.find(c.gpus_per_node);
    if (measured != c.efficiency.cpu_adam_measured.end() && !measured->second.empty()) {
      if (adam_equivalents > 0) w.fixed_s = adam_equivalents / cpu_adam_measured_params_per_s(measured->second, cores);
      return w;
    }
    w.fixed_s = cpu_adam_s(static_cast<Elements>(std::llround(adam_equivalents)), cores,
                           c.efficiency.cpu_adam_params_per_s_per_core, c.efficiency.cpu_adam_node_params_per_s,
                           c.gpus_per_node);
    return w;
  }
  const bool fp32 = o.precision == Precision::fp32;
  const double peak = fp32 ? c.gpu.peak_fp32_tflops : c.gpu.peak_tflops;
  double gemm_efficiency = c.efficiency.gemm;
  const GemmModel& model = fp32 ? c.efficiency.gemm_model_fp32 : c.efficiency.gemm_model;
  int gemm_launches_priced = 0;  // GEMM calls whose launch the GEMM model's launch_us already charges
  Bytes gemm_bytes_priced = 0;   // of hbm_bytes, what the GEMM model's operand traffic already counts
  // The unit's own GEMM calls (eager attention's core) only with a model fitted on such shapes: otherwise, as
  // before, the core's FLOPs run at the weights' GEMM efficiency and its scores' traffic is memory-bound time.
  std::vector<GemmShape> gemms = unit_gemms(op, s.model, model.present() && model.attention_shapes);
  // Under DeepSpeed (torch's matmul), GEMMs with a misaligned dimension run at their measured fraction of peak, apart
  // from the rest (efficiency.torch_misaligned_gemm; a recompute runs the forward's).
  const double misaligned_efficiency = s.meta.framework != "deepspeed" ? 0
                                       : cp.what == ComputeKind::backward
                                           ? c.efficiency.torch_misaligned_gemm.backward
                                           : c.efficiency.torch_misaligned_gemm.forward;
  const std::vector<GemmShape> misaligned = take_misaligned(gemms, fp32 ? 4 : 2, misaligned_efficiency > 0);
  if (model.present() && cp.flops > 0) {
    const double e = gemm_model_efficiency(gemms, fp32 ? 4 : 2, peak, model);
    if (e > 0) {
      gemm_efficiency = e;
      for (const GemmShape& g : gemms) gemm_launches_priced += static_cast<int>(g.calls);
      if (model.attention_shapes) gemm_bytes_priced = cp.gemm_hbm_bytes;
    }
  }
  // Every other kernel launch of the op (elementwise kernels, the attention core's GEMM calls where the model does not
  // price them, memsets; without a GEMM model the GEMMs too) costs efficiency.launch_us: the op's kernels run one
  // after the other on its stream.
  const Seconds launches_s =
      std::max(0, cp.kernel_launches - gemm_launches_priced) * c.efficiency.launch_us * 1e-6;
  // Forward, backward, recompute: the FLOPs are GEMMs and the bytes separate memory-bound kernels (norms, eager
  // attention's softmax) that the compute stream runs one after the other, so their times add. The other kinds
  // (optimizer step, quantize) are one fused elementwise kernel: the slower of its FLOPs and its bytes.
  const bool layer_work = cp.what == ComputeKind::forward || cp.what == ComputeKind::backward ||
                          cp.what == ComputeKind::recompute;
  if (layer_work) {
    // Flash attention's fused kernel (the op's fused_attention_flops) runs at its measured efficiency where the profile
    // gives one for the op's direction (a recompute runs the forward), the rest of the FLOPs (the unit's GEMMs) as
    // before. 16-bit training only: the efficiency is measured on zrun's 16-bit kernels (it has none in fp32), so an
    // fp32 run keeps the core at its unit's GEMM efficiency.
    const double flash = cp.what == ComputeKind::backward ? c.efficiency.flash_attention.backward
                                                          : c.efficiency.flash_attention.forward;
    const Flops fused = flash > 0 && !fp32 ? std::min(cp.fused_attention_flops, cp.flops) : 0;
    const Flops narrow = std::min(gemm_flops(misaligned), cp.flops - fused);
    const Seconds gemms_s = gemm_s(cp.flops - fused - narrow, peak, gemm_efficiency) +
                            gemm_s(narrow, peak, misaligned_efficiency),
                  fused_s = gemm_s(fused, peak, flash);
    w.fixed_s = gemms_s + fused_s + layer_memory_s(op, s, c, gemm_bytes_priced) + launches_s;
    set_long_kernels(w, gemms, fp32 ? 4 : 2, peak, model, gemm_efficiency, gemms_s, fused_s, misaligned,
                     misaligned_efficiency);
  } else {
    const HbmKind kind = cp.what == ComputeKind::optimizer ? HbmKind::adam : HbmKind::quantize;
    w.fixed_s = roofline_s(cp.flops, peak, gemm_efficiency, cp.hbm_bytes, c.gpu.hbm_GBps, c.efficiency.hbm_for(kind)) +
                launches_s;
    // ZeRO++'s kernels run on a communication stream, beside the compute stream's GEMMs: memory-bound kernels, of
    // the class calibrate measures with a copy kernel there (efficiency.beside_compute.kernel).
    if (cp.what == ComputeKind::quantize || cp.what == ComputeKind::dequantize ||
        cp.what == ComputeKind::dequant_reduce)
      w.side = SideKind::kernel;
  }
  return w;
}

}  // namespace

// The GEMMs of a GPU compute op under the schedule's model: each weight matrix W [in x out] of the op's unit
// (a recompute: every unit of its layer) multiplies the micro-batch's tokens: forward (and recompute)
// tokens x out x in; backward the input gradient tokens x in x out and the weight gradient in x out x tokens.
// The head multiplies by the (possibly tied) vocab x hidden matrix. With `core_calls`, the unit's own GEMM calls
// (ModelUnit::forward_gemms / backward_gemms: eager attention's batched products) are listed too; without, they are
// not and the op's remaining FLOPs run at the listed GEMMs' efficiency.
std::vector<GemmShape> unit_gemms(const Op& op, const ScheduleModel& m, bool core_calls) {
  std::vector<GemmShape> out;
  const std::int64_t tokens = m.micro_batch * m.seq_len;
  if (tokens <= 0) return out;
  const bool backward = op.compute.what == ComputeKind::backward;
  auto add = [&](std::int64_t in, std::int64_t outs) {
    if (backward) {
      out.push_back({tokens, in, outs, 1});
      out.push_back({in, outs, tokens, 1});
    } else {
      out.push_back({tokens, outs, in, 1});
    }
  };
  auto add_unit = [&](const ModelUnit& u) {
    if (u.name == "head" && u.tensors.empty()) add(m.hidden, m.vocab);  // tied: the embedding's matrix
    for (const ModelTensor& t : u.tensors)
      if (t.cols != 0 && u.name != "embedding") add(t.rows, t.cols);
    if (core_calls)
      for (const GemmCalls& c : backward ? u.backward_gemms : u.forward_gemms)
        out.push_back({c.m, c.n, c.k, c.batch, c.calls});
  };
  if (op.unit >= 0 && op.unit < static_cast<int>(m.units.size())) {
    add_unit(m.units[op.unit]);
  } else if (op.compute.what == ComputeKind::recompute && op.layer >= 0) {
    for (const ModelUnit& u : m.units)
      if (u.layer == op.layer) add_unit(u);
  }
  return out;
}

double off_leaf_fraction(CollectiveKind kind, int k, int nodes_per_leaf) {
  if (k <= 1 || nodes_per_leaf <= 0 || k <= nodes_per_leaf) return 0;
  if (kind == CollectiveKind::all_to_all) return static_cast<double>(k - nodes_per_leaf) / (k - 1);
  const int leaves = (k + nodes_per_leaf - 1) / nodes_per_leaf;
  return static_cast<double>(leaves) / k;
}

bool collective_in_place(const Op& op) {
  const BufferUse* in = nullptr;
  const BufferUse* out = nullptr;
  for (const BufferUse& u : op.uses) {
    if (u.role == Role::input && !in) in = &u;
    if ((u.role == Role::output || u.role == Role::param) && !out) out = &u;
  }
  return in && out && in->alloc == out->alloc && in->offset == out->offset;
}

int copy_use_pairs(const Op& op) { return static_cast<int>(op.uses.size() / 2); }

bool copy_adds(const Op& op) {
  for (const BufferUse& u : op.uses)
    if (u.role == Role::output && u.access == Access::read_write) return true;
  return false;
}

CopyRun copy_run(const Op& op) {
  if (op.copy.cast || copy_adds(op)) return CopyRun::kernel_per_piece;
  return op.copy.what == CopyKind::d2d && op.copy.kernel_launches < copy_use_pairs(op) ? CopyRun::batched
                                                                                        : CopyRun::memcpy_per_piece;
}

OpWork op_work(const Op& op, const Schedule& s, const ClusterSpec& c, const RankLinks& links, const SimOptions& o) {
  switch (op.kind) {
    case OpKind::compute: return compute_work(op, s, c, o);
    case OpKind::collective: return collective_work(op, s, c, links);
    case OpKind::copy: return copy_work(op, c, links);
    case OpKind::alloc:
    case OpKind::free: return {};
  }
  return {};
}

}  // namespace zsim
