#include "sim/engine/timing_report_io.hpp"

#include <fmt/format.h>

namespace zsim {

nlohmann::ordered_json timing_report_json(const TimingReport& r) {
  nlohmann::ordered_json j;
  j["step_s"] = r.step_s;
  j["compute_s"] = r.compute_s;
  j["optimizer_s"] = r.optimizer_s;
  j["exposed_comm_s"] = r.exposed_comm_s;
  j["exposed_comm_by_phase"] = r.exposed_comm_by_phase;
  j["exposed_comm_by_collective"] = r.exposed_comm_by_collective;
  j["offload_s"] = r.offload_s;
  j["idle_s"] = r.idle_s;
  if (r.host_s > 0) {  // a host model (efficiency.host_issue, efficiency.deepspeed_host)
    j["host_s"] = r.host_s;
    j["host_binds"] = r.host_binds();
  }
  if (r.host_reference_loop_us > 0)
    j["host_speed"] = {{"reference_loop_us", r.host_reference_loop_us},
                       {"loop_us", r.host_loop_us > 0 ? nlohmann::ordered_json(r.host_loop_us) : nlohmann::ordered_json()},
                       {"scale", r.host_speed_scale},
                       {"autograd_loop_us", r.host_autograd_loop_us > 0 ? nlohmann::ordered_json(r.host_autograd_loop_us)
                                                                        : nlohmann::ordered_json()},
                       {"autograd_scale", r.host_autograd_speed_scale}};
  j["comm_busy_s"] = r.comm_busy_s;
  j["offload_busy_s"] = r.offload_busy_s;
  j["model_flops_per_gpu"] = r.model_flops_per_gpu;
  j["hardware_flops_per_gpu"] = r.hardware_flops_per_gpu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  j["tokens_per_s"] = r.tokens_per_s;
  j["steps_simulated"] = r.steps_simulated;
  j["critical_path_s"] = r.critical_path_s;
  nlohmann::ordered_json path = nlohmann::ordered_json::array();
  for (const CriticalContributor& c : r.critical_path)
    path.push_back({{"label", c.label}, {"seconds", c.seconds}, {"ops", c.ops}});
  j["critical_path"] = path;
  j["timed_peak_bytes"] = {{"gpu", r.timed_peak_bytes[0]}, {"cpu", r.timed_peak_bytes[1]}, {"nvme", r.timed_peak_bytes[2]}};
  j["memory_waits"] = r.memory_waits;
  j["memory_overcommits"] = r.memory_overcommits;
  return j;
}

namespace {
std::string ms(Seconds s) { return fmt::format("{:.3f} ms", s * 1e3); }
std::string pct(Seconds part, Seconds whole) { return whole > 0 ? fmt::format("{:5.1f}%", 100 * part / whole) : "    -"; }
}  // namespace

std::string format_timing(const TimingReport& r) {
  std::string o;
  o += fmt::format("time per step      {}  ({} step{} simulated{})\n", ms(r.step_s), r.steps_simulated,
                   r.steps_simulated == 1 ? "" : "s", r.steps_simulated > 1 ? ", steady state" : "");
  o += fmt::format("  compute          {}  {}\n", ms(r.compute_s), pct(r.compute_s, r.step_s));
  o += fmt::format("  optimizer        {}  {}\n", ms(r.optimizer_s), pct(r.optimizer_s, r.step_s));
  o += fmt::format("  exposed comm     {}  {}\n", ms(r.exposed_comm_s), pct(r.exposed_comm_s, r.step_s));
  for (const auto& [phase, s] : r.exposed_comm_by_phase) o += fmt::format("    {:<14} {}\n", phase, ms(s));
  for (const auto& [kind, s] : r.exposed_comm_by_collective) o += fmt::format("    {:<14} {}\n", kind, ms(s));
  o += fmt::format("  exposed offload  {}  {}\n", ms(r.offload_s), pct(r.offload_s, r.step_s));
  o += fmt::format("  idle             {}  {}\n", ms(r.idle_s), pct(r.idle_s, r.step_s));
  if (r.host_s > 0)
    o += fmt::format("host               {}  {}  the host's time to issue the step{}\n", ms(r.host_s),
                     pct(r.host_s, r.step_s),
                     r.host_binds() ? ": the host binds (the GPU waits for its launches)" : "");
  if (r.host_reference_loop_us > 0)
    o += r.host_loop_us > 0
             ? fmt::format("  at this host's speed: its reference loop {:.3f} ms, the profile's {:.3f} ms (figures x {:.3f})\n",
                           r.host_loop_us / 1e3, r.host_reference_loop_us / 1e3, r.host_speed_scale)
             : fmt::format("  at the profile's host speed (reference loop {:.3f} ms); for yours: python3 "
                           "validate/deepspeed/host_cpu.py prints the --set line\n",
                           r.host_reference_loop_us / 1e3);
  if (r.host_autograd_loop_us > 0)
    o += fmt::format("  the backward's at autograd's thread's loop {:.3f} ms (figures x {:.3f})\n",
                     r.host_autograd_loop_us / 1e3, r.host_autograd_speed_scale);
  o += fmt::format("throughput         {:.1f} TFLOPS/GPU model ({:.1f} with recomputation), {:.0f} tokens/s\n",
                   r.tflops_per_gpu, r.hardware_tflops_per_gpu, r.tokens_per_s);
  o += fmt::format("timed peak memory  gpu {:.2f} GiB, cpu {:.2f} GiB, nvme {:.2f} GiB per rank\n",
                   r.timed_peak_bytes[0] / double(kGiB), r.timed_peak_bytes[1] / double(kGiB),
                   r.timed_peak_bytes[2] / double(kGiB));
  if (r.memory_waits > 0)
    o += fmt::format("  {} GPU allocation{} waited for memory to be freed{}\n", r.memory_waits,
                     r.memory_waits == 1 ? "" : "s",
                     r.memory_overcommits > 0
                         ? fmt::format("; {} went over HBM capacity to avoid a deadlock (the schedule lets "
                                       "streams run further ahead than memory allows)",
                                       r.memory_overcommits)
                         : std::string());
  if (!r.critical_path.empty()) {
    o += "critical path      top contributors\n";
    for (const CriticalContributor& c : r.critical_path)
      o += fmt::format("  {:<40} {}  {}  ({} op{})\n", c.label, ms(c.seconds), pct(c.seconds, r.step_s), c.ops,
                       c.ops == 1 ? "" : "s");
  }
  return o;
}

}  // namespace zsim
