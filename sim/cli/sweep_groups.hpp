// Sweep points that differ only in what the timing reads (link bandwidths and latencies, GPU and host
// throughputs, efficiencies, GEMM models) share one plan, schedule, memory walk and communication walk: a group's
// is built once, by the first point that needs it, timed once per point, and dropped after its last point
// (issue 12: a 10,000-point sweep whose link axes multiply a few hundred distinct schedules).
// What the plan, schedule builder and walks read of a Scenario is ScheduleKey; two points share a group only when
// their keys compare equal (defaulted ==, so a field added to the model, training or ZeRO config is compared too).
// tests/sweep_groups_test.cpp checks that the schedule does not change with the rest of the cluster.
#pragma once
#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sim/cli/pipeline.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

// Everything of a Scenario that make_plan, make_schedule, walk_memory (its capacities) and walk_comm read.
struct ScheduleKey {
  std::string source_file;  // the schedule's meta names it
  ModelSpec model;
  TrainingSpec training;
  ZeroConfig zero;
  int nodes = 0;
  int gpus_per_node = 0;
  MemoryCapacity capacity;
  RuntimeKind runtime = RuntimeKind::deepspeed;  // the schedule's buffers and the allocator walk
  std::optional<Bytes> outside_allocator_bytes{};  // the GPU verdict (walk_memory_of; absent: its default)
  bool operator==(const ScheduleKey&) const = default;
};

ScheduleKey schedule_key(const Scenario& s);

class SweepGroups {
 public:
  explicit SweepGroups(PipelineOptions options) : options_(options) {}

  // The group of `s`, counting one more point in it (call once per point before evaluating any).
  std::size_t add_point(const Scenario& s);

  // The point's figures, identical to evaluate_sweep_point(s, options): through its group's shared schedule when
  // it runs the unrolled program, else (repeated micro-steps priced once) evaluate_sweep_point itself. The last
  // point of a group drops the group's schedule.
  SweepPoint evaluate(const Scenario& s);

  std::size_t groups() const;            // distinct keys added
  std::size_t schedules_built() const;   // shared schedules built so far

 private:
  struct Shared;  // a group's schedule and walks
  using SharedFuture = std::shared_future<std::shared_ptr<const Shared>>;
  struct Group {
    ScheduleKey key;
    Scenario scenario;          // its first point's, to build from
    bool shares = false;        // its points run the unrolled program (else evaluate_sweep_point each)
    std::size_t remaining = 0;  // points added and not yet evaluated
    SharedFuture shared;        // valid once a thread started building it
  };
  std::size_t find(const ScheduleKey& key) const;  // groups_.size() when new; caller holds mu_
  // A thread that would wait for another's build builds the next group not yet started instead (groups are
  // evaluated in the order they were added), so that both threads keep working.
  std::size_t next_unbuilt(std::size_t after) const;  // groups_.size() when none; caller holds mu_
  void build_into(std::promise<std::shared_ptr<const Shared>>& promise, const Scenario& s);
  PipelineOptions options_;
  mutable std::mutex mu_;
  std::vector<Group> groups_;
  std::size_t built_ = 0;
};

}  // namespace zsim
