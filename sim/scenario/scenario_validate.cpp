#include "sim/scenario/scenario_validate.hpp"

#include <cmath>
#include <tuple>

namespace zsim {
namespace {

class Check {
 public:
  explicit Check(const LocateKey& locate) : locate_(locate) {}
  void that(bool ok, const std::string& path, const std::string& message) const {
    if (!ok) throw InputError(locate_(path), message);
  }
  template <typename T>
  void in_range(T value, T lo, T hi, const std::string& path) const {
    that(value >= lo && value <= hi, path,
         "must be between " + num(lo) + " and " + num(hi) + ", got " + num(value));
  }
  void positive(double value, const std::string& path) const {
    that(std::isfinite(value) && value > 0, path, "must be positive, got " + num(value));
  }
  void non_negative(double value, const std::string& path) const {
    that(std::isfinite(value) && value >= 0, path, "must not be negative, got " + num(value));
  }

  template <typename T>
  static std::string num(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      std::string s = std::to_string(v);
      while (s.size() > 1 && s.back() == '0') s.pop_back();
      if (!s.empty() && s.back() == '.') s.pop_back();
      return s;
    } else {
      return std::to_string(v);
    }
  }

 private:
  const LocateKey& locate_;
};

const std::string kZ = "deepspeed.zero_optimization.";

}  // namespace

void validate_model(const ModelSpec& m, const LocateKey& locate) {
  Check c(locate);
  c.in_range<std::int64_t>(m.layers, 1, kMaxLayers, "model.layers");
  c.in_range<std::int64_t>(m.hidden, 1, kMaxHidden, "model.hidden");
  c.in_range<std::int64_t>(m.ffn_hidden, 1, 16 * kMaxHidden, "model.ffn_hidden");
  c.in_range<std::int64_t>(m.heads, 1, m.hidden, "model.heads");
  c.in_range<std::int64_t>(m.kv_heads, 1, m.heads, "model.kv_heads");
  c.in_range<std::int64_t>(m.vocab, 1, kMaxVocab, "model.vocab");
  c.in_range<std::int64_t>(m.max_position_embeddings, 0, kMaxSeqLen, "model.max_position_embeddings");
  for (auto [p, path] : {std::pair{m.attention_dropout, "model.attention_dropout"},
                         std::pair{m.hidden_dropout, "model.hidden_dropout"}})
    c.that(std::isfinite(p) && p >= 0 && p < 1, path, "a dropout probability is in [0, 1), got " + Check::num(p));
  c.that(m.hidden % m.heads == 0, "model.heads",
         "heads (" + std::to_string(m.heads) + ") must divide hidden (" + std::to_string(m.hidden) + ")");
  c.that(m.heads % m.kv_heads == 0, "model.kv_heads",
         "kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" + std::to_string(m.heads) + ")");
}

