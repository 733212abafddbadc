#include "sim/topology/max_min_fair.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace zsim {

void max_min_fair_rates(std::span<const std::span<const FlowUse>> flows, const std::vector<double>& capacity,
                        std::vector<double>& rate, MaxMinScratch& scratch) {
  const double inf = std::numeric_limits<double>::infinity();
  rate.assign(flows.size(), 0.0);
  std::vector<char>& frozen = scratch.frozen;
  frozen.assign(flows.size(), 0);
  std::vector<double>& residual = scratch.residual;
  residual = capacity;
  std::vector<double>& weight = scratch.weight;
  weight.resize(capacity.size());
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
  std::vector<char>& full = scratch.full;
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
    full.assign(capacity.size(), 0);
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
}

std::vector<double> max_min_fair_rates(const std::vector<FlowPath>& flows, const std::vector<double>& capacity) {
  std::vector<std::span<const FlowUse>> spans(flows.begin(), flows.end());
  std::vector<double> rate;
  MaxMinScratch scratch;
  max_min_fair_rates(spans, capacity, rate, scratch);
  return rate;
}

}  // namespace zsim
