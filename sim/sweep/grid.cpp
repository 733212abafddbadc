#include "sim/sweep/grid.hpp"

#include "sim/common/error.hpp"

namespace zsim {

GridAxis parse_grid_axis(const std::string& text) {
  const SourceLocation where{"--grid", 0, 0, text};
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(where, "expected KEY=V1,V2,... (for example deepspeed.zero_optimization.stage=2,3)");
  GridAxis axis;
  axis.key = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  std::size_t start = 0;
  while (true) {
    const auto comma = rest.find(',', start);
    std::string v = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (v.empty()) throw InputError(where, "empty value in the list after '='");
    axis.values.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axis;
}

std::size_t grid_size(const std::vector<GridAxis>& axes) {
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  return n;
}

std::vector<std::string> grid_point(const std::vector<GridAxis>& axes, std::size_t index) {
  std::vector<std::string> out(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    const auto& a = axes[i];
    out[i] = a.key + "=" + a.values[index % a.values.size()];
    index /= a.values.size();
  }
  return out;
}

}  // namespace zsim
