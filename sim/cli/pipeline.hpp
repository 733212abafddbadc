// THE wiring point of zsim: scenario -> plan -> schedule -> report (memory, communication) -> timing.
// The CLI and the sweep call only these functions; nothing here writes files (the CLI writes what they
// return, atomically).
#pragma once
#include <optional>
#include <string>

#include "sim/engine/time_schedule.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/sweep/sweep.hpp"

namespace zsim {

struct PipelineOptions {
  int steps = 2;              // optimizer steps simulated (timing reports the steady state)
  bool want_trace = false;    // render the Chrome trace
  bool want_csv = false;      // render the per-op CSV
  SharePolicy share = SharePolicy::ordered;  // how concurrent transfers share a link (sim_options.hpp)
  bool throughput_only = false;  // timing: throughput figures only, nothing rendered (sweep points)
  // Issue 12: with at least this many micro-steps per step (grad_accum), scenario_to_report and
  // evaluate_sweep_point price the repeated micro-steps once (repeated_micro_steps.hpp) unless a trace or CSV
  // (one row per op) is asked for; when the figures do not line up they run the whole program. 0: never.
  // run_pipeline always runs the whole (unrolled) program: it is the oracle.
  int repeat_from_micro_steps = 16;
};

struct PipelineResult {
  Schedule schedule;
  Report report;              // with report.time attached
  TimeOutputs time;
};

// Plans, builds the schedule, walks it (report) and simulates it (timing), every micro-step unrolled.
PipelineResult run_pipeline(const Scenario& scenario, const PipelineOptions& options = {});

struct ReportOutputs {
  std::string terminal;  // what `zsim SCENARIO` prints on stdout
  std::string json;      // --json FILE
  std::string trace;     // --trace FILE (Chrome trace JSON), when asked for
  std::string csv;       // --csv FILE (one row per op), when asked for
};

ReportOutputs scenario_to_report(const Scenario& scenario, const PipelineOptions& options = {});

// `zsim plan SCENARIO --emit-schedule FILE`: the schedule JSON of `steps` steps.
std::string scenario_to_schedule_json(const Scenario& scenario, int steps = 1);

// One sweep point: the scenario (already loaded with the point's overrides) through the pipeline.
SweepPoint evaluate_sweep_point(const Scenario& scenario, const PipelineOptions& options = {});

// Whether scenario_to_report / evaluate_sweep_point try pricing the repeated micro-steps once (grad_accum at least
// options.repeat_from_micro_steps, no trace or CSV asked for) rather than running the unrolled program.
bool tries_repeated_micro_steps(const Scenario& scenario, const PipelineOptions& options);

// The unrolled path of evaluate_sweep_point, from the point's checked schedule and its memory walk: a point that
// does not fit gets the walk's figures only; one that fits gets the cross-node bytes (`cross_node_bytes_per_gpu`,
// computed by walk_comm when the caller has not) and is timed. sim/cli/sweep_groups.hpp shares the schedule and
// walks between points.
// `program`, when given, is the schedule's SimProgram, kept by the caller for many points.
SweepPoint sweep_point_of_schedule(const Scenario& scenario, const Schedule& schedule, const MemoryWalk& memory,
                                   const PipelineOptions& options, std::optional<Bytes> cross_node_bytes_per_gpu = {},
                                   const SimProgram* program = nullptr);

}  // namespace zsim
