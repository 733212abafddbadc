// The zsim binary as a user meets it: exit codes, where messages go, and that a failed run writes nothing.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/command_run.hpp"

namespace {
namespace fs = std::filesystem;

using CliRun = zsim::test::CommandRun;
using zsim::test::slurp;

class ZsimCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zsim_cli_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun zsim(const std::string& args) { return zsim::test::run_command(std::string(ZSIM_BIN) + " " + args, dir_); }
  fs::path file(const std::string& name, const std::string& contents = "") {
    fs::path p = dir_ / name;
    if (!contents.empty()) std::ofstream(p) << contents;
    return p;
  }
  fs::path dir_;
};

TEST_F(ZsimCli, BundledScenarioPrintsASummaryAndExitsZero) {
  CliRun r = zsim("scenarios/llama2-70b-zero3-64xh100.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("llama2-70b"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x 64 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 3"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

// --both-runtimes: the report, then the scenario under DeepSpeed and under zrun side by side. A DeepSpeed case with
// the fitted host figures: DeepSpeed's step is the host's and longer than zrun's, which has no such host.
TEST_F(ZsimCli, BothRuntimesPrintsDeepSpeedBesideZrunWithTheHostThatBinds) {
  CliRun r = zsim("validate/deepspeed/cases/l150m-z2-w1-mb4-s2048-sdpa/scenario.yaml --both-runtimes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto table = r.out.find("both runtimes");
  ASSERT_NE(table, std::string::npos) << r.out;
  const auto ds = r.out.find("  deepspeed ", table), zr = r.out.find("  zrun ", table);
  ASSERT_NE(ds, std::string::npos) << r.out;
  ASSERT_NE(zr, std::string::npos) << r.out;
  EXPECT_LT(ds, zr);
  EXPECT_NE(r.out.substr(ds, zr - ds).find("(the host binds)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DeepSpeed's step is "), std::string::npos) << r.out;
  // Without the flag, no such table.
  EXPECT_EQ(zsim("validate/deepspeed/cases/l150m-z2-w1-mb4-s2048-sdpa/scenario.yaml").out.find("both runtimes"),
            std::string::npos);
}

// Every committed DeepSpeed case's scenario is one zsim accepts (make_cases.py writes them; a topology zsim rejects,
// e.g. hpZ's partition across one-GPU nodes, would otherwise surface only when its run is validated).
TEST_F(ZsimCli, EveryDeepSpeedCaseScenarioLoadsAndPlans) {
  int cases = 0;
  for (const auto& entry : fs::directory_iterator("validate/deepspeed/cases")) {
    const fs::path scenario = entry.path() / "scenario.yaml";
    if (!fs::exists(scenario)) continue;
    ++cases;
    const CliRun r = zsim(scenario.string());
    EXPECT_EQ(r.exit_code, 0) << scenario << ": " << r.err;
  }
  EXPECT_GT(cases, 0);
}

TEST_F(ZsimCli, JsonFileHoldsTheReportWithTheResolvedScenarioAndTime) {
  fs::path json = file("out.json");
  CliRun r = zsim("scenarios/llama2-70b-zero3-64xh100.yaml --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["format"], "zsim.report");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["scenario"]["model"]["layers"], 80);
  EXPECT_EQ(j["scenario"]["zero_optimization"]["reduce_bucket_size"], 8192LL * 8192);  // auto = hidden^2
  EXPECT_GT(j["memory"]["gpu"]["peak"].get<long long>(), 0);
  EXPECT_GT(j["time"]["step_s"].get<double>(), 0.0);
  EXPECT_TRUE(j["fits"].get<bool>());
}

TEST_F(ZsimCli, SetOverridesAreRepeatable) {
  fs::path json = file("out.json");
  CliRun r = zsim("scenarios/llama2-7b-zero2-8xa100.yaml --set deepspeed.zero_optimization.stage=1 --set "
               "training.seq_len=1024 --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["scenario"]["zero_optimization"]["stage"], 1);
  EXPECT_EQ(j["scenario"]["training"]["seq_len"], 1024);
}

TEST_F(ZsimCli, BadScenarioExitsTwoWithLocatedMessageAndWritesNothing) {
  fs::path yaml = file("bad.yaml", "model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb}\ndeepspeed:\n"
                                   "  zero_optimization: {stage: 7}\n");
  fs::path json = file("out.json");
  CliRun r = zsim(yaml.string() + " --json " + json.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(yaml.string() + ":4:30: key 'deepspeed.zero_optimization.stage'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(json));
  // No temporary file left behind either.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".out.json.tmp"), std::string::npos) << e.path();
}

TEST_F(ZsimCli, UnknownOverrideKeyExitsTwoNamingIt) {
  fs::path json = file("out.json");
  CliRun r = zsim("scenarios/llama2-7b-zero2-8xa100.yaml --set deepspeed.zero_optimization.stag=3 --json " +
               json.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("deepspeed.zero_optimization.stag"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'stage'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(json));
}

TEST_F(ZsimCli, MissingScenarioFileExitsTwo) {
  CliRun r = zsim((dir_ / "nope.yaml").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, NoArgumentsIsAUsageError) {
  CliRun r = zsim("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, HelpExitsZero) {
  CliRun r = zsim("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--set"), std::string::npos) << r.out;
}

TEST_F(ZsimCli, WarningsGoToStderrAndTheRunSucceeds) {
  CliRun r = zsim("scenarios/llama3-8b-ds-config-16xa100.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: key 'deepspeed.optimizer'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("warning"), std::string::npos);
}

TEST_F(ZsimCli, PlanOnABadScenarioExitsTwoAndWritesNoSchedule) {
  fs::path yaml = file("bad.yaml", "model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb, gpus_per_node: 0}\n");
  fs::path sched = file("step.json");
  CliRun r = zsim("plan " + yaml.string() + " --emit-schedule " + sched.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("key 'cluster.gpus_per_node'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(sched));
}

TEST_F(ZsimCli, PlanNeedsEmitSchedule) {
  CliRun r = zsim("plan scenarios/llama2-7b-zero2-8xa100.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--emit-schedule"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, PlanWritesAScheduleThatReadsBackAsJson) {
  fs::path sched = file("step.json");
  CliRun r = zsim("plan scenarios/llama2-7b-zero2-8xa100.yaml --emit-schedule " + sched.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(slurp(sched));
  EXPECT_EQ(j["format"], "zsim.schedule");
  EXPECT_EQ(j["meta"]["world_size"], 8);
  EXPECT_GT(j["ops"].size(), 100u);
}

TEST_F(ZsimCli, TraceAndCsvFilesAreWrittenWhenAskedFor) {
  fs::path trace = file("t.json"), csv = file("ops.csv");
  CliRun r = zsim("scenarios/llama2-7b-zero2-8xa100.yaml --steps 1 --trace " + trace.string() + " --csv " +
                  csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto t = nlohmann::json::parse(slurp(trace));
  EXPECT_FALSE(t["traceEvents"].empty());
  EXPECT_EQ(slurp(csv).rfind("id,", 0), 0u);
}

TEST_F(ZsimCli, SweepRanksFittingConfigurationsAndWritesCsv) {
  fs::path csv = file("sweep.csv");
  CliRun r = zsim("sweep scenarios/llama2-7b-zero2-8xa100.yaml --steps 1 --threads 2 "
                  "--grid deepspeed.zero_optimization.stage=0,1,2,3 --grid training.micro_batch=1,2 --csv " +
                  csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 configurations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Best that fit"), std::string::npos) << r.out;
  std::istringstream rows(slurp(csv));
  std::string line;
  int n = 0;
  while (std::getline(rows, line)) ++n;
  EXPECT_EQ(n, 1 + 8);
}

// DeepSpeed accepts ZeRO++ keys at stages 1-2 and ignores them (engine._configure_zero_optimizer hands them
// to the stage-3 optimizer only): a sweep over stages with a ZeRO++ ds_config keeps every point.
TEST_F(ZsimCli, SweepOverStagesWithAZeroPlusPlusDsConfigKeepsEveryPoint) {
  fs::path ds = file("ds_config.json", R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true,
    "zero_quantized_gradients": true, "zero_hpz_partition_size": 8}})");
  fs::path scenario = file("zeropp.yaml", "model: {preset: llama2-7b}\ntraining: {seq_len: 1024}\n"
                                          "cluster: {profile: h100-hgx-ib400, nodes: 2}\n"
                                          "deepspeed: {ds_config: " + ds.string() + "}\n");
  fs::path csv = file("sweep.csv");
  CliRun r = zsim("sweep " + scenario.string() + " --steps 1 --threads 2 --grid deepspeed.zero_optimization.stage=2,3 "
                  "--csv " + csv.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 configurations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 invalid"), std::string::npos) << r.out;
}

// The job-runner contract: `--shard K/N` runs joined by `zsim sweep merge` are the unsharded sweep, CSV and
// ranking alike, through the real pipeline.
TEST_F(ZsimCli, ShardsJoinedByMergeGiveTheUnshardedSweepsCsvAndRanking) {
  const std::string sweep = "sweep scenarios/llama2-7b-zero2-8xa100.yaml --steps 1 --threads 1 "
                            "--grid deepspeed.zero_optimization.stage=0,1,2,3 --grid training.micro_batch=1,2,4 ";
  CliRun whole = zsim(sweep + "--csv " + file("whole.csv").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::string parts;
  for (int k = 1; k <= 3; ++k) {
    const fs::path part = file("part" + std::to_string(k) + ".csv");
    CliRun r = zsim(sweep + "--shard " + std::to_string(k) + "/3 --csv " + part.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    parts += " " + part.string();
  }
  CliRun merged = zsim("sweep merge" + parts + " --csv " + file("merged.csv").string());
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(slurp(file("merged.csv")), slurp(file("whole.csv")));
  EXPECT_EQ(merged.out, whole.out);
}

TEST_F(ZsimCli, MergeOfAnUnreadableCsvExitsTwoNamingIt) {
  CliRun r = zsim("sweep merge " + (dir_ / "no-such.csv").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such.csv"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, SweepRejectsAShardOutsideOneToN) {
  CliRun r = zsim("sweep scenarios/llama2-7b-zero2-8xa100.yaml --grid training.micro_batch=1,2 --shard 0/2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shard"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, SweepWhoseEveryPointIsInvalidExitsTwo) {
  CliRun r = zsim("sweep scenarios/llama2-7b-zero2-8xa100.yaml --grid deepspeed.zero_optimization.stagee=1,2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("stagee"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, SweepRejectsAGridWithoutValues) {
  CliRun r = zsim("sweep scenarios/llama2-7b-zero2-8xa100.yaml --grid deepspeed.zero_optimization.stage");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("KEY=V1,V2"), std::string::npos) << r.err;
}

TEST_F(ZsimCli, UnwritableJsonPathExitsTwo) {
  CliRun r = zsim("scenarios/llama2-7b-zero2-8xa100.yaml --json " + (dir_ / "no-such-dir" / "x.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot create an output file"), std::string::npos) << r.err;
}

}  // namespace