void validate_cluster(const ClusterSpec& cl, const LocateKey& locate) {
  Check c(locate);
  c.in_range(cl.nodes, 1, kMaxNodes, "cluster.nodes");
  c.in_range(cl.gpus_per_node, 1, kMaxGpusPerNode, "cluster.gpus_per_node");
  c.that(cl.gpu.hbm_bytes > 0, "cluster.gpu",
         "no GPU memory size: give cluster.gpu as a preset (e.g. h100-80gb), cluster.gpu.hbm_bytes, or a "
         "cluster.profile");
  c.positive(cl.gpu.hbm_GBps, "cluster.gpu.hbm_GBps");
  c.positive(cl.gpu.peak_tflops, "cluster.gpu.peak_tflops");
  c.non_negative(cl.gpu.peak_fp32_tflops, "cluster.gpu.peak_fp32_tflops");
  c.non_negative(static_cast<double>(cl.host.memory_bytes), "cluster.host.memory_bytes");
  c.in_range(cl.host.cores, 0, 1 << 20, "cluster.host.cores");
  c.non_negative(static_cast<double>(cl.nvme.bytes), "cluster.nvme.bytes");
  c.non_negative(cl.nvme.read_GBps, "cluster.nvme.read_GBps");
  c.non_negative(cl.nvme.write_GBps, "cluster.nvme.write_GBps");
  c.non_negative(cl.nvme.read_latency_us, "cluster.nvme.read_latency_us");
  c.non_negative(cl.nvme.write_latency_us, "cluster.nvme.write_latency_us");
  c.non_negative(cl.nvme.one_request_read_latency_us, "cluster.nvme.one_request_read_latency_us");
  c.non_negative(cl.nvme.one_request_read_GBps, "cluster.nvme.one_request_read_GBps");
  c.non_negative(cl.nvme.one_request_write_latency_us, "cluster.nvme.one_request_write_latency_us");
  c.non_negative(cl.nvme.one_request_write_GBps, "cluster.nvme.one_request_write_GBps");
  c.non_negative(cl.links.nvlink_GBps, "cluster.links.nvlink_GBps");
  c.non_negative(cl.links.pcie_GBps, "cluster.links.pcie_GBps");
  c.non_negative(cl.links.ib_GBps, "cluster.links.ib_GBps");
  c.non_negative(cl.links.nvlink_latency_us, "cluster.links.nvlink_latency_us");
  c.non_negative(cl.links.pcie_latency_us, "cluster.links.pcie_latency_us");
  c.non_negative(cl.links.ib_latency_us, "cluster.links.ib_latency_us");
  c.that(std::isfinite(cl.links.ib_oversubscription) && cl.links.ib_oversubscription >= 1,
         "cluster.links.ib_oversubscription", "must be at least 1 (1 = non-blocking fat tree)");
  c.in_range(cl.links.nodes_per_leaf, 0, kMaxNodes, "cluster.links.nodes_per_leaf");
  c.that(cl.gpus_per_node == 1 || cl.links.nvlink_GBps > 0, "cluster.links.nvlink_GBps",
         "a node with several GPUs needs an intra-node bandwidth (cluster.links.nvlink_GBps, or a "
         "cluster.profile)");
  c.that(cl.nodes == 1 || cl.links.ib_GBps > 0, "cluster.links.ib_GBps",
         "several nodes need an inter-node bandwidth per GPU (cluster.links.ib_GBps, or a cluster.profile)");
  auto fraction = [&](double v, const std::string& path) {
    c.that(std::isfinite(v) && v > 0 && v <= 1, path, "must be a fraction in (0, 1], got " + Check::num(v));
  };
  fraction(cl.efficiency.gemm, "cluster.efficiency.gemm");
  fraction(cl.efficiency.hbm, "cluster.efficiency.hbm");
  for (HbmKind k : kHbmKinds) {
    const double v = cl.efficiency.hbm_by_kind.of(k);
    const std::string path = std::string("cluster.efficiency.hbm_by_kind.") + to_string(k);
    c.that(std::isfinite(v) && v >= 0 && v <= 1, path, "must be a fraction in [0, 1] (0 = efficiency.hbm), got " + Check::num(v));
  }
  fraction(cl.efficiency.pageable_pcie_fraction, "cluster.efficiency.pageable_pcie_fraction");
  if (cl.efficiency.pageable_h2d_pcie_fraction)
    fraction(*cl.efficiency.pageable_h2d_pcie_fraction, "cluster.efficiency.pageable_h2d_pcie_fraction");
  c.that(std::isfinite(cl.efficiency.launch_us) && cl.efficiency.launch_us >= 0 && cl.efficiency.launch_us <= 1000,
         "cluster.efficiency.launch_us", "must be in [0, 1000] microseconds (0 = launches cost nothing), got " +
                                             Check::num(cl.efficiency.launch_us));
  const Bytes outside = cl.efficiency.outside_allocator_bytes.value_or(0);  // not given: the report's default
  c.that(outside >= 0 && (cl.gpu.hbm_bytes <= 0 || outside < cl.gpu.hbm_bytes),
         "cluster.efficiency.outside_allocator_bytes",
         "must be >= 0 and less than the GPU's memory (cluster.gpu.hbm_bytes), got " +
             Check::num(static_cast<double>(outside)));
  for (auto [v, key] : {std::pair{cl.efficiency.torch_misaligned_gemm.forward, "forward"},
                        {cl.efficiency.torch_misaligned_gemm.backward, "backward"}})
    c.that(std::isfinite(v) && v >= 0 && v <= 1, std::string("cluster.efficiency.torch_misaligned_gemm.") + key,
           "must be a fraction of peak in [0, 1] (0 = not measured), got " + Check::num(v));
  const auto& host = cl.efficiency.host_issue;
  for (auto [v, key] : {std::pair{host.kernel_us, "kernel_us"}, {host.gemm_us, "gemm_us"},
                        {host.collective_us, "collective_us"}, {host.memcpy_us, "memcpy_us"}, {host.event_us, "event_us"},
                        {host.link_collective_us, "link_collective_us"}})
    c.that(std::isfinite(v) && v >= 0 && v <= 1000, std::string("cluster.efficiency.host_issue.") + key,
           "must be in [0, 1000] microseconds (0 = the call costs the host nothing), got " + Check::num(v));
  for (auto [v, key] : cl.efficiency.deepspeed_host.fields())
    c.that(std::isfinite(v) && v >= 0 && v <= 1e6, std::string("cluster.efficiency.deepspeed_host.") + key,
           "must be in [0, 1e6] microseconds (0 = costs the host nothing), got " + Check::num(v));
  for (auto [v, key] : cl.efficiency.deepspeed_host.optional_fields())
    if (v)
      c.that(std::isfinite(*v) && *v >= 0 && *v <= 1e6, std::string("cluster.efficiency.deepspeed_host.") + key,
             "must be in [0, 1e6] microseconds (0 = costs the host nothing; absent = stage3_forward_module_us), got " +
                 Check::num(*v));
  for (auto [v, key] : cl.efficiency.deepspeed_host.host_speed_fields())
    if (v) {
      const bool exponent = std::string_view(key) == "loop_speed_exponent";
      c.that(std::isfinite(*v) && (exponent ? *v >= 0 && *v <= 4 : *v > 0 && *v <= 1e6),
             std::string("cluster.efficiency.deepspeed_host.") + key,
             exponent ? "must be in [0, 4] (how DeepSpeed's Python scales with the reference loop), got " + Check::num(*v)
                      : "must be in (0, 1e6] microseconds (the reference loop's time), got " + Check::num(*v));
    }
  for (const auto& [block, name, zero] :
       {std::tuple{&cl.efficiency.beside_compute, "beside_compute", "a fraction in [0, 1] (0 = not measured: the kernel's alone rate)"},
        {&cl.efficiency.compute_beside, "compute_beside",
         "a fraction in [0, 1] (0 = not measured: the compute stream's alone rate)"},
        {&cl.efficiency.beside_compute_wait, "beside_compute_wait",
         "a fraction in [0, 1] of the running GEMM's time (0 = no wait)"}})
    for (auto [v, key] : block->by_class())
      c.that(std::isfinite(v) && v >= 0 && v <= 1, std::string("cluster.efficiency.") + name + "." + key,
             std::string("must be ") + zero + ", got " + Check::num(v));
  const auto& one = cl.efficiency.one_rank_collective;
  for (auto [line, prefix] : {std::pair{EfficiencySpec::OneRankLine{one.latency_us, one.GBps},
                                        std::string("cluster.efficiency.one_rank_collective.")},
                              {one.all_gather, std::string("cluster.efficiency.one_rank_collective.all_gather.")},
                              {one.reduce_scatter, std::string("cluster.efficiency.one_rank_collective.reduce_scatter.")},
                              {one.all_reduce, std::string("cluster.efficiency.one_rank_collective.all_reduce.")}}) {
    c.that(std::isfinite(line.latency_us) && line.latency_us >= 0 && line.latency_us <= 100000, prefix + "latency_us",
           "must be in [0, 100000] microseconds, got " + Check::num(line.latency_us));
    c.that(std::isfinite(line.GBps) && line.GBps >= 0, prefix + "GBps",
           "must be >= 0 (0 = not measured), got " + Check::num(line.GBps));
  }
  for (auto [v, path] : {std::pair{cl.efficiency.flash_attention.forward, "cluster.efficiency.flash_attention.forward"},
                         {cl.efficiency.flash_attention.backward, "cluster.efficiency.flash_attention.backward"}})
    c.that(std::isfinite(v) && v >= 0 && v <= 1, path,
           "must be a fraction in [0, 1] (0 = the unit's GEMM efficiency), got " + Check::num(v));
  c.positive(cl.efficiency.cpu_adam_params_per_s_per_core, "cluster.efficiency.cpu_adam_params_per_s_per_core");
  c.that(std::isfinite(cl.efficiency.cpu_adam_node_params_per_s) && cl.efficiency.cpu_adam_node_params_per_s >= 0,
         "cluster.efficiency.cpu_adam_node_params_per_s",
         "must be >= 0 params/s (0 = no ceiling), got " + Check::num(cl.efficiency.cpu_adam_node_params_per_s));
  for (auto [g, block] : {std::pair{&cl.efficiency.gemm_model, "cluster.efficiency.gemm_model"},
                          {&cl.efficiency.gemm_model_fp32, "cluster.efficiency.gemm_model_fp32"}}) {
    const std::string b = block;
    c.that(std::isfinite(g->max_efficiency) && g->max_efficiency >= 0 && g->max_efficiency <= 1, b + ".max_efficiency",
           "must be a fraction in [0, 1] (0 = no model), got " + Check::num(g->max_efficiency));
    c.that(std::isfinite(g->launch_us) && g->launch_us >= 0, b + ".launch_us", "must be >= 0, got " + Check::num(g->launch_us));
    c.that(std::isfinite(g->io_GBps) && g->io_GBps >= 0, b + ".io_GBps", "must be >= 0 (0 = no term), got " + Check::num(g->io_GBps));
    c.that(std::isfinite(g->io_overlap) && g->io_overlap >= 0 && g->io_overlap <= 1, b + ".io_overlap",
           "must be a fraction in [0, 1] (0 = FLOP and traffic times add), got " + Check::num(g->io_overlap));
    c.that(g->tile_m >= 1 && g->tile_m <= 4096, b + ".tile_m", "must be in [1, 4096]");
    c.that(g->tile_n >= 1 && g->tile_n <= 4096, b + ".tile_n", "must be in [1, 4096]");
    c.that(g->sms >= 1 && g->sms <= 100000, b + ".sms", "must be in [1, 100000]");
    c.that(g->split_k_depth >= 0 && g->split_k_depth <= 1000000, b + ".split_k_depth", "must be in [0, 1000000]");
  }
}

