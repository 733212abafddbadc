#include "cost_models/measured_curve.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace zsim {

double log_log_interpolated(const std::vector<std::pair<double, double>>& points, double x, const char* what) {
  if (points.empty()) throw std::invalid_argument(std::string(what) + ": no measured points");
  for (const auto& [px, py] : points)
    if (!(px > 0) || !(py > 0)) throw std::invalid_argument(std::string(what) + ": a measured point must be positive");
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  std::size_t i = 1;
  while (points[i].first < x) ++i;
  const auto& [ax, ay] = points[i - 1];
  const auto& [bx, by] = points[i];
  const double t = std::log(x / ax) / std::log(bx / ax);
  return std::exp(std::log(ay) + t * (std::log(by) - std::log(ay)));
}

}  // namespace zsim
