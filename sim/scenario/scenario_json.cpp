#include "sim/scenario/scenario_json.hpp"

namespace zsim {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp32: return "fp32";
  }
  return "?";
}
const char* to_string(Checkpointing c) { return c == Checkpointing::full ? "full" : "none"; }
const char* to_string(MlpKind m) { return m == MlpKind::gated ? "gated" : "plain"; }
const char* to_string(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::none: return "none";
    case OffloadDevice::cpu: return "cpu";
    case OffloadDevice::nvme: return "nvme";
  }
  return "?";
}

nlohmann::ordered_json scenario_to_json(const Scenario& s) {
  using J = nlohmann::ordered_json;
  const ModelSpec& m = s.model;
  const TrainingSpec& t = s.training;
  const ClusterSpec& c = s.cluster;
  const ZeroConfig& z = s.zero;
  J j;
  j["source_file"] = s.source_file;
  j["runtime"] = to_string(s.runtime);
  j["model"] = {{"name", m.name},       {"layers", m.layers},     {"hidden", m.hidden},
                {"ffn_hidden", m.ffn_hidden}, {"heads", m.heads}, {"kv_heads", m.kv_heads},
                {"vocab", m.vocab},     {"max_position_embeddings", m.max_position_embeddings},
                {"tie_word_embeddings", m.tie_word_embeddings}, {"mlp", to_string(m.mlp)}, {"bias", m.bias},
                {"attention", to_string(m.attention)}, {"attention_dropout", m.attention_dropout},
                {"hidden_dropout", m.hidden_dropout}};
  j["training"] = {{"micro_batch", t.micro_batch}, {"grad_accum", t.grad_accum}, {"seq_len", t.seq_len},
                   {"precision", to_string(t.precision)},
                   {"communication_data_type",
                    t.communication_data_type ? J(to_string(*t.communication_data_type)) : J(nullptr)},
                   {"activation_checkpointing", to_string(t.activation_checkpointing)}};
  j["cluster"] = {
      {"profile", c.profile},
      {"nodes", c.nodes},
      {"gpus_per_node", c.gpus_per_node},
      {"gpu", {{"name", c.gpu.name}, {"hbm_bytes", c.gpu.hbm_bytes}, {"hbm_GBps", c.gpu.hbm_GBps},
               {"peak_tflops", c.gpu.peak_tflops}, {"peak_fp32_tflops", c.gpu.peak_fp32_tflops}}},
      {"host", {{"memory_bytes", c.host.memory_bytes}, {"cores", c.host.cores}}},
      {"nvme", {{"bytes", c.nvme.bytes}, {"read_GBps", c.nvme.read_GBps}, {"write_GBps", c.nvme.write_GBps},
                {"read_latency_us", c.nvme.read_latency_us}, {"write_latency_us", c.nvme.write_latency_us},
                {"one_request_read_latency_us", c.nvme.one_request_read_latency_us},
                {"one_request_read_GBps", c.nvme.one_request_read_GBps},
                {"one_request_write_latency_us", c.nvme.one_request_write_latency_us},
                {"one_request_write_GBps", c.nvme.one_request_write_GBps}}},
      {"links", {{"nvlink_GBps", c.links.nvlink_GBps}, {"pcie_GBps", c.links.pcie_GBps},
                 {"ib_GBps", c.links.ib_GBps}, {"nvlink_latency_us", c.links.nvlink_latency_us},
                 {"pcie_latency_us", c.links.pcie_latency_us}, {"ib_latency_us", c.links.ib_latency_us},
                 {"ib_oversubscription", c.links.ib_oversubscription}, {"nodes_per_leaf", c.links.nodes_per_leaf}}},
      {"efficiency", {{"gemm", c.efficiency.gemm}, {"hbm", c.efficiency.hbm},
                      {"cpu_adam_params_per_s_per_core", c.efficiency.cpu_adam_params_per_s_per_core},
                      {"pageable_pcie_fraction", c.efficiency.pageable_pcie_fraction}}}};
  if (c.efficiency.pageable_h2d_pcie_fraction)
    j["cluster"]["efficiency"]["pageable_h2d_pcie_fraction"] = *c.efficiency.pageable_h2d_pcie_fraction;
  for (HbmKind k : kHbmKinds)  // calibrated profiles only: data-sheet reports keep their fields
    if (c.efficiency.hbm_by_kind.of(k) > 0) j["cluster"]["efficiency"]["hbm_by_kind"][to_string(k)] = c.efficiency.hbm_by_kind.of(k);
  if (c.efficiency.cpu_adam_node_params_per_s > 0)  // calibrated profiles only: data-sheet reports keep their fields
    j["cluster"]["efficiency"]["cpu_adam_node_params_per_s"] = c.efficiency.cpu_adam_node_params_per_s;
  if (c.efficiency.launch_us > 0) j["cluster"]["efficiency"]["launch_us"] = c.efficiency.launch_us;
  if (c.efficiency.outside_allocator_bytes)  // as given (absent: the report's default under runtime deepspeed)
    j["cluster"]["efficiency"]["outside_allocator_bytes"] = *c.efficiency.outside_allocator_bytes;
  for (auto [v, key] : c.fitted_under.fields())
    if (!v.empty()) j["cluster"]["fitted_under"][key] = v;
  if (c.efficiency.torch_misaligned_gemm.present())
    j["cluster"]["efficiency"]["torch_misaligned_gemm"] = {{"forward", c.efficiency.torch_misaligned_gemm.forward},
                                                           {"backward", c.efficiency.torch_misaligned_gemm.backward}};
  const auto& host = c.efficiency.host_issue;
  if (host.present())
    j["cluster"]["efficiency"]["host_issue"] = {{"kernel_us", host.kernel_us}, {"gemm_us", host.gemm_us},
                                                {"collective_us", host.collective_us}, {"memcpy_us", host.memcpy_us},
                                                {"event_us", host.event_us}};
  if (host.present() && host.link_collective_us > 0)
    j["cluster"]["efficiency"]["host_issue"]["link_collective_us"] = host.link_collective_us;
  if (c.efficiency.deepspeed_host.present()) {
    for (auto [v, key] : c.efficiency.deepspeed_host.fields()) j["cluster"]["efficiency"]["deepspeed_host"][key] = v;
    for (auto [v, key] : c.efficiency.deepspeed_host.optional_fields())
      if (v) j["cluster"]["efficiency"]["deepspeed_host"][key] = *v;  // as given (absent: stage3_forward_module_us)
    for (auto [v, key] : c.efficiency.deepspeed_host.host_speed_fields())
      if (v) j["cluster"]["efficiency"]["deepspeed_host"][key] = *v;
  }
  for (auto [block, name] : {std::pair{&c.efficiency.beside_compute, "beside_compute"},
                             {&c.efficiency.compute_beside, "compute_beside"},
                             {&c.efficiency.beside_compute_wait, "beside_compute_wait"}})
    for (auto [v, key] : block->by_class())
      if (v > 0) j["cluster"]["efficiency"][name][key] = v;
  if (c.efficiency.one_rank_collective.GBps > 0)
    j["cluster"]["efficiency"]["one_rank_collective"] = {{"latency_us", c.efficiency.one_rank_collective.latency_us},
                                                         {"GBps", c.efficiency.one_rank_collective.GBps}};
  for (auto [line, kind] : {std::pair{c.efficiency.one_rank_collective.all_gather, "all_gather"},
                            {c.efficiency.one_rank_collective.reduce_scatter, "reduce_scatter"},
                            {c.efficiency.one_rank_collective.all_reduce, "all_reduce"}})
    if (line.GBps > 0)
      j["cluster"]["efficiency"]["one_rank_collective"][kind] = {{"latency_us", line.latency_us}, {"GBps", line.GBps}};
  for (const auto& [kind, points] : c.efficiency.nvlink_busbw)
    for (const auto& [bytes, GBps] : points)
      for (const auto& [label, at] : kNvlinkBusbwSizes)
        if (at == bytes) j["cluster"]["efficiency"]["nvlink_busbw"][kind][label] = GBps;
  for (auto [points, key] : {std::pair{&c.nvme.read_GBps_by_size, "read_GBps_by_size"},
                             {&c.nvme.write_GBps_by_size, "write_GBps_by_size"}})
    for (const auto& [bytes, GBps] : *points)
      for (const auto& [label, at] : kNvlinkBusbwSizes)
        if (at == bytes) j["cluster"]["nvme"][key][label] = GBps;
  for (const auto& [shape, kinds] : c.efficiency.group_busbw)
    for (const auto& [kind, points] : kinds)
      for (const auto& [bytes, GBps] : points)
        for (const auto& [label, at] : kNvlinkBusbwSizes)
          if (at == bytes) j["cluster"]["efficiency"]["group_busbw"][shape][kind][label] = GBps;
  for (const auto& [ranks, points] : c.efficiency.cpu_adam_measured)
    for (const auto& [threads, rate] : points)
      j["cluster"]["efficiency"]["cpu_adam_measured"]["ranks_" + std::to_string(ranks)]
       ["threads_" + std::to_string(static_cast<int>(threads))] = rate;
  // Calibrated profiles only (data-sheet reports keep their fields): the flash kernel's efficiency per direction.
  if (c.efficiency.flash_attention.forward > 0)
    j["cluster"]["efficiency"]["flash_attention"]["forward"] = c.efficiency.flash_attention.forward;
  if (c.efficiency.flash_attention.backward > 0)
    j["cluster"]["efficiency"]["flash_attention"]["backward"] = c.efficiency.flash_attention.backward;
  for (auto [g, key] : {std::pair{&c.efficiency.gemm_model, "gemm_model"}, {&c.efficiency.gemm_model_fp32, "gemm_model_fp32"}})
    if (g->present()) {  // calibrated profiles only: data-sheet reports keep their fields
      j["cluster"]["efficiency"][key] = {{"launch_us", g->launch_us}, {"max_efficiency", g->max_efficiency},
                                         {"io_GBps", g->io_GBps}, {"tile_m", g->tile_m}, {"tile_n", g->tile_n},
                                         {"sms", g->sms}, {"split_k_depth", g->split_k_depth}};
      // Written where set (profiles fitted before these keys keep their reports).
      if (g->io_overlap > 0) j["cluster"]["efficiency"][key]["io_overlap"] = g->io_overlap;
      if (g->attention_shapes) j["cluster"]["efficiency"][key]["attention_shapes"] = true;
    }
  J zj = {{"stage", z.stage},
          {"overlap_comm", z.overlap_comm},
          {"contiguous_gradients", z.contiguous_gradients},
          {"reduce_bucket_size", z.reduce_bucket_size},
          {"allgather_bucket_size", z.allgather_bucket_size},
          {"reduce_scatter", z.reduce_scatter},
          {"use_multi_rank_bucket_allreduce", z.use_multi_rank_bucket_allreduce},
          {"round_robin_gradients", z.round_robin_gradients},
          {"stage3_prefetch_bucket_size", z.stage3_prefetch_bucket_size},
          {"stage3_max_live_parameters", z.stage3_max_live_parameters},
          {"stage3_max_reuse_distance", z.stage3_max_reuse_distance},
          {"stage3_param_persistence_threshold", z.stage3_param_persistence_threshold},
          {"sub_group_size", z.sub_group_size},
          {"offload_optimizer",
           {{"device", to_string(z.offload_optimizer.device)}, {"pin_memory", z.offload_optimizer.pin_memory},
            {"nvme_path", z.offload_optimizer.nvme_path}, {"buffer_count", z.offload_optimizer.buffer_count},
            {"ratio", z.offload_optimizer.ratio}}},
          {"offload_param",
           {{"device", to_string(z.offload_param.device)}, {"pin_memory", z.offload_param.pin_memory},
            {"nvme_path", z.offload_param.nvme_path}, {"buffer_count", z.offload_param.buffer_count},
            {"buffer_size", z.offload_param.buffer_size}, {"max_in_cpu", z.offload_param.max_in_cpu}}},
          {"zero_hpz_partition_size", z.zero_hpz_partition_size},
          {"zero_quantized_weights", z.zero_quantized_weights},
          {"zero_quantized_gradients", z.zero_quantized_gradients},
          {"stage3_allgather_sequential", z.stage3_allgather_sequential},
          {"stage3_use_all_reduce_for_fetch_params", z.stage3_use_all_reduce_for_fetch_params}};
  if (z.zeropp_loco_param.enabled)
    zj["zeropp_loco_param"] = {{"err_beta", z.zeropp_loco_param.err_beta}, {"reset_T", z.zeropp_loco_param.reset_T}};
  else
    zj["zeropp_loco_param"] = nullptr;
  j["zero_optimization"] = zj;
  j["warnings"] = s.warnings;
  return j;
}

}  // namespace zsim
