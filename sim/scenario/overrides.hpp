// `--set a.b.c=value` what-if overrides, applied to the scenario's YAML tree before it is resolved.
#pragma once
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace zsim {

// Applies each "dotted.key=value" (value parsed as YAML: 2, true, cpu, {device: cpu}) to `root`, creating
// blocks as needed; a scalar cluster.gpu preset becomes {preset: NAME} when one of its fields is set.
// An unknown key, a missing '=' or a path through a single value is an InputError naming the override.
// Returns the dotted paths that were set (for "--set" locations in later messages).
std::set<std::string> apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides);

}  // namespace zsim
