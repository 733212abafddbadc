#include "sim/topology/max_min_fair.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace zsim {

std::vector<double> max_min_fair_rates(const std::vector<FlowPath>& flows, const std::vector<double>& capacity) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> rate(flows.size(), 0.0);
  std::vector<char> frozen(flows.size(), 0);
  std::vector<double> residual = capacity;
  std::vector<double> weight(capacity.size());
  size_t active = 0;
  for (size_t f = 0; f < flows.size(); ++f) {
    for (const FlowUse& u : flows[f]) {
      if (u.link < 0 || u.link >= static_cast<int>(capacity.size())) throw std::out_of_range("flow on unknown link");
      if (!(u.coefficient > 0)) throw std::invalid_argument("flow coefficient must be positive");
    }
    if (flows[f].empty()) {
      rate[f] = inf;
      frozen[f] = 1;
    } else {
      ++active;
    }
  }
  while (active > 0) {
    std::fill(weight.begin(), weight.end(), 0.0);
    for (size_t f = 0; f < flows.size(); ++f)
      if (!frozen[f])
        for (const FlowUse& u : flows[f]) weight[u.link] += u.coefficient;
    double delta = inf;
    for (size_t l = 0; l < capacity.size(); ++l)
      if (weight[l] > 0) delta = std::min(delta, std::max(residual[l], 0.0) / weight[l]);
    for (size_t f = 0; f < flows.size(); ++f)
      if (!frozen[f]) rate[f] += delta;
    std::vector<char> full(capacity.size(), 0);
    for (size_t l = 0; l < capacity.size(); ++l) {
      if (weight[l] <= 0) continue;
      residual[l] -= weight[l] * delta;
      if (residual[l] <= capacity[l] * 1e-12) full[l] = 1;
    }
    for (size_t f = 0; f < flows.size(); ++f) {
      if (frozen[f]) continue;
      for (const FlowUse& u : flows[f])
        if (full[u.link]) {
          frozen[f] = 1;
          --active;
          break;
        }
    }
  }
  return rate;
}

}  // namespace zsim
