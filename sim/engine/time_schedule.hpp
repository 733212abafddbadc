// One call for the CLI / sweep: simulate a scenario's schedule and render what the user asked for, as
// strings (the CLI writes files itself, atomically). Wiring only: the numbers come from simulate() and
// summarize().
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/engine/sim_options.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/timing_report.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

struct TimeRequest {
  SharePolicy share = SharePolicy::ordered;
  bool want_trace = false;  // --trace FILE
  bool want_csv = false;    // --csv FILE
  int top_contributors = 5;
  bool throughput_only = false;  // report = summarize_throughput() only; no terminal / JSON (sweeps)
  bool schedule_checked = false; // SimOptions::schedule_checked
  const SimProgram* program = nullptr;  // the schedule's SimProgram when the caller keeps one (else built here)
};

struct TimeOutputs {
  TimingResult result;
  TimingReport report;
  std::string terminal;        // format_timing(report)
  nlohmann::ordered_json json; // timing_report_json(report): the "time" block
  std::string trace_json;      // Chrome trace, when want_trace
  std::string csv;             // per-op CSV, when want_csv
};

// Uses scenario.cluster and scenario.training.precision. Throws what simulate() throws. request.program, when
// given, must be the program of `schedule`.
TimeOutputs time_schedule(const Scenario& scenario, const Schedule& schedule, const TimeRequest& request = {});

}  // namespace zsim
