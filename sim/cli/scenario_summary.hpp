// A short human-readable summary of a resolved Scenario (what zsim understood), for the terminal.
#pragma once
#include <string>

#include "sim/scenario/scenario.hpp"

namespace zsim {

std::string scenario_summary(const Scenario& s);

}  // namespace zsim
