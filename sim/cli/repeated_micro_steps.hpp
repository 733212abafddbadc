// Repeated micro-steps priced once (issue 12). Between a step's first micro-step and its last, the schedule
// builder emits the same ops again and again (micro-steps 1 .. grad_accum-2 differ only in the `.m<micro>` of
// their names), so once the engine's timing is periodic every figure of the report is an affine function of
// how many of them there are. This builds, walks and simulates the program with only n = 4 and 5 (then 6, ...)
// micro-steps per step (make_schedule_with_micro_steps) and extends every figure along the line through the
// last two probes to n = grad_accum, when in the larger probe:
//  - the last three steady micro-steps run as exact time shifts of one another in every step, with no memory
//    wait (the periodic state: every further steady micro-step is that shift again);
//  - every tier holds the same live bytes at the start of each steady micro-step and of the last one (so the
//    memory peaks do not move with their number);
//  - in both probes, each step ended before the next step's first steady micro-step started;
//  and the extended timed GPU peak fits the GPU (so the long program waits for memory nowhere either).
// Otherwise it tries the next n, up to RepeatOptions::max_built, then gives up: the caller runs the whole
// program. Integer figures extend exactly; times carry the rounding of one probe difference times the
// micro-steps extended (~1e-13 of the step time). Oracle: tests/repeated_micro_steps_test.cpp compares every
// figure with the unrolled pipeline's on every bundled scenario and 100 random variations.
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
  int max_built = 8;             // give up when n = max_built micro-steps per step still does not line up
  bool check_third_point = false;  // also require a third probe (n - 2) on each figure's line (tests)
};

struct RepeatedResult {
  Report report;                 // memory and communication walks, warnings (report.time not attached)
  TimingReport time;             // critical_ops left empty (an op list, not a figure)
  int built_micro_steps = 0;     // the largest n that was built and simulated
  std::size_t ops_simulated = 0; // ops of all the probes built (walked and simulated)
};

// The report and timing of `scenario` (with its Plan's schedule of `options.steps` steps) computed from
// truncated programs, or nullopt when grad_accum < 6 (nothing to save) or the figures do not line up (then
// run the unrolled pipeline). Throws what make_report / simulate throw.
std::optional<RepeatedResult> report_by_repeated_micro_steps(const Scenario& scenario, const RepeatOptions& options);

}  // namespace zsim
