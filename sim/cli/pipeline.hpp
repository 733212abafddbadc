// THE wiring point of zsim: scenario -> (plan -> schedule -> report). The CLI calls only these two
// functions after the scenario has loaded; the lead replaces their bodies when sim/plan and sim/report
// merge. Nothing here may write files: the CLI writes what they return, atomically.
#pragma once
#include <optional>
#include <string>

#include "sim/scenario/scenario.hpp"

namespace zsim {

struct ReportOutputs {
  std::string terminal;  // what `zsim SCENARIO` prints on stdout
  std::string json;      // what `zsim SCENARIO --json FILE` writes
};

// `zsim SCENARIO`: today the resolved-scenario summary and JSON ("format": "zsim.scenario"); to become
// make_plan -> make_schedule -> make_report and the report's terminal / JSON writers.
ReportOutputs scenario_to_report(const Scenario& scenario);

// `zsim plan SCENARIO --emit-schedule FILE`: the schedule JSON, or nullopt while no schedule builder is
// linked in (the CLI then says so and exits 1).
std::optional<std::string> scenario_to_schedule_json(const Scenario& scenario);

}  // namespace zsim
