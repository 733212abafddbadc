// Helpers for the whole-pipeline tests: the bundled scenarios, loading one with overrides, and the
// figures the properties compare (cross-node bytes per GPU per step, steady-state step time).
#pragma once
#include <string>
#include <vector>

#include "sim/cli/pipeline.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim::test {

// File names (not paths) of scenarios/*.yaml in the source tree, sorted.
std::vector<std::string> bundled_scenario_files();

// Loads scenarios/<file> with `overrides` ("dotted.key=value").
Scenario load_bundled(const std::string& file, const std::vector<std::string>& overrides = {});

// Overrides that keep a bundled scenario's shape (cluster, ZeRO config, model width) but cut the work
// of simulating it: `layers` transformer layers and one micro-step per optimizer step.
std::vector<std::string> small_overrides(int layers = 4);

// Concatenation helper.
std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b);

}  // namespace zsim::test
