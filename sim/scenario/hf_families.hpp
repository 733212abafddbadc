// The model types zsim builds as transformers 5.17 does: per model_type the modeling file it follows and how it reads
// that family's config.json keys, each absent key at the family's config-class default.
#pragma once
#include <string>

#include "sim/scenario/hf_reader.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct HfFamily {
  const char* model_type;
  const char* follows;  // transformers' file, under src/transformers/models/
  // Reads the family's keys into m (dimensions already read): architecture, biases, tying, positions, dropouts.
  void (*read)(const HfReader& hf, ModelSpec& m);
  // What zsim prices as another family's layer (kernels' traffic, host time), "" when the family's own is measured
  // under DeepSpeed (Llama, Mistral, Qwen2, GPT-2): the report's warning says so.
  const char* priced_as = "";
  bool moe = false;  // reads a mixture of experts' keys (others refuse them)
};

// The warning for a model whose layer zsim prices as another family's ("" when none).
std::string hf_pricing_warning(const ArchSpec& arch);

const HfFamily* hf_family_of(const std::string& model_type);
std::string supported_model_types();  // "cohere, gemma, ..." (sorted)

}  // namespace zsim
