// The zrun binary as a user meets it, on a machine without GPUs (CI): argument and scenario errors exit 2
// with a message, before anything is launched.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/command_run.hpp"

namespace {
namespace fs = std::filesystem;

using ZrunRun = zsim::test::CommandRun;

ZrunRun zrun_with_env(const std::string& env, const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("zrun_cli_test_" + std::to_string(::getpid()));
  ZrunRun r = zsim::test::run_command(env + " " + std::string(ZRUN_BIN) + " " + args, dir);
  fs::remove_all(dir);
  return r;
}

ZrunRun zrun(const std::string& args) { return zrun_with_env("", args); }

TEST(ZrunCli, HelpListsTheOptionsAndExitsZero) {
  const ZrunRun r = zrun("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--nproc-per-node", "--here", "--gpus-per-node", "--force", "--schedule", "--steps",
                           "--share-gpu"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(ZrunCli, CalibrateHelpListsItsOptionsAndExitsZero) {
  const ZrunRun r = zrun("calibrate --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--out", "--quick", "--base", "--nproc-per-node", "--gpus-per-node", "--nvme-dir"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(ZrunCli, CalibrateRefusesAnOutputNameThatIsNoProfileName) {
  const ZrunRun r = zrun("calibrate --out 'my profile.yaml'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("my profile"), std::string::npos) << r.err;
}

TEST(ZrunCli, CalibrateAnUnknownFlagExitsTwoNamingIt) {
  const ZrunRun r = zrun("calibrate --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST(ZrunCli, AnUnknownFlagExitsTwoNamingIt) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-1xh100.yaml --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST(ZrunCli, NoScenarioExitsTwo) {
  const ZrunRun r = zrun("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no scenario given"), std::string::npos) << r.err;
}

TEST(ZrunCli, AMissingScenarioFileExitsTwoNamingIt) {
  const ZrunRun r = zrun("no/such/scenario.yaml --nproc-per-node 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no/such/scenario.yaml"), std::string::npos) << r.err;
}

TEST(ZrunCli, ABadOverrideExitsTwoWithZsimsError) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-1xh100.yaml --nproc-per-node 1 --set training.no_such_key=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("training.no_such_key"), std::string::npos) << r.err;
}

TEST(ZrunCli, AClusterThatIsNotTheLaunchedWorldExitsTwoSayingSo) {
  const ZrunRun r = zrun("scenarios/llama2-7b-zero2-8xa100.yaml --nproc-per-node 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("= 8 ranks, but 2 rank(s) were launched (--nproc-per-node 2)"), std::string::npos) << r.err;
}

TEST(ZrunCli, AScenarioThatDoesNotFitExitsTwoNamingPeakAndCapacity) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-1xh100.yaml --nproc-per-node 1 --set cluster.gpu.hbm_bytes=1MiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not fit: gpu peak"), std::string::npos) << r.err;
}

TEST(ZrunCli, AWorkerWithAMalformedFaultSpecificationExitsTwoNamingIt) {
  // A worker of a world of one, as zrun's launcher would start it.
  const ZrunRun r = zrun_with_env("ZRUN_FAULT=rank=x ZRUN_RANK=0 ZRUN_WORLD_SIZE=1 ZRUN_LOCAL_RANK=0",
                              "runtime/scenarios/tiny-zero3-1xh100.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ZRUN_FAULT='rank=x'"), std::string::npos) << r.err;
}

// offload_param on NVMe runs (issue 14): its swap directory is checked before launch like the optimizer's, and
// without --nvme-dir it is offload_param.nvme_path that is named.
TEST(ZrunCli, ParamOffloadToNvmeIntoAMissingDirectoryExitsTwoNamingIt) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-offload-1xh100.yaml --nproc-per-node 1 --set "
                         "deepspeed.zero_optimization.offload_param.device=nvme --nvme-dir /no/such/zrun_nvme_dir");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/no/such/zrun_nvme_dir"), std::string::npos) << r.err;
}

TEST(ZrunCli, ParamOffloadToNvmeWithoutADirectoryNamesOffloadParamsNvmePath) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-offload-1xh100.yaml --nproc-per-node 1 --set "
                         "deepspeed.zero_optimization.offload_param.device=nvme");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("offload_param.nvme_path"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--nvme-dir"), std::string::npos) << r.err;
}

// hpZ with the parameters on NVMe fails in DeepSpeed (the secondary partition is allocated on the offload device):
// refused before launch, naming the key. With offload_param cpu it runs (zrun_offload_gpu_test).
TEST(ZrunCli, HpzWithParamOffloadToNvmeExitsTwoNamingTheKey) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-offload-1xh100.yaml --nproc-per-node 2 --set "
                         "cluster.gpus_per_node=2 --set deepspeed.zero_optimization.zero_hpz_partition_size=2 --set "
                         "deepspeed.zero_optimization.offload_param.device=nvme --nvme-dir /tmp");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("zero_hpz_partition_size"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no device 'nvme'"), std::string::npos) << r.err;
}

TEST(ZrunCli, NvmeOffloadIntoAMissingDirectoryExitsTwoNamingIt) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-offload-1xh100.yaml --nproc-per-node 1 --set "
                         "deepspeed.zero_optimization.offload_optimizer.device=nvme --nvme-dir /no/such/zrun_nvme_dir");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("/no/such/zrun_nvme_dir"), std::string::npos) << r.err;
}

TEST(ZrunCli, NvmeOffloadWithoutADirectoryExitsTwoAskingForOne) {
  const ZrunRun r = zrun("runtime/scenarios/tiny-zero3-offload-1xh100.yaml --nproc-per-node 1 --set "
                         "deepspeed.zero_optimization.offload_optimizer.device=nvme");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--nvme-dir"), std::string::npos) << r.err;
}

}  // namespace
