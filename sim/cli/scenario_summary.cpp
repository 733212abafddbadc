#include "sim/cli/scenario_summary.hpp"

#include <fmt/format.h>

#include "sim/plan/model_shapes.hpp"
#include "sim/scenario/scenario_json.hpp"

namespace zsim {
namespace {

std::string gib(Bytes b) {
  const double g = static_cast<double>(b) / kGiB;
  return g >= 1024 ? fmt::format("{:.1f} TiB", g / 1024) : fmt::format("{:.1f} GiB", g);
}

std::string elements(Elements n) {
  if (n >= 1'000'000) return fmt::format("{:.1f}M", n / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f}K", n / 1e3);
  return std::to_string(n);
}

std::string offload(const char* what, OffloadDevice d, bool pinned) {
  if (d == OffloadDevice::none) return "";
  return fmt::format("{} -> {}{}", what, to_string(d), pinned ? " (pinned)" : "");
}

}  // namespace

std::string scenario_summary(const Scenario& s) {
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ClusterSpec& c = s.cluster;
  const ZeroConfig& z = s.zero;
  std::string out;
  out += fmt::format("scenario   {}\n", s.source_file.empty() ? "(built in code)" : s.source_file);
  out += fmt::format("model      {}: {} layers, hidden {}, ffn {} ({}), {} heads / {} kv, vocab {}{}{}, {} attention{}\n",
                     m.name, m.layers, m.hidden, m.ffn_hidden, to_string(m.mlp), m.heads, m.kv_heads, m.vocab,
                     m.tie_word_embeddings ? ", tied embeddings" : "",
                     m.max_position_embeddings ? fmt::format(", {} learned positions", m.max_position_embeddings) : "",
                     to_string(m.attention),
                     m.attention_dropout > 0 || m.hidden_dropout > 0
                         ? fmt::format(", dropout {:g} / {:g}", m.attention_dropout, m.hidden_dropout)
                         : "");
  if (m.arch.experts > 0) {
    const ModelShapes shapes = model_shapes(m);
    out += fmt::format("experts    {} a layer of ffn {}, {} a token: {:.2f}B parameters, {:.2f}B active a token{}\n",
                       m.arch.experts, m.arch.expert_ffn, m.arch.experts_per_token, shapes.total_params() / 1e9,
                       shapes.active_params(m.arch.experts, m.arch.experts_per_token) / 1e9,
                       moe_block_is_leaf(m) ? "; " + m.z3_leaf_modules + " a stage-3 leaf module" : "");
  }
  out += fmt::format("training   micro batch {} x grad accum {} x {} GPUs = {} sequences of {} tokens, {}, "
                     "activation checkpointing {}\n",
                     t.micro_batch, t.grad_accum, s.world_size(),
                     t.micro_batch * t.grad_accum * s.world_size(), t.seq_len, to_string(t.precision),
                     to_string(t.activation_checkpointing));
  out += fmt::format("cluster    {} node(s) x {} {} ({} HBM, {:g} GB/s, {:g} TFLOPS){}\n", c.nodes, c.gpus_per_node,
                     c.gpu.name, gib(c.gpu.hbm_bytes), c.gpu.hbm_GBps, c.gpu.peak_tflops,
                     c.profile.empty() ? "" : ", profile " + c.profile);
  out += fmt::format("links      per GPU: NVLink {:g} GB/s, PCIe {:g} GB/s, IB {:g} GB/s; host {} per node{}\n",
                     c.links.nvlink_GBps, c.links.pcie_GBps, c.links.ib_GBps, gib(c.host.memory_bytes),
                     c.nvme.bytes ? ", NVMe " + gib(c.nvme.bytes) : "");
  out += fmt::format("zero       stage {}{}, reduce bucket {}, all-gather bucket {}", z.stage,
                     z.overlap_comm ? ", overlap_comm" : "", elements(z.reduce_bucket_size),
                     elements(z.allgather_bucket_size));
  if (z.stage == 3)
    out += fmt::format(", prefetch {}, max live {}, persistence threshold {}{}", elements(z.stage3_prefetch_bucket_size),
                       elements(z.stage3_max_live_parameters), elements(z.stage3_param_persistence_threshold),
                       z.stage3_allgather_sequential ? ", sequential all-gather" : "");
  if (z.stage == 3 && z.stage3_use_all_reduce_for_fetch_params) out += ", fetch by all-reduce";
  out += " (elements)\n";
  std::string zpp;
  if (z.zero_quantized_weights) zpp += " qwZ";
  if (z.zero_hpz_partition_size > 1) zpp += fmt::format(" hpZ({})", z.zero_hpz_partition_size);
  if (z.zero_quantized_gradients) zpp += " qgZ";
  if (z.zeropp_loco_param.enabled) zpp += fmt::format(" LoCo(beta {:g}, reset {})", z.zeropp_loco_param.err_beta,
                                                      z.zeropp_loco_param.reset_T);
  if (!zpp.empty()) out += "zero++    " + zpp + "\n";
  std::string off = offload("optimizer", z.offload_optimizer.device, z.offload_optimizer.pin_memory);
  std::string offp = offload("params", z.offload_param.device, z.offload_param.pin_memory);
  if (!off.empty() || !offp.empty())
    out += "offload    " + off + (off.empty() || offp.empty() ? "" : ", ") + offp + "\n";
  return out;
}

}  // namespace zsim
