// The report as terminal text: aligned tables in human units (memory per tier, communication per phase
// and per collective, copies), the verdict (fits with headroom, or the first overflow), warnings.
#pragma once
#include <cstdio>
#include <string>

#include "sim/report/report.hpp"

namespace zsim {

// with_header = false leaves out the few header lines (scenario, model, cluster, ZeRO), for callers that
// print their own scenario summary first.
std::string format_report(const Report& r, bool with_header = true);
void print_report(const Report& r, std::FILE* out = stdout, bool with_header = true);

}  // namespace zsim
