// Deterministic parameter initialisation: every element's value is a counter-based hash of the tensor's
// full name and the element's flat index, so any slice (a rank's partition, a stage-3 shard) is filled
// with exactly the values the whole tensor has there, whatever the world size or ZeRO stage.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/model/model_config.hpp"

namespace zrun::model {

// The standard deviation a tensor starts with (0 for biases, the norm weights start at 1):
// GPT-2 / Megatron: 0.02 for matrices and embeddings, 0.02 / sqrt(2 * layers) for attn.o and mlp.down.
struct InitRule {
  float mean = 0.0f;
  float std = 0.0f;
};
InitRule init_rule(const ModelConfig& c, const std::string& full_name);

// Fills dst[0, count) with elements [offset, offset + count) of tensor `full_name` (see tensor_full_name),
// as fp32. Values are uniform with the rule's mean and std.
void init_tensor(const ModelConfig& c, const std::string& full_name, std::int64_t offset, std::int64_t count,
                 float* dst);

// The hash behind it: a uniform value in [-1, 1) for (name hash, index).
std::uint64_t name_hash(const std::string& s);
double uniform_pm1(std::uint64_t key, std::uint64_t index);

}  // namespace zrun::model
