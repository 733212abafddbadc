// Reading a scenario: YAML text (+ --set overrides, + ds_config / hf_config / hardware-profile files it
// names) -> a resolved, validated Scenario. Every bad input is an InputError with file:line:col and key.
#pragma once
#include <string>
#include <vector>

#include "sim/common/error.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct LoadOptions {
  std::vector<std::string> overrides;       // "dotted.key=value", applied in order
  // Extra directories searched for cluster.profile NAME.yaml, after <scenario dir>/hardware and
  // <scenario dir>; then ./scenarios/hardware and the source tree's scenarios/hardware (always).
  std::vector<std::string> profile_dirs;
};

// `filename` names the text in messages; relative ds_config / hf_config paths resolve against its
// directory. The libFuzzer entry point.
Scenario parse_scenario(const std::string& text, const std::string& filename, const LoadOptions& options = {});

// Reads the file and calls parse_scenario.
Scenario load_scenario(const std::string& path, const LoadOptions& options = {});

// Convenience: overrides only.
inline Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  LoadOptions o;
  o.overrides = overrides;
  return load_scenario(path, o);
}

}  // namespace zsim
