// zrun calibrate on this machine's GPUs (skips with a message where there are fewer than 2, as in CI; with
// ZRUN_TEST_SHARE_GPU=2 both ranks share GPU 0 through calibrate's --share-gpu): calibrate --quick on 2 ranks times
// every collective kind at every quick size on the GPU alone, and writes a profile that loads, whose record a refit
// reads back.
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/calibrate/measurements.hpp"
#include "runtime/tests/zrun_gpu_run.hpp"
#include "tests/command_run.hpp"

namespace {
namespace fs = std::filesystem;

TEST(ZrunCalibrateGpu, TwoRanksTimeEveryCollectiveKindAtEverySizeOnTheGpuAloneAndWriteAProfileThatLoads) {
  if (zrun::test::test_gpus() < 2)
    GTEST_SKIP() << "fewer than 2 GPUs (or ZRUN_TEST_SHARE_GPU=2 on one): calibrate's collectives need 2 ranks";
  const fs::path dir = fs::temp_directory_path() / ("zrun_calibrate_gpu_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string shared = zrun::test::shared_gpu_ranks() > 0 ? " --share-gpu" : "";
  const zsim::test::CommandRun r = zsim::test::run_command(
      zrun::test::zrun_bin() + " calibrate --quick --nproc-per-node 2" + shared + " --out " +
          (dir / "calib-2.yaml").string() + " --log " + (dir / "calibrate.log").string() + " --nvme-dir " + dir.string(),
      dir / "run");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << zsim::test::slurp(dir / "calibrate.log");

  const zrun::calibrate::Measurements m = zrun::calibrate::measurements_from_profile((dir / "calib-2.yaml").string());
  EXPECT_EQ(m.gpus, 2);
  EXPECT_EQ(m.collectives_timing, "gpu_alone");
  ASSERT_TRUE(m.collectives.count("nvlink")) << zsim::test::slurp(dir / "calibrate.log");
  std::set<std::pair<int, double>> seen;  // (kind, size)
  for (const zrun::calibrate::CollectiveSample& s : m.collectives.at("nvlink")) {
    EXPECT_EQ(s.n, 2);
    EXPECT_GT(s.seconds, 0) << zsim::to_string(s.kind) << " " << s.size_bytes;
    seen.insert({static_cast<int>(s.kind), s.size_bytes});
  }
  EXPECT_EQ(seen.size(), 6u * 5u);  // six kinds at 1 KiB, 16 KiB, 256 KiB, 4 MiB, 64 MiB
  const zsim::ClusterSpec c = zrun::calibrate::load_profile_cluster("calib-2", dir.string());
  EXPECT_EQ(c.efficiency.nvlink_busbw.count("all_gather"), 1u);
  EXPECT_NE(zsim::test::slurp(dir / "calibrate.log").find("issued as they come"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
