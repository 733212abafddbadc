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
  // By op id: the host's time to issue it (efficiency.host_issue or, runtime deepspeed, efficiency.deepspeed_host);
  // empty without a host model.
  std::vector<Seconds> host_issue_s;
  std::int64_t events = 0;            // event-loop iterations (for ops/s figures)
  int memory_waits = 0;               // GPU allocs that had to wait for frees (SimOptions::limit_gpu_memory)
  int memory_overcommits = 0;         // GPU allocs let through over capacity because nothing else could run
  int side_waits = 0;                 // side ops that waited for the compute stream's kernel (beside_compute_wait)
  Seconds side_wait_s = 0;            // and their waits, summed

  // Steady-state time per step: last step's end minus the previous step's end; with one step, its span.
  Seconds step_s() const;
  // The window [begin, end) of simulated time that step_s() measures.
  Seconds window_begin_s() const;
};

// The engine's view of a schedule that depends on no cluster figure: each op's stream, dependency count and
// GPU alloc / free bytes, who waits for whom, each stream's queue, the step segmentation. simulate() builds one per
// call; a caller timing one schedule under many clusters (a sweep's group, sim/cli/sweep_groups.hpp) builds it
// once. Refers to the schedule, which must outlive it.
struct SimProgram {
  explicit SimProgram(const Schedule& s);
  const Schedule* schedule = nullptr;
  std::vector<int> stream_of;               // by op id
  std::vector<int> deps;                    // by op id: how many ops it waits for
  std::vector<OpId> comm_prev;              // by op id: communicator_order_deps (the call before it on its group)
  std::vector<char> gpu_mem;                // by op id: 0 none, 1 GPU alloc, 2 GPU free
  std::vector<Bytes> gpu_mem_bytes;         // by op id: the alloc's or free's bytes
  std::vector<std::size_t> dependents_begin;  // CSR: dependents[dependents_begin[i] .. [i + 1]) wait for op i,
  std::vector<OpId> dependents;               // in the order their deps list them in program order
  std::vector<std::size_t> queue_begin;     // CSR by stream: queue[queue_begin[s] .. [s + 1]) its ops in order
  std::vector<OpId> queue;
  std::vector<StepSpan> steps;              // find_steps' spans (times 0)
  std::vector<int> step_of_op;              // find_steps
  // Ops whose cost inputs are equal (kind; a compute op's unit, layer and ComputeOp; a collective's CollectiveOp;
  // a copy's CopyOp: a superset of what op_work reads) share a work class, so that each run prices a class once
  // (a micro-step repeats every op of the one before). Class 0: alloc / free (no work). class_op[c]: the class's
  // first op in program order.
  std::vector<int> work_class;              // by op id
  std::vector<OpId> class_op;
};

// Throws std::invalid_argument when the schedule's shape does not match the cluster (world size, nodes,
// GPUs per node) or an op needs a link or unit with zero capacity; std::logic_error on a malformed schedule.
TimingResult simulate(const ClusterSpec& cluster, const Schedule& schedule, const SimOptions& options = {});
// The same with the schedule's program already built (program.schedule is the schedule timed).
TimingResult simulate(const ClusterSpec& cluster, const SimProgram& program, const SimOptions& options = {});

// The step segmentation simulate() uses (exposed for tests and the report).
std::vector<int> find_steps(const Schedule& s, std::vector<StepSpan>* spans);

}  // namespace zsim
