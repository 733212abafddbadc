// Test helpers: parse inline scenario text as if it were a file in sim/scenario/testdata/, and catch the
// InputError a bad scenario must raise.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/scenario/scenario_parse.hpp"

namespace zsim::testing {

inline const std::string kTestFile = "sim/scenario/testdata/inline.yaml";

// A small valid scenario: llama2-7b, ZeRO-2 on one node of 8 A100-80GB.
inline const std::string kBase = R"(model:
  preset: llama2-7b
training:
  micro_batch: 1
  seq_len: 4096
cluster:
  nodes: 1
  gpus_per_node: 8
  gpu: a100-80gb
  host: {memory_bytes: 1TB, cores: 64}
  links: {nvlink_GBps: 300, pcie_GBps: 25, ib_GBps: 25}
deepspeed:
  zero_optimization:
    stage: 2
)";

inline Scenario parse(const std::string& text, std::vector<std::string> overrides = {}) {
  LoadOptions o;
  o.overrides = std::move(overrides);
  return parse_scenario(text, kTestFile, o);
}

// The error a parse raises, or nullopt when it succeeds.
inline std::optional<InputError> error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    parse(text, std::move(overrides));
  } catch (const InputError& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace zsim::testing
