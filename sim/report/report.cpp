#include "sim/report/report.hpp"

#include <fmt/format.h>

#include "sim/report/human_units.hpp"
#include "sim/report/reserved_walk.hpp"

namespace zsim {

namespace {

const char* offload_name(OffloadDevice d) {
  return d == OffloadDevice::cpu ? "cpu" : d == OffloadDevice::nvme ? "nvme" : "none";
}

std::vector<std::string> features_of(const ZeroConfig& z) {
  std::vector<std::string> f;
  if (z.zero_quantized_weights) f.push_back("qwZ");
  if (z.zero_hpz_partition_size > 1) f.push_back(fmt::format("hpZ={}", z.zero_hpz_partition_size));
  if (z.zero_quantized_gradients) f.push_back("qgZ");
  if (z.zeropp_loco_param.enabled) f.push_back("LoCo");
  if (z.stage3_allgather_sequential) f.push_back("sequential_allgather");
  if (z.stage3_use_all_reduce_for_fetch_params) f.push_back("all_reduce_fetch");
  if (z.offload_optimizer.device != OffloadDevice::none)
    f.push_back(fmt::format("offload_optimizer={}", offload_name(z.offload_optimizer.device)));
  if (z.offload_param.device != OffloadDevice::none)
    f.push_back(fmt::format("offload_param={}", offload_name(z.offload_param.device)));
  return f;
}

void warn_about_capacity(const TierMemory& t, const char* key, std::vector<std::string>& warnings) {
  if (t.capacity == 0 && t.peak > 0)
    warnings.push_back(fmt::format("the schedule places {} ({} bytes){} on {} but {} is 0 (not given)",
                                   human_bytes(t.peak), t.peak, t.tier == Tier::gpu ? "" : " per node",
                                   to_string(t.tier), key));
}

}  // namespace

MemoryWalk walk_memory_of(const Scenario& scenario, const Schedule& schedule) {
  MemoryWalk m = walk_memory(schedule, capacity_of(scenario));
  if (scenario.runtime != RuntimeKind::deepspeed || m.gpu.peak == 0) return m;  // zrun allocates from its own arena
  // PyTorch's caching allocator gets what the driver can give: the GPU's memory less what lies outside it.
  const Bytes outside = scenario.cluster.efficiency.outside_allocator_bytes;
  const Bytes allocator_bytes = m.gpu.capacity > outside ? m.gpu.capacity - outside : 1;
  m.gpu.reserved = walk_reserved(schedule, m.gpu.capacity > 0 ? allocator_bytes : 0).peak_reserved;
  m.gpu.outside_allocator = outside;
  return m;
}

Report make_report(const Scenario& scenario, const Schedule& schedule) {
  check_schedule(schedule);
  Report r;
  const ScheduleMeta& m = schedule.meta;
  r.setup = {scenario.source_file,
             scenario.model.name,
             m.params,
             m.nodes,
             m.gpus_per_node,
             m.world_size,
             scenario.cluster.gpu.name,
             scenario.zero.stage,
             features_of(scenario.zero)};
  r.memory = walk_memory_of(scenario, schedule);
  r.comm = walk_comm(schedule);
  r.fits = r.memory.fits();
  r.warnings = scenario.warnings;
  r.scenario_warnings = scenario.warnings.size();
  if (m.nodes != scenario.cluster.nodes || m.gpus_per_node != scenario.cluster.gpus_per_node)
    r.warnings.push_back(fmt::format("the schedule is for {} x {} GPUs but the scenario describes {} x {}", m.nodes,
                                     m.gpus_per_node, scenario.cluster.nodes, scenario.cluster.gpus_per_node));
  warn_about_capacity(r.memory.gpu, "cluster.gpu.hbm_bytes", r.warnings);
  warn_about_capacity(r.memory.cpu, "cluster.host.memory_bytes", r.warnings);
  warn_about_capacity(r.memory.nvme, "cluster.nvme.bytes", r.warnings);
  if (auto w = attention_core_pricing_warning(scenario, schedule)) r.warnings.push_back(*w);
  return r;
}

std::optional<std::string> attention_core_pricing_warning(const Scenario& scenario, const Schedule& schedule) {
  const bool fp32 = scenario.training.precision == Precision::fp32;
  const GemmModel& g = fp32 ? scenario.cluster.efficiency.gemm_model_fp32 : scenario.cluster.efficiency.gemm_model;
  bool core_calls = false;
  for (const ModelUnit& u : schedule.model.units) core_calls |= !u.forward_gemms.empty() || !u.backward_gemms.empty();
  if (!g.present() || g.attention_shapes || !core_calls) return std::nullopt;
  return fmt::format(
      "cluster.efficiency.{}.attention_shapes is false (the profile's GEMM model was fitted without eager attention's "
      "batched GEMM calls, as zrun calibrate fitted it before it measured them): the attention core's FLOPs run at "
      "its unit's GEMM efficiency and its scores' traffic as memory-bound time; run zrun calibrate again to price "
      "the core as its calls",
      fp32 ? "gemm_model_fp32" : "gemm_model");
}

}  // namespace zsim
