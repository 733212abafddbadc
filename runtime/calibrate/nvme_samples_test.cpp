// calibrate's NVMe figures from the rounds of every moment it sampled the disk at.
#include "runtime/calibrate/nvme_samples.hpp"

#include <gtest/gtest.h>

#include "sim/scenario/scenario.hpp"

namespace zrun::calibrate {
namespace {

// Sizes 64 KiB (one request), 1 MiB (both lines), 16 MiB (many requests); each round's seconds as given.
NvmeSamples two_moments(const std::vector<double>& first, const std::vector<double>& second) {
  NvmeSamples s;
  s.sizes = {64 << 10, zsim::kNvmeRequestBytes, 16 << 20};
  s.path = "/scratch";
  s.direct = true;
  s.at_s = {100.0, 190.0};
  for (std::size_t i = 0; i < s.sizes.size(); ++i) {
    std::vector<double> rounds = first;
    rounds.insert(rounds.end(), second.begin(), second.end());
    for (double& t : rounds) t *= static_cast<double>(i + 1);
    s.read_s.push_back(rounds);
    for (double& t : rounds) t *= 0.5;
    s.write_s.push_back(rounds);
  }
  return s;
}

TEST(NvmeSamples, EachSizeIsTheMedianOverEveryMomentsRounds) {
  // A slow first moment and a fast second one: the median sits between them, not at either moment's own median.
  Measurements m;
  add_nvme_figures(two_moments({4, 4, 5}, {1, 2, 2}), m);
  ASSERT_EQ(m.nvme_read.size(), 2u);
  EXPECT_DOUBLE_EQ(m.nvme_read[0].bytes, static_cast<double>(zsim::kNvmeRequestBytes));
  EXPECT_DOUBLE_EQ(m.nvme_read[0].seconds, 2 * 3.0);  // sorted 1 2 2 4 4 5: (2 + 4) / 2, times the size's factor 2
  EXPECT_DOUBLE_EQ(m.nvme_read[1].seconds, 3 * 3.0);
  EXPECT_DOUBLE_EQ(m.nvme_write[1].seconds, 3 * 1.5);
}

TEST(NvmeSamples, TransfersUpToOneRequestGoToTheOneRequestLineAndOneMiBToBoth) {
  Measurements m;
  add_nvme_figures(two_moments({1, 1, 1}, {1, 1, 1}), m);
  ASSERT_EQ(m.nvme_read_one.size(), 2u);
  EXPECT_DOUBLE_EQ(m.nvme_read_one[0].bytes, 64 << 10);
  EXPECT_DOUBLE_EQ(m.nvme_read_one[1].bytes, static_cast<double>(zsim::kNvmeRequestBytes));
  ASSERT_EQ(m.nvme_write.size(), 2u);
  EXPECT_DOUBLE_EQ(m.nvme_write[1].bytes, 16 << 20);
}

TEST(NvmeSamples, TheMomentsTheirSpanAndTheFilesGoIntoTheMeasurements) {
  Measurements m;
  add_nvme_figures(two_moments({1}, {2}), m);
  EXPECT_EQ(m.nvme_moments, 2);
  EXPECT_DOUBLE_EQ(m.nvme_moments_apart_s, 90.0);
  EXPECT_EQ(m.nvme_path, "/scratch");
  EXPECT_TRUE(m.nvme_direct);
}

TEST(NvmeSamples, OneSlowMomentOfThreeLeavesTheMedianAtTheOthers) {
  // calibrate's three moments (before the GPU benchmarks, after them, after CPU Adam): a size's figure is the median
  // of nine rounds, so one moment that caught the disk slow does not move it.
  NvmeSamples s = two_moments({5, 5, 5}, {2, 2, 2});
  s.at_s.push_back(250.0);
  for (std::size_t i = 0; i < s.sizes.size(); ++i)
    for (double t : {2.0, 2.0, 3.0}) {
      s.read_s[i].push_back(t * static_cast<double>(i + 1));
      s.write_s[i].push_back(t * static_cast<double>(i + 1) * 0.5);
    }
  Measurements m;
  add_nvme_figures(s, m);
  EXPECT_EQ(m.nvme_moments, 3);
  EXPECT_DOUBLE_EQ(m.nvme_moments_apart_s, 150.0);
  ASSERT_EQ(m.nvme_read.size(), 2u);
  EXPECT_DOUBLE_EQ(m.nvme_read[1].seconds, 3 * 2.0);  // sorted 2 2 2 2 2 3 5 5 5: 2, times the size's factor 3
}

TEST(NvmeSamples, AFailedMomentGivesNoFigures) {
  NvmeSamples s = two_moments({1}, {2});
  s.error = "io_uring: Operation not permitted";
  Measurements m;
  add_nvme_figures(s, m);
  EXPECT_TRUE(m.nvme_read.empty());
  EXPECT_TRUE(m.nvme_write_one.empty());
  EXPECT_EQ(m.nvme_moments, 0);
}

}  // namespace
}  // namespace zrun::calibrate
