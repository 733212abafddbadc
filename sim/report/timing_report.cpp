#include "sim/report/timing_report.hpp"

#include <nlohmann/json.hpp>

namespace zsim {

nlohmann::ordered_json timing_report_json(const TimingReport&) { return nlohmann::ordered_json::object(); }

}  // namespace zsim
