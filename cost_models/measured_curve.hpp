// A curve known only at measured points (zrun calibrate's sizes, thread counts): its value in between.
#pragma once
#include <utility>
#include <vector>

namespace zsim {

// The value at x of a curve measured at `points` (x, y), sorted by x, all positive: linear in log x and log y between
// the two measured x around it, the nearest measured value beyond them. Throws std::invalid_argument naming `what` on
// no points or a point that is not positive.
double log_log_interpolated(const std::vector<std::pair<double, double>>& points, double x, const char* what);

}  // namespace zsim
