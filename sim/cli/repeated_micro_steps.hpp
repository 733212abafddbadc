// Repeated micro-steps priced once (issue 12). Between a step's first micro-step and its last, the schedule
// builder emits the same ops again and again (micro-steps 1 .. grad_accum-2 differ only in the `.m<micro>` of
// their names), so every figure of the report is an affine function of how many of them there are, once the
// engine's timing has become periodic. This prices a scenario by building and walking / simulating the
// program with only n = 3, 4, 5 (then 6, ...) micro-steps per step (make_schedule_with_micro_steps), checking
// that every figure of three consecutive n lies on one line (integers exactly; times within a relative
// 1e-12 per extrapolated micro-step of the step time), and extending the line to n = grad_accum. When the
// figures do not line up within a few n (a timing not yet periodic, a peak that moves between micro-steps),
// it gives up and the caller runs the whole program. Oracle: tests/repeated_micro_steps_test.cpp compares
// every figure with the unrolled path's on every bundled scenario and random variations.
#pragma once
#include <optional>

#include "sim/engine/sim_options.hpp"
#include "sim/engine/timing_report.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct RepeatOptions {
  int steps = 2;                 // optimizer steps, as PipelineOptions::steps
  SharePolicy share = SharePolicy::ordered;
  int top_contributors = 5;      // critical-path contributors kept (TimeRequest::top_contributors)
  bool throughput_only = false;  // timing: summarize_throughput() figures only (sweep points)
  int max_built = 8;             // give up when n = max_built micro-steps per step still does not line up
};

struct RepeatedResult {
  Report report;                 // memory and communication walks, warnings (report.time not attached)
  TimingReport time;             // critical_ops left empty (an op list, not a figure)
  int built_micro_steps = 0;     // the largest n that was built and simulated
};

// The report and timing of `scenario` (with its Plan's schedule of `options.steps` steps) computed from
// truncated programs, or nullopt when grad_accum < 6 (nothing to save) or the figures do not line up (then
// run the unrolled pipeline). Throws what make_report / simulate throw.
std::optional<RepeatedResult> report_by_repeated_micro_steps(const Scenario& scenario, const RepeatOptions& options);

}  // namespace zsim
