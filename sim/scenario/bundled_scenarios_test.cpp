// Every scenario shipped in scenarios/ loads and validates (tests run from the source root).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "sim/scenario/scenario_parse.hpp"

namespace zsim {
namespace fs = std::filesystem;

static std::vector<fs::path> bundled() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator("scenarios"))
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(BundledScenarios, EveryScenarioLoads) {
  auto files = bundled();
  ASSERT_GE(files.size(), 7u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    try {
      Scenario s = load_scenario(f.string());
      EXPECT_GT(s.world_size(), 0);
      // A user's ds_config carries keys zsim does not model; a model of a family not yet measured under DeepSpeed
      // (or a mixture of experts at stage 3) carries notes on its model; no other scenario warns.
      for (const std::string& w : s.warnings)
        EXPECT_TRUE(f.filename().string().find("ds-config") != std::string::npos ||
                    w.find("docs/architectures.md") != std::string::npos ||
                    w.find("model.z3_leaf_modules") != std::string::npos)
            << w;
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// Attention decides a long sequence's activation memory (flash keeps no s x s tensor), so no bundled
// scenario leaves it to the default.
TEST(BundledScenarios, EveryScenarioSaysWhichAttentionItUses) {
  for (const auto& f : bundled()) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("\n  attention: "), std::string::npos) << f << " does not set model.attention";
  }
}

TEST(BundledScenarios, TheMistral8kScenarioIsFlashWithoutCheckpointingOrDropout) {
  Scenario s = load_scenario("scenarios/mistral-7b-8k-zero3-8xh100.yaml");
  EXPECT_EQ(s.model.attention, Attention::flash);
  EXPECT_EQ(s.training.seq_len, 8192);
  EXPECT_EQ(s.training.activation_checkpointing, Checkpointing::none);
  EXPECT_EQ(s.model.attention_dropout, 0.0);
  EXPECT_EQ(s.model.hidden_dropout, 0.0);
}

TEST(BundledScenarios, TheReadmeScenarioIsLlama2_70bZero3On64H100) {
  Scenario s = load_scenario("scenarios/llama2-70b-zero3-64xh100.yaml");
  EXPECT_EQ(s.model.name, "llama2-70b");
  EXPECT_EQ(s.world_size(), 64);
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 80 * kGiB);
  EXPECT_EQ(s.zero.stage, 3);
}

TEST(BundledScenarios, TheZeroPlusPlusScenarioUsesAllThreeOn100GbpsInfiniBand) {
  Scenario s = load_scenario("scenarios/llama2-70b-zeropp-ib100.yaml");
  EXPECT_TRUE(s.zero.zero_quantized_weights);
  EXPECT_TRUE(s.zero.zero_quantized_gradients);
  EXPECT_EQ(s.zero.zero_hpz_partition_size, s.cluster.gpus_per_node);
  EXPECT_DOUBLE_EQ(s.cluster.links.ib_GBps, 12.5);  // 100 Gbit/s = 12.5 GB/s per GPU
}

// The profiles in scenarios/hardware/ (written by the timing work) load through cluster.profile.
TEST(BundledScenarios, EveryHardwareProfileLoads) {
  std::vector<std::string> names;
  if (fs::is_directory("scenarios/hardware"))
    for (const auto& entry : fs::directory_iterator("scenarios/hardware"))
      if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  if (names.empty()) GTEST_SKIP() << "no scenarios/hardware/*.yaml in this tree yet";
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    // A profile of a software stack's figures only (h200-deepspeed: efficiency keys) leaves the GPU to the scenario.
    std::ifstream in("scenarios/hardware/" + name + ".yaml");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const bool whole = text.find("\n  gpu:") != std::string::npos;
    try {
      Scenario s = parse_scenario("model: {preset: llama2-7b}\ncluster: {profile: " + name + ", nodes: 2" +
                                      (whole ? "" : ", gpu: h200-141gb, links: {ib_GBps: 50}") + "}\n",
                                  "scenarios/profile-check.yaml");
      EXPECT_EQ(s.cluster.profile, name);
      EXPECT_GT(s.cluster.gpu.hbm_bytes, 0);
      if (whole) EXPECT_GT(s.cluster.links.ib_GBps, 0);
    } catch (const InputError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace zsim
