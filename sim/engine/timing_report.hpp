// TimingReport: what one simulated step costs and where the time goes (the `time` block of zsim's
// output): step time split into compute / optimizer / exposed communication / exposed offload / idle,
// FLOPS per GPU, tokens per second, and the top contributors of the critical path. Derived from a
// TimingResult by walking the schedule; see docs/timing.md for every definition.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sim/engine/simulate.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

struct CriticalContributor {
  std::string label;   // "<phase> <what>", e.g. "backward compute.backward", "forward all_gather@world"
  Seconds seconds = 0; // time of the measured step's critical path spent in such ops
  int ops = 0;         // how many ops of the path carry this label
};

struct TimingReport {
  int steps_simulated = 0;
  Seconds step_s = 0;          // steady-state time per optimizer step (TimingResult::step_s)
  // The step window split by what runs, in priority order (they sum to step_s):
  Seconds compute_s = 0;       // a GPU compute kernel (not the optimizer) runs
  Seconds optimizer_s = 0;     // else an optimizer op (GPU or CPU) runs
  Seconds exposed_comm_s = 0;  // else a collective (or a stage-3 fetch d2d copy) runs
  Seconds offload_s = 0;       // else a copy (PCIe h2d/d2h, NVMe) runs: exposed offload
  Seconds idle_s = 0;          // nothing runs (latency of a dependency chain, ...)
  // The host's time to issue the last step's ops (a host model: efficiency.host_issue, or efficiency.deepspeed_host
  // under runtime deepspeed; 0 without one). Not part of the split above: where it is close to step_s the host
  // binds the step (host_binds), and the compute above is the GPU waiting for the host's launches.
  Seconds host_s = 0;
  bool host_binds() const { return host_s > 0 && host_s >= 0.9 * step_s; }
  // Under efficiency.deepspeed_host with a reference loop: the host speed its figures were taken at (the host's loop,
  // the profile's reference, and the scale between them; host_loop_us 0 = not given: the reference's). 0 = no such model.
  // The backward's figures at autograd's thread's loop (host_autograd_loop_us 0 = not given: the main thread's).
  double host_reference_loop_us = 0, host_loop_us = 0, host_speed_scale = 1;
  double host_autograd_loop_us = 0, host_autograd_speed_scale = 1;
  std::map<std::string, Seconds> exposed_comm_by_phase;       // "forward", "backward", "step", "init"
  std::map<std::string, Seconds> exposed_comm_by_collective;  // "all_gather", "reduce_scatter", ...
  Seconds comm_busy_s = 0;     // time some collective runs, hidden or not
  Seconds offload_busy_s = 0;  // time some copy runs, hidden or not
  Flops model_flops_per_gpu = 0;     // per step: forward + backward compute ops (6 x params x tokens + attention)
  Flops hardware_flops_per_gpu = 0;  // model FLOPs + recomputation
  double tflops_per_gpu = 0;           // model_flops_per_gpu / step_s / 1e12
  double hardware_tflops_per_gpu = 0;  // hardware_flops_per_gpu / step_s / 1e12
  double tokens_per_s = 0;             // meta.tokens_per_step / step_s (whole cluster)
  Seconds critical_path_s = 0;         // length of the walked path inside the step window
  std::vector<CriticalContributor> critical_path;  // top contributors, longest first
  std::vector<OpId> critical_ops;      // the walked path, last op first
  // Peak live bytes per rank on each tier (index = Tier: gpu, cpu, nvme) when allocs and frees happen at
  // their simulated times (ties in program order), over the whole simulated program. The memory report
  // walks the schedule in program order; a larger timed peak means the schedule lets streams run ahead of
  // each other further than its program order implies (e.g. prefetch without deps that bound it).
  Bytes timed_peak_bytes[3] = {0, 0, 0};
  int memory_waits = 0;        // TimingResult::memory_waits: GPU allocs that waited for frees
  int memory_overcommits = 0;  // TimingResult::memory_overcommits: allocs forced over HBM capacity
};

// Summarises the last simulated step (the steady state when the schedule holds several).
TimingReport summarize(const Schedule& s, const TimingResult& t, int top_contributors = 5);

// The throughput part of summarize() only (steps_simulated, step_s, model / hardware FLOPs, TFLOPS,
// tokens/s, memory waits), computed by the same code; the rest of the report stays zero. For sweeps,
// which rank points by these figures and print nothing else.
TimingReport summarize_throughput(const Schedule& s, const TimingResult& t);

}  // namespace zsim
