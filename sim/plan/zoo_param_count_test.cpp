// The zoo (validate/zoo/models: real models' config.json key values): zsim's parameter tensors against those
// transformers 5.17 builds from the same files (validate/zoo/tensors/<name>.tsv, recorded on the GPU machine by
// validate/zoo/probe_zoo.py): the same count to the parameter, and the same tensors (their sizes, one by one); the
// bytes autograd saves per decoder layer (a saved_tensors_hooks probe of the same record, bf16, two shapes, sdpa and
// some eager) within 2%. Mixtures of experts and latent attention are refused at their key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/common/error.hpp"
#include "sim/plan/model_shapes.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/test_scenarios.hpp"
#include "sim/plan/transformers_activations.hpp"
#include "sim/scenario/hf_config.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {
namespace {

const std::filesystem::path kZoo = std::filesystem::path(ZSIM_SOURCE_DIR) / "validate" / "zoo";

ModelSpec read_config(const std::string& name) {
  const std::string file = (kZoo / "models" / name / "config.json").string();
  return model_from_hf_config(parse_yaml_text(read_input_file(file, "config", {}), file), file, name);
}

// transformers' parameter tensors of one model: their sizes (numel), sorted.
std::vector<Elements> transformers_tensor_sizes(const std::string& name) {
  std::ifstream in(kZoo / "tensors" / (name + ".tsv"));
  std::vector<Elements> sizes;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream shape(line.substr(line.find('\t') + 1));
    Elements n = 1;
    for (std::string dim; std::getline(shape, dim, ',');) n *= std::stoll(dim);
    sizes.push_back(n);
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

std::vector<Elements> zsim_tensor_sizes(const ModelShapes& s) {
  std::vector<Elements> sizes;
  for (const auto& t : s.embedding.tensors) sizes.push_back(t.numel());
  for (std::int64_t l = 0; l < s.layers; ++l)
    for (const auto& t : s.layer.tensors) sizes.push_back(t.numel());
  for (const auto& t : s.head.tensors) sizes.push_back(t.numel());
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

Elements sum(const std::vector<Elements>& v) {
  Elements n = 0;
  for (Elements x : v) n += x;
  return n;
}

// The zoo's models zsim refuses, with the key it refuses each at (mixtures of experts, latent attention).
const std::pair<const char*, const char*> kRefused[] = {{"deepseek-v2-lite", "n_routed_experts"},
                                                        {"deepseek-v3", "n_routed_experts"}};

bool refused(const std::string& name) {
  for (const auto& [model, key] : kRefused)
    if (name == model) return true;
  return false;
}

// The models transformers built for the record that zsim builds too (dense, Mixtral, Qwen3-MoE).
std::vector<std::string> zoo_models_with_tensors() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kZoo / "tensors"))
    if (e.path().extension() == ".tsv" && !refused(e.path().stem().string())) names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Zoo, HoldsAtLeastFifteenDenseModelsThatTransformersBuilt) { EXPECT_GE(zoo_models_with_tensors().size(), 15u); }

TEST(Zoo, MixtralAndQwen3MoeHaveTransformersTotalAndTheirActiveParameters) {
  const ModelSpec mixtral = read_config("mixtral-8x7b");
  const ModelShapes s = model_shapes(mixtral);
  EXPECT_EQ(s.total_params(), 46702792704);  // transformers 5.17, record transformers-zoo
  // Two of eight experts a token: 32 layers x 6 idle experts x 3 x 4096 x 14336 fewer.
  EXPECT_EQ(s.active_params(8, 2), 46702792704 - 32LL * 6 * 3 * 4096 * 14336);
  EXPECT_EQ(model_shapes(read_config("qwen3-30b-a3b")).total_params(), 30532122624);
}

TEST(Zoo, EveryModelZsimBuildsHasTransformersParameterCountToTheParameter) {
  for (const std::string& name : zoo_models_with_tensors()) {
    const std::vector<Elements> theirs = transformers_tensor_sizes(name);
    const ModelShapes ours = model_shapes(read_config(name));
    EXPECT_EQ(ours.total_params(), sum(theirs)) << name;
  }
}

TEST(Zoo, EveryModelZsimBuildsHasTransformersTensorsOneByOne) {
  for (const std::string& name : zoo_models_with_tensors()) {
    const std::vector<Elements> theirs = transformers_tensor_sizes(name);
    const std::vector<Elements> ours = zsim_tensor_sizes(model_shapes(read_config(name)));
    EXPECT_EQ(ours.size(), theirs.size()) << name << ": parameter tensors";
    EXPECT_EQ(ours, theirs) << name;
  }
}

