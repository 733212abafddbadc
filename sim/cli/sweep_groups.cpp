#include "sim/cli/sweep_groups.hpp"

#include <chrono>
#include <optional>

#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/comm_walk.hpp"
#include "sim/report/report.hpp"

namespace zsim {

ScheduleKey schedule_key(const Scenario& s) {
  ScheduleKey k;
  k.source_file = s.source_file;
  k.model = s.model;
  k.training = s.training;
  k.zero = s.zero;
  k.nodes = s.cluster.nodes;
  k.gpus_per_node = s.cluster.gpus_per_node;
  k.capacity = capacity_of(s);
  k.runtime = s.runtime;
  k.outside_allocator_bytes = s.cluster.efficiency.outside_allocator_bytes;
  return k;
}

struct SweepGroups::Shared {
  Schedule schedule;        // checked; empty when the group does not fit (its points need the walk only)
  MemoryWalk memory;
  Bytes cross_node_bytes_per_gpu = 0;
  std::optional<SimProgram> program;  // the engine's view of `schedule`, when it fits
};

std::size_t SweepGroups::find(const ScheduleKey& key) const {
  for (std::size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].key == key) return g;
  return groups_.size();
}

std::size_t SweepGroups::add_point(const Scenario& s) {
  ScheduleKey key = schedule_key(s);
  std::lock_guard lock(mu_);
  const std::size_t g = find(key);
  if (g == groups_.size()) groups_.push_back({std::move(key), s, !tries_repeated_micro_steps(s, options_), 0, {}});
  ++groups_[g].remaining;
  return g;
}

std::size_t SweepGroups::next_unbuilt(std::size_t after) const {
  for (std::size_t h = after + 1; h < groups_.size(); ++h)
    if (groups_[h].shares && groups_[h].remaining > 0 && !groups_[h].shared.valid()) return h;
  return groups_.size();
}

void SweepGroups::build_into(std::promise<std::shared_ptr<const Shared>>& promise, const Scenario& s) {
  try {
    auto shared = std::make_shared<Shared>();
    const Plan plan = make_plan(s);
    shared->schedule = make_schedule(s, plan, options_.steps);
    check_schedule(shared->schedule);
    shared->memory = walk_memory_of(s, shared->schedule);
    if (shared->memory.fits()) {
      shared->cross_node_bytes_per_gpu = walk_comm(shared->schedule).cross_node_per_gpu.total();
      shared->program.emplace(shared->schedule);
    } else {
      shared->schedule = {};
    }
    promise.set_value(std::move(shared));
    std::lock_guard lock(mu_);
    ++built_;
  } catch (...) {
    promise.set_exception(std::current_exception());
  }
}

SweepPoint SweepGroups::evaluate(const Scenario& s) {
  const ScheduleKey key = schedule_key(s);
  std::size_t g = 0;
  std::promise<std::shared_ptr<const Shared>> own, ahead;
  bool builds_own = false;
  const Scenario* ahead_scenario = nullptr;
  SharedFuture shared;
  {
    std::lock_guard lock(mu_);
    g = find(key);
    if (g == groups_.size() || groups_[g].remaining == 0) return evaluate_sweep_point(s, options_);  // not added
    Group& group = groups_[g];
    if (group.shares) {
      if (!group.shared.valid()) {
        group.shared = own.get_future().share();
        builds_own = true;
      } else if (group.shared.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        if (const std::size_t h = next_unbuilt(g); h < groups_.size()) {
          groups_[h].shared = ahead.get_future().share();
          ahead_scenario = &groups_[h].scenario;  // groups_ does not grow while points are evaluated
        }
      }
      shared = group.shared;
    }
  }
  // Counts the point done however it leaves; the group's last point drops the shared schedule.
  struct Done {
    SweepGroups& self;
    std::size_t g;
    ~Done() {
      std::lock_guard lock(self.mu_);
      if (--self.groups_[g].remaining == 0) self.groups_[g].shared = {};
    }
  } done{*this, g};
  if (!shared.valid()) return evaluate_sweep_point(s, options_);
  if (builds_own) build_into(own, s);
  if (ahead_scenario) build_into(ahead, *ahead_scenario);
  const std::shared_ptr<const Shared> group = shared.get();  // rethrows what building threw
  return sweep_point_of_schedule(s, group->schedule, group->memory, options_, group->cross_node_bytes_per_gpu,
                                 group->program ? &*group->program : nullptr);
}

std::size_t SweepGroups::groups() const {
  std::lock_guard lock(mu_);
  return groups_.size();
}

std::size_t SweepGroups::schedules_built() const {
  std::lock_guard lock(mu_);
  return built_;
}

}  // namespace zsim
