// The discrete-event engine: runs the SPMD schedule of one rank (ranks are symmetric) in simulated time.
// An op starts when its deps are done and it heads its stream (program order within a stream);
// concurrent transfers share the rank's links by max-min fairness. Single-threaded and deterministic.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/engine/sim_options.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/topology/rank_links.hpp"

namespace zsim {

struct OpTiming {
  Seconds start_s = 0;
  Seconds end_s = 0;
  Seconds duration_s() const { return end_s - start_s; }
};

// One training step found in the program: ops [first, last] in program order, Phase::init ops excluded
// (a step starts at a forward op that follows a step-phase op).
struct StepSpan {
  OpId first = 0;
  OpId last = 0;
  Seconds start_s = 0;  // earliest start of its ops
  Seconds end_s = 0;    // latest end of its ops
};

struct TimingResult {
  std::vector<OpTiming> ops;          // by op id
  std::vector<Seconds> stream_busy_s; // by stream index: time with an op of the stream running
  std::vector<StepSpan> steps;
  std::vector<int> step_of_op;        // step index per op, -1 for init ops
  RankLinks links;                    // the simulated rank's links
  std::vector<double> link_bytes;     // bytes each link carried (per rank)
  Seconds makespan_s = 0;
  std::int64_t events = 0;            // event-loop iterations (for ops/s figures)
  int memory_waits = 0;               // GPU allocs that had to wait for frees (SimOptions::limit_gpu_memory)
  int memory_overcommits = 0;         // GPU allocs let through over capacity because nothing else could run

  // Steady-state time per step: last step's end minus the previous step's end; with one step, its span.
  Seconds step_s() const;
  // The window [begin, end) of simulated time that step_s() measures.
  Seconds window_begin_s() const;
};

// Throws std::invalid_argument when the schedule's shape does not match the cluster (world size, nodes,
// GPUs per node) or an op needs a link or unit with zero capacity; std::logic_error on a malformed schedule.
TimingResult simulate(const ClusterSpec& cluster, const Schedule& schedule, const SimOptions& options = {});

// The step segmentation simulate() uses (exposed for tests and the report).
std::vector<int> find_steps(const Schedule& s, std::vector<StepSpan>* spans);

}  // namespace zsim
