// Placeholder for the step-time part of the report. The timing work (sim/engine + cost models) owns it
// and replaces this definition and timing_report_json(); the report carries it as an optional member.
#pragma once
#include <nlohmann/json_fwd.hpp>

namespace zsim {

struct TimingReport {};

// The "timing" object of the report JSON (docs/report-schema.md lists it once the timing work lands).
nlohmann::ordered_json timing_report_json(const TimingReport& t);

}  // namespace zsim