// The probe's runs: (model, attention, micro-batch, sequence, bytes saved by its layer 1, whether that layer slides).
struct SavedRun {
  std::string name, attn;
  std::int64_t b = 0, s = 0;
  Bytes layer_bytes = 0;
  bool sliding = false;
};

std::vector<SavedRun> probe_runs() {
  const auto record = std::filesystem::path(ZSIM_SOURCE_DIR) / "validate" / "results" / "transformers-zoo";
  const nlohmann::json saved = nlohmann::json::parse(std::ifstream(record / "saved.json"));
  const nlohmann::json counts = nlohmann::json::parse(std::ifstream(record / "counts.json"));
  std::vector<SavedRun> runs;
  for (const auto& r : saved.at("runs")) {
    const std::string name = r.at("name");
    if (r.contains("error")) continue;
    bool sliding = false;
    for (const auto& c : counts.at("models"))
      if (c.at("name") == name && c.at("config").contains("layer_types") && c.at("config").at("layer_types").is_array())
        sliding = c.at("config").at("layer_types").at(1) == "sliding_attention";
    runs.push_back({name, r.at("attn"), r.at("b"), r.at("s"), r.at("per_layer_bytes").at("1").get<Bytes>(), sliding});
  }
  return runs;
}

TEST(Zoo, EveryFamilysLayerSavesTheBytesTransformersSavesWithinTwoPercent) {
  int compared = 0, exact = 0;
  double largest = 0;
  for (const SavedRun& run : probe_runs()) {
    if (refused(run.name)) continue;
    ModelSpec m = read_config(run.name);
    m.attention = run.attn == "eager" ? Attention::eager : Attention::flash;
    TrainingSpec t;
    t.micro_batch = run.b, t.seq_len = run.s, t.precision = Precision::bf16;
    t.activation_checkpointing = Checkpointing::none;
    const TransformersActivations a = transformers_activations(m, t);
    Bytes ours = a.layer_saved.total;
    if (run.sliding && m.arch.sliding_layers > 0) ours += a.sliding_masks_saved.total / m.arch.sliding_layers;
    const double error = static_cast<double>(ours - run.layer_bytes) / static_cast<double>(run.layer_bytes);
    EXPECT_LE(std::abs(error), 0.02) << run.name << " " << run.attn << " b" << run.b << " s" << run.s << ": zsim "
                                     << ours << " B, transformers " << run.layer_bytes << " B";
    ++compared;
    exact += ours == run.layer_bytes;
    largest = std::max(largest, std::abs(error));
  }
  EXPECT_GE(compared, 30);  // 17 families at two shapes, and eager for some
  std::cout << compared << " probe runs: " << exact << " to the byte, largest |error| " << 100 * largest << "%\n";
}

// The stage-3 fetch units of one Qwen3-30B-A3B layer's mixture of experts: router and experts as two modules, or one
// with the sparse block a leaf module (set_z3_leaf_modules).
std::vector<std::string> mlp_units(ModelSpec m) {
  m.layers = 1;
  const Plan p = make_plan(test::scenario(m, 3, 1, 2));
  std::vector<std::string> out;
  for (const FetchUnit& u : p.units)
    if (u.layer == 0 && u.name.rfind("L0.mlp.", 0) == 0 && u.name != "L0.mlp.norm") out.push_back(u.name);
  return out;
}

TEST(Zoo, AMoeBlockSetAsALeafModuleIsOneStage3FetchUnit) {
  ModelSpec m = read_config("qwen3-30b-a3b");
  EXPECT_EQ(mlp_units(m), (std::vector<std::string>{"L0.mlp.router", "L0.mlp.experts"}));
  m.z3_leaf_modules = "Qwen3MoeSparseMoeBlock";
  EXPECT_EQ(mlp_units(m), (std::vector<std::string>{"L0.mlp.moe"}));
}

TEST(Zoo, DeepSeeksExpertsAndLatentAttentionAreRefusedByName) {
  for (const auto& [name, key] : kRefused) {
    try {
      read_config(name);
      ADD_FAILURE() << name << " was read as a dense model";
    } catch (const InputError& e) {
      EXPECT_EQ(e.where().key_path, key) << name;
      EXPECT_GT(e.where().line, 1) << name;
    }
  }
}

}  // namespace
}  // namespace zsim
