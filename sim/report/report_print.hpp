// The report as terminal text: aligned tables in human units (memory per tier, communication per phase
// and per collective, copies), the verdict (fits with headroom, or the first overflow), warnings.
#pragma once
#include <cstdio>
#include <string>

#include "sim/report/report.hpp"

namespace zsim {

std::string format_report(const Report& r);
void print_report(const Report& r, std::FILE* out = stdout);

}  // namespace zsim
