// The report as terminal text: aligned tables in human units (memory per tier, communication per phase
// and per collective, copies), the verdict (fits with headroom, or the first overflow), warnings.
#pragma once
#include <cstdio>
#include <string>

#include "sim/report/report.hpp"

namespace zsim {

struct ReportPrintOptions {
  bool header = true;             // the header lines (scenario, model, cluster, ZeRO); off for callers
                                  // that print their own scenario summary first
  bool scenario_warnings = true;  // the scenario's warnings; off for callers that already printed them
};

std::string format_report(const Report& r, const ReportPrintOptions& options = {});
void print_report(const Report& r, std::FILE* out = stdout, const ReportPrintOptions& options = {});

}  // namespace zsim
