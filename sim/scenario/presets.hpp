// Built-in model and GPU presets (published architecture configs and datasheets; sources in
// docs/presets.md). Pure data lookup.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.hpp"

namespace zsim {

std::optional<ModelSpec> model_preset(const std::string& name);
std::optional<GpuSpec> gpu_preset(const std::string& name);
std::vector<std::string> model_preset_names();
std::vector<std::string> gpu_preset_names();

}  // namespace zsim
