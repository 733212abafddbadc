// Hugging Face config.json -> ModelSpec (hidden_size, num_hidden_layers, intermediate_size, heads, kv heads,
// vocab, tied embeddings, learned positions, MLP kind and biases by model_type). Keys it does not use are
// ignored (HF configs carry many); the ones it uses are type-checked with file:line:column.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/scenario.hpp"

namespace zsim {

// `root` is the parsed JSON, `file` its path for messages, `name` what ModelSpec::name becomes.
ModelSpec model_from_hf_config(const YAML::Node& root, const std::string& file, const std::string& name);

}  // namespace zsim