void validate_training(const TrainingSpec& t, const ClusterSpec& cl, const LocateKey& locate) {
  Check c(locate);
  c.in_range<std::int64_t>(t.micro_batch, 1, kMaxMicroBatch, "training.micro_batch");
  c.in_range<std::int64_t>(t.grad_accum, 1, kMaxGradAccum, "training.grad_accum");
  c.in_range<std::int64_t>(t.seq_len, 1, kMaxSeqLen, "training.seq_len");
  c.that(t.micro_batch * t.seq_len <= kMaxTokensPerMicroBatch, "training.seq_len",
         "micro_batch x seq_len = " + std::to_string(t.micro_batch * t.seq_len) + " tokens exceeds the limit of " +
             std::to_string(kMaxTokensPerMicroBatch));
  c.that(t.precision != Precision::fp32 || cl.gpu.peak_fp32_tflops > 0, "cluster.gpu.peak_fp32_tflops",
         "fp32 training needs the GPU's fp32 peak (cluster.gpu.peak_fp32_tflops)");
}

void validate_scenario(const Scenario& s, const LocateKey& locate) {
  validate_model(s.model, locate);
  validate_cluster(s.cluster, locate);
  validate_training(s.training, s.cluster, locate);
  Check c(locate);
  const ZeroConfig& z = s.zero;
  c.in_range(z.stage, 0, 3, kZ + "stage");
  c.positive(static_cast<double>(z.reduce_bucket_size), kZ + "reduce_bucket_size");
  c.positive(static_cast<double>(z.allgather_bucket_size), kZ + "allgather_bucket_size");
  c.positive(static_cast<double>(z.sub_group_size), kZ + "sub_group_size");
  // DeepSpeed accepts 0 for these (0 prefetch = no prefetch; 0 persistence = partition everything).
  c.non_negative(static_cast<double>(z.stage3_prefetch_bucket_size), kZ + "stage3_prefetch_bucket_size");
  c.non_negative(static_cast<double>(z.stage3_max_live_parameters), kZ + "stage3_max_live_parameters");
  c.non_negative(static_cast<double>(z.stage3_max_reuse_distance), kZ + "stage3_max_reuse_distance");
  c.non_negative(static_cast<double>(z.stage3_param_persistence_threshold),
                 kZ + "stage3_param_persistence_threshold");

  const bool stage3 = z.stage == 3;
  c.in_range(z.zero_hpz_partition_size, 1, s.cluster.gpus_per_node, kZ + "zero_hpz_partition_size");
  c.that(s.cluster.gpus_per_node % z.zero_hpz_partition_size == 0, kZ + "zero_hpz_partition_size",
         "hpZ partition size " + std::to_string(z.zero_hpz_partition_size) + " must divide gpus_per_node (" +
             std::to_string(s.cluster.gpus_per_node) + ")");
  c.that(stage3 || z.zero_hpz_partition_size == 1, kZ + "zero_hpz_partition_size",
         "hpZ (zero_hpz_partition_size > 1) needs ZeRO stage 3");
  c.that(stage3 || !z.zero_quantized_weights, kZ + "zero_quantized_weights", "qwZ needs ZeRO stage 3");
  c.that(stage3 || !z.zero_quantized_gradients, kZ + "zero_quantized_gradients", "qgZ needs ZeRO stage 3");
  c.that(!z.zeropp_loco_param.enabled || z.zero_quantized_gradients, kZ + "zeropp_loco_param",
         "LoCo (zeropp_loco_param) needs zero_quantized_gradients: true");
  c.that(std::isfinite(z.zeropp_loco_param.err_beta) && z.zeropp_loco_param.err_beta >= 0 &&
             z.zeropp_loco_param.err_beta <= 1,
         kZ + "zeropp_loco_param.err_beta", "must be in [0, 1]");
  c.in_range(z.zeropp_loco_param.reset_T, 1, 1 << 30, kZ + "zeropp_loco_param.reset_T");
  c.that(stage3 || !z.stage3_allgather_sequential, kZ + "stage3_allgather_sequential",
         "sequential all-gather is a ZeRO stage 3 option");
  c.that(stage3 || !z.stage3_use_all_reduce_for_fetch_params, kZ + "stage3_use_all_reduce_for_fetch_params",
         "fetching parameters by all-reduce is a ZeRO stage 3 option");

  const auto& oo = z.offload_optimizer;
  const auto& op = z.offload_param;
  c.that(oo.device == OffloadDevice::none || z.stage >= 1, kZ + "offload_optimizer.device",
         "optimizer offload needs ZeRO stage 1, 2 or 3");
  c.that(op.device == OffloadDevice::none || stage3, kZ + "offload_param.device",
         "parameter offload needs ZeRO stage 3");
  // DeepSpeed allocates the hpZ secondary partition on the parameters' offload device (partition_parameters.py
  // _partition_param_sec: torch.empty(..., device=self.remote_device)); torch has no device "nvme".
  c.that(op.device != OffloadDevice::nvme || z.zero_hpz_partition_size == 1, kZ + "zero_hpz_partition_size",
         "hpZ (zero_hpz_partition_size > 1) with offload_param.device nvme fails in DeepSpeed: it allocates the "
         "secondary partition on the offload device (_partition_param_sec), and torch has no device 'nvme'");
  c.that(std::isfinite(oo.ratio) && oo.ratio >= 0 && oo.ratio <= 1, kZ + "offload_optimizer.ratio",
         "must be in [0, 1]");
  c.that(oo.ratio >= 1 || stage3, kZ + "offload_optimizer.ratio",
         "partial optimizer offload (ratio < 1) needs ZeRO stage 3");
  c.in_range(oo.buffer_count, 0, 1 << 20, kZ + "offload_optimizer.buffer_count");
  c.in_range(op.buffer_count, 0, 1 << 20, kZ + "offload_param.buffer_count");
  c.non_negative(static_cast<double>(op.buffer_size), kZ + "offload_param.buffer_size");
  c.non_negative(static_cast<double>(op.max_in_cpu), kZ + "offload_param.max_in_cpu");
  const bool to_cpu = oo.device != OffloadDevice::none || op.device != OffloadDevice::none;
  const bool to_nvme = oo.device == OffloadDevice::nvme || op.device == OffloadDevice::nvme;
  c.that(!to_cpu || s.cluster.host.memory_bytes > 0, "cluster.host.memory_bytes",
         "offloading needs the host's memory size (cluster.host.memory_bytes, or a cluster.profile)");
  c.that(!to_cpu || s.cluster.links.pcie_GBps > 0, "cluster.links.pcie_GBps",
         "offloading needs the GPU-host bandwidth (cluster.links.pcie_GBps, or a cluster.profile)");
  c.that(!to_nvme || (s.cluster.nvme.bytes > 0 && s.cluster.nvme.read_GBps > 0 && s.cluster.nvme.write_GBps > 0),
         "cluster.nvme", "NVMe offload needs cluster.nvme {bytes, read_GBps, write_GBps} (or a cluster.profile)");
}

void validate_scenario(const Scenario& s) {
  validate_scenario(s, [&](const std::string& path) { return SourceLocation{s.source_file, 0, 0, path}; });
}

}  // namespace zsim
