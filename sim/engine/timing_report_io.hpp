// Output of a TimingReport: the JSON `time` block (keys time.step_s, time.compute_s, ...) and the
// terminal text. Printing only; the numbers come from summarize().
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/engine/timing_report.hpp"

namespace zsim {

// The object to store under the output's "time" key (keys in the order listed in docs/timing.md). Same
// name and type as the report's call site (sim/report/report_json.cpp: j["timing"] = timing_report_json(..)).
nlohmann::ordered_json timing_report_json(const TimingReport& r);

// Human-readable block for the terminal, several lines, ending in a newline.
std::string format_timing(const TimingReport& r);

}  // namespace zsim
