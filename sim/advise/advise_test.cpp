// `zsim advise` as a user meets it (issue 41): the winner fits, stage 3 wins where only it fits, the ds_config it
// writes reads back to the same prediction, a model too large says what is short with a non-zero exit, and the
// list is ordered by tokens/s. Small models on one node, so that each search takes seconds.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/advise/advise.hpp"
#include "tests/command_run.hpp"

namespace {
namespace fs = std::filesystem;
using zsim::test::CommandRun;
using zsim::test::slurp;

// Llama-2 13B on 8 A100-40GB with 16 GB of host memory: stage 2 holds the whole 16-bit model (26 GB) beside its
// states; offloading the optimizer overflows the host; only stage 3 fits.
const char* kStage3Only = R"(model:
  preset: llama2-13b
training:
  micro_batch: 1
  grad_accum: 1
  seq_len: 1024
  precision: bf16
  activation_checkpointing: full
cluster:
  nodes: 1
  gpus_per_node: 8
  gpu: a100-40gb
  host: {memory_bytes: 16GB, cores: 64}
  links: {nvlink_GBps: 300, pcie_GBps: 25, ib_GBps: 25}
)";

// Llama-2 13B on one A100-40GB with 64 GB of host memory: 208 GB of model states fit nowhere.
const char* kTooLarge = R"(model:
  preset: llama2-13b
training:
  micro_batch: 1
  grad_accum: 1
  seq_len: 1024
cluster:
  nodes: 1
  gpus_per_node: 1
  gpu: a100-40gb
  host: {memory_bytes: 64GB, cores: 64}
  links: {nvlink_GBps: 300, pcie_GBps: 25, ib_GBps: 25}
)";

class Advise : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zsim_advise_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CommandRun zsim(const std::string& args) { return zsim::test::run_command(std::string(ZSIM_BIN) + " " + args, dir_); }
  fs::path file(const std::string& name, const std::string& contents) {
    fs::path p = dir_ / name;
    std::ofstream(p) << contents;
    return p;
  }
  nlohmann::json advise(const std::string& scenario_text, const std::string& extra = "") {
    const fs::path s = file("s.yaml", scenario_text);
    const CommandRun r = zsim("advise " + s.string() + " --json " + (dir_ / "a.json").string() + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(slurp(dir_ / "a.json"));
  }
  fs::path dir_;
};

TEST_F(Advise, TheWinnerFitsWithTheMargin) {
  const nlohmann::json j = advise(kStage3Only);
  ASSERT_FALSE(j.at("top").empty());
  EXPECT_LE(j["top"][0]["gpu_peak_bytes"].get<double>(), 0.95 * 40.0 * (1ull << 30));
}

TEST_F(Advise, StageThreeWinsWhereOnlyItFits) {
  const nlohmann::json j = advise(kStage3Only);
  EXPECT_EQ(j["ds_config"]["zero_optimization"]["stage"], 3);
  for (const auto& t : j.at("top")) EXPECT_EQ(t["configuration"].get<std::string>().rfind("stage 3,", 0), 0u) << t;
}

TEST_F(Advise, TheDsConfigReadsBackToTheSamePrediction) {
  const fs::path s = file("s.yaml", kStage3Only);
  const fs::path ds = dir_ / "ds_config.json";
  CommandRun r = zsim("advise " + s.string() + " --out " + ds.string() + " --json " + (dir_ / "a.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json a = nlohmann::json::parse(slurp(dir_ / "a.json"));
  // The user's scenario with its DeepSpeed settings taken from the written file (checkpointing is the model's).
  const std::string round_trip = std::string(R"(model:
  preset: llama2-13b
training:
  seq_len: 1024
  activation_checkpointing: )") + a["activation_checkpointing"].get<std::string>() + R"(
cluster:
  nodes: 1
  gpus_per_node: 8
  gpu: a100-40gb
  host: {memory_bytes: 16GB, cores: 64}
  links: {nvlink_GBps: 300, pcie_GBps: 25, ib_GBps: 25}
deepspeed:
  ds_config: ds_config.json
)";
  const fs::path rt = file("rt.yaml", round_trip);
  r = zsim(rt.string() + " --json " + (dir_ / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(slurp(dir_ / "r.json"));
  EXPECT_DOUBLE_EQ(report["time"]["tokens_per_s"].get<double>(), a["top"][0]["tokens_per_s"].get<double>());
}

TEST_F(Advise, AModelThatFitsNothingSaysWhatIsShortAndExitsNonZero) {
  const fs::path s = file("s.yaml", kTooLarge);
  const fs::path ds = dir_ / "ds_config.json";
  const CommandRun r = zsim("advise " + s.string() + " --out " + ds.string());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("no configuration fits: the smallest GPU peak"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" of 40.0 GiB"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ds));
}

TEST_F(Advise, BadInputGetsTheScenarioErrors) {
  std::string bad = kStage3Only;
  bad.replace(bad.find("micro_batch: 1"), 14, "micro_batch: -1");
  const fs::path s = file("s.yaml", bad);
  const CommandRun r = zsim("advise " + s.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("s.yaml:4:"), std::string::npos) << r.err;
}

TEST_F(Advise, TheTopListIsOrderedByTokensPerSecond) {
  std::string batch8 = kStage3Only;
  batch8.replace(batch8.find("grad_accum: 1"), 13, "grad_accum: 4");
  const nlohmann::json j = advise(batch8);
  ASSERT_GE(j.at("top").size(), 2u);
  for (std::size_t i = 1; i < j["top"].size(); ++i)
    EXPECT_GE(j["top"][i - 1]["tokens_per_s"].get<double>(), j["top"][i]["tokens_per_s"].get<double>());
}

TEST(AdviseRanking, FittingEntriesBestFirstAndMisfitsLeftOut) {
  using namespace zsim;
  std::vector<AdviseEntry> e(3);
  for (auto& x : e) x.point.valid = x.point.fits = true;
  e[0].point.tokens_per_s = 10;
  e[1].point.tokens_per_s = 30;
  e[2].point.tokens_per_s = 20;
  e[2].point.gpu_peak_bytes = 99;  // over 95% of 100
  EXPECT_EQ(rank_entries(e, 100, 0.05), (std::vector<std::size_t>{1, 0}));
}

}  // namespace
