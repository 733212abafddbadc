// Hugging Face config.json -> ModelSpec, family by family as transformers 5.17 builds each model_type
// (hf_families.cpp; docs/architectures.md lists them): the dimensions, the layer's architecture (head_dim, biases,
// norms, q/k norms, fused projections, residual layout, activation), and every key absent from the file at its
// config class's default. An unknown model_type, or a key that makes shapes zsim does not build (mixture-of-experts,
// multi-head latent attention), stops with file:line:column and the supported types: never a silent dense guess.
#pragma once
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/scenario/scenario.hpp"

namespace zsim {

// `root` is the parsed JSON, `file` its path for messages, `name` what ModelSpec::name becomes.
ModelSpec model_from_hf_config(const YAML::Node& root, const std::string& file, const std::string& name);

}  // namespace zsim
