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
  // What lies outside it: the profile's or scenario's figure, else zsim's default for a DeepSpeed process (never a
  // silent 0: the report says it is the default).
  const std::optional<Bytes>& given = scenario.cluster.efficiency.outside_allocator_bytes;
  const Bytes outside = given.value_or(kDeepSpeedOutsideAllocatorDefaultBytes);
  const Bytes allocator_bytes = m.gpu.capacity > outside ? m.gpu.capacity - outside : 1;
  m.gpu.reserved = walk_reserved(schedule, m.gpu.capacity > 0 ? allocator_bytes : 0).peak_reserved;
  m.gpu.outside_allocator = outside;
  m.gpu.outside_allocator_default = !given.has_value();
  return m;
}

std::string fitted_under_text(const FittedUnder& f) {
  std::string stack;
  for (const auto& [v, name] : {std::pair{f.deepspeed, "DeepSpeed"}, {f.torch, "torch"}, {f.transformers, "transformers"}})
    if (!v.empty()) stack += (stack.empty() ? "" : ", ") + std::string(name) + " " + v;
  std::string out = stack;
  for (const auto& part : {f.python.empty() ? std::string() : "python " + f.python,
                           f.cuda.empty() ? std::string() : "CUDA " + f.cuda, f.gpu, f.date})
    if (!part.empty()) out += (out.empty() ? "" : "; ") + part;
  return out;
}

std::optional<DeepSpeedFigures> deepspeed_figures_of(const Scenario& scenario) {
  if (scenario.runtime != RuntimeKind::deepspeed) return std::nullopt;
  const ClusterSpec& c = scenario.cluster;
  const EfficiencySpec& e = c.efficiency;
  DeepSpeedFigures f;
  f.profile = c.profile;
  f.fitted_under = c.fitted_under;
  constexpr const char* kCalibrate =
      "validate/deepspeed/calibrate_node.py on your machine prices it (docs/deepspeed-time.md, \"Predicting your own "
      "machine\")";
  constexpr const char* kFloor =
      "so the step is a floor: DeepSpeed runs transformers' Python and its own hooks around every op, which on one H200 "
      "bound the steps of models up to a few billion parameters (the GPU alone came to 0.10-0.73x the measured step, "
      "docs/deepspeed-time.md)";
  if (e.deepspeed_host.present()) {
    f.host = "deepspeed_host";
    f.host_note = c.fitted_under.present()
                      ? "efficiency.deepspeed_host: DeepSpeed's Python per op, fitted under the stack named above (on the "
                        "machine it was fitted on, docs/deepspeed-time.md \"Validation\" says how far it held)"
                      : "efficiency.deepspeed_host: DeepSpeed's Python per op, fitted under a stack the profile does "
                        "not record (cluster.fitted_under): the figures hold for the DeepSpeed, torch and transformers "
                        "they were fitted under";
  } else if (e.host_issue.present()) {
    f.host = "host_issue";
    f.host_note = std::string("zrun's per-call issue cost (efficiency.host_issue), not DeepSpeed's Python: no "
                              "cluster.efficiency.deepspeed_host figures, ") + kFloor + "; " + kCalibrate;
  } else {
    f.host = "none";
    f.host_note = std::string("not priced: no cluster.efficiency.deepspeed_host figures, ") + kFloor + "; " + kCalibrate;
  }
  bool per_kind = false;
  for (HbmKind k : kHbmKinds) per_kind |= e.hbm_by_kind.of(k) > 0;
  if (per_kind) {
    f.gpu = "measured";
    f.gpu_note = fmt::format("measured: efficiency.gemm {:.3g}, efficiency.hbm_by_kind per kind of kernel{}", e.gemm,
                             e.torch_misaligned_gemm.present() ? ", torch_misaligned_gemm" : "");
  } else {
    f.gpu = "data_sheet";
    f.gpu_note = fmt::format(
        "the data sheet's: {} at {:.4g} TFLOPS and {:.4g} GB/s, efficiency.gemm {:.3g} and efficiency.hbm {:.3g} (torch's "
        "kernels not measured: on one H200 these put DeepSpeed's GPU-bound steps 5-22% under the measurement, the "
        "measured figures within 7%)",
        c.gpu.name, c.gpu.peak_tflops, c.gpu.hbm_GBps, e.gemm, e.hbm);
  }
  f.outside_allocator = e.outside_allocator_bytes.value_or(kDeepSpeedOutsideAllocatorDefaultBytes);
  f.outside_allocator_default = !e.outside_allocator_bytes.has_value();
  f.outside_allocator_note =
      f.outside_allocator_default
          ? fmt::format("{} a process: zsim's default (no profile gives cluster.efficiency.outside_allocator_bytes): the "
                        "largest measured on one H200, 1.28-1.30 GiB at stages 0-2 and 1.66-1.69 GiB at stage 3 (CUDA "
                        "context, cuBLAS, NCCL); {}",
                        human_bytes(f.outside_allocator),
                        "validate/deepspeed/calibrate_node.py measures your machine's")
          : fmt::format("{} a process: cluster.efficiency.outside_allocator_bytes as given", human_bytes(f.outside_allocator));
  return f;
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
  r.deepspeed_figures = deepspeed_figures_of(scenario);
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
