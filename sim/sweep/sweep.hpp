// A sweep: every point of a grid of scenario overrides, evaluated on a thread pool, then ranked.
// The evaluator (scenario -> plan -> schedule -> report -> timing) is injected, so this file knows
// nothing of the pipeline and can be tested with a fake.
#pragma once
#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/sweep/grid.hpp"
#include "sim/sweep/shard.hpp"

namespace zsim {

struct SweepPoint {
  std::size_t index = 0;               // position in the grid (grid_point order), also in a shard
  std::vector<std::string> overrides;  // "KEY=V" for each axis
  bool valid = false;                  // the scenario loaded and was evaluated
  std::string invalid_reason;          // why not (the InputError's message)
  bool fits = false;                   // every memory tier fits
  std::string overflow_tier;           // for a misfit: the first tier that overflows ("gpu", "cpu", "nvme")
  std::string rejection;               // for a misfit: which tier overflowed and by how much
  Seconds step_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  Bytes gpu_peak_bytes = 0;           // allocated
  Bytes gpu_verdict_bytes = 0;        // what the GPU's fits verdict read: reserved + outside the allocator (runtime
                                      // deepspeed) or the peak; 0 where unknown (a point read from a CSV)
  Bytes cpu_peak_bytes = 0;            // per node
  Bytes cross_node_bytes_per_gpu = 0;
};

using SweepEvaluator = std::function<SweepPoint(const std::vector<std::string>& overrides)>;

// Optional: the group a point belongs to. Points of one group are evaluated one after another (groups in the
// order of their first point, grid order inside a group), so that an evaluator can build what they share once and
// drop it when the group is done (sim/cli/sweep_groups.hpp). Results are the same in any order; a point whose
// grouper throws is evaluated on its own.
using SweepGrouper = std::function<std::size_t(const std::vector<std::string>& overrides)>;

struct SweepResult {
  std::vector<GridAxis> axes;
  std::vector<SweepPoint> points;      // in grid order (a shard: its points only)
};

// Evaluates every grid point of `shard` (default: the whole grid) with `threads` workers; an exception from the
// evaluator marks that point invalid with its message. `progress(done, total)` is called after each point
// (serialised), total being the shard's points. With a grouper, the points are evaluated group by group.
SweepResult run_sweep(const std::vector<GridAxis>& axes, const SweepEvaluator& evaluate, unsigned threads,
                      const std::function<void(std::size_t, std::size_t)>& progress = {},
                      const SweepShard& shard = {}, const SweepGrouper& group = {});

// Indices of the points that fit, best first: tokens/s descending, ties broken by grid order.
std::vector<std::size_t> rank_fitting(const SweepResult& r);

// The CSV (write_sweep_csv, read_sweep_csv, merge_sweeps): sweep_csv.hpp.

// The best `top` fitting configurations, then why the others were rejected (counts per reason).
void print_sweep_summary(std::ostream& out, const SweepResult& r, std::size_t top);

}  // namespace zsim
