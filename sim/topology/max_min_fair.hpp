// Max-min fair sharing of link capacities among concurrent flows (progressive filling). A flow's rate
// is in its own bytes/s; each link it crosses carries `coefficient` link-bytes per flow byte.
#pragma once
#include <span>
#include <vector>

namespace zsim {

struct FlowUse {
  int link = 0;             // index into the capacity vector
  double coefficient = 1;   // link bytes per flow byte (> 0)
};

using FlowPath = std::vector<FlowUse>;

// Progressive filling: all unfrozen flows grow at the same rate until some link is full; flows on a
// full link freeze; repeat. Returns one rate (bytes/s) per flow. A flow with no links gets +infinity.
// Deterministic: depends only on the inputs' order and values.
std::vector<double> max_min_fair_rates(const std::vector<FlowPath>& flows, const std::vector<double>& capacity);

// The same on flows given as spans (the engine's flat routes), into `rate` (resized to the flows); `scratch` is
// reused between calls so that the engine's event loop allocates nothing.
struct MaxMinScratch {
  std::vector<char> frozen, full;
  std::vector<double> residual, weight;
};
void max_min_fair_rates(std::span<const std::span<const FlowUse>> flows, const std::vector<double>& capacity,
                        std::vector<double>& rate, MaxMinScratch& scratch);

}  // namespace zsim
