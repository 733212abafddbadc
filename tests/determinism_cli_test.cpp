// Property (issue 3), end to end through the zsim binary: `zsim sweep --threads 1` and `--threads 4` write
// byte-identical CSV and print the same ranking; `zsim SCENARIO --json` twice writes identical JSON.
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace {
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ZsimDeterminism : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zsim_determinism_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs zsim from the source tree; returns its stdout, expects exit code 0.
  std::string zsim(const std::string& args) {
    const fs::path out = dir_ / "stdout";
    const std::string cmd = std::string("cd ") + ZSIM_SOURCE_DIR + " && " + ZSIM_BIN + " " + args + " >" +
                            out.string() + " 2>" + (dir_ / "stderr").string();
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << slurp(dir_ / "stderr");
    return slurp(out);
  }
  fs::path dir_;
};

TEST_F(ZsimDeterminism, SweepWithOneOrFourThreadsWritesIdenticalCsvAndRanking) {
  const std::string grid =
      "scenarios/llama2-70b-zeropp-ib100.yaml --set model.layers=4 "
      "--grid deepspeed.zero_optimization.zero_quantized_weights=false,true "
      "--grid deepspeed.zero_optimization.zero_hpz_partition_size=1,8 "
      "--grid training.micro_batch=1,2 --grid cluster.links.ib_GBps=12.5,25,50";
  const std::string one = zsim("sweep " + grid + " --threads 1 --csv " + (dir_ / "one.csv").string());
  const std::string four = zsim("sweep " + grid + " --threads 4 --csv " + (dir_ / "four.csv").string());
  const std::string csv = slurp(dir_ / "one.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 2 * 3);
  EXPECT_EQ(csv, slurp(dir_ / "four.csv"));
  EXPECT_EQ(one, four);
}

TEST_F(ZsimDeterminism, TheSameScenarioTwiceWritesIdenticalJson) {
  const std::string args = "scenarios/gpt-18b-zeropp-384xv100-ib100.yaml --json ";
  const std::string out_a = zsim(args + (dir_ / "a.json").string());
  const std::string out_b = zsim(args + (dir_ / "b.json").string());
  const std::string a = slurp(dir_ / "a.json");
  ASSERT_NE(a.find("\"tflops_per_gpu\""), std::string::npos);
  EXPECT_EQ(a, slurp(dir_ / "b.json"));
  EXPECT_EQ(out_a, out_b);
}

}  // namespace
