// PCIe and NVMe transfer cost models against latency + bytes / bandwidth.
#include "cost_models/transfer_cost.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

TEST(PcieCopy, PinnedIsLatencyPlusBytesOverLinkBandwidth) {
  EXPECT_DOUBLE_EQ(pcie_copy_s(1'000'000'000, 25, 2e-6, true, 0.5), 2e-6 + 1e9 / 25e9);
}

TEST(PcieCopy, PageableRunsAtTheConfiguredFractionOfPinned) {
  const Bytes b = 2'000'000'000;
  const double pinned = pcie_copy_s(b, 25, 0, true, 0.4);
  const double pageable = pcie_copy_s(b, 25, 0, false, 0.4);
  EXPECT_DOUBLE_EQ(pageable, pinned / 0.4);
}

TEST(NvmeTransfer, IsBytesOverDeviceBandwidth) {
  EXPECT_DOUBLE_EQ(nvme_s(6'000'000'000, 6.0), 1.0);
  EXPECT_EQ(nvme_s(0, 6.0), 0.0);
  EXPECT_THROW(nvme_s(1, 0.0), std::invalid_argument);
}

TEST(DeviceCopy, ReadsAndWritesEveryByteAtAchievedHbmBandwidth) {
  // 1.6 GB copied at 4000 GB/s x 0.8: 3.2 GB of traffic at 3.2e12 B/s = 1 ms.
  EXPECT_DOUBLE_EQ(device_copy_s(1'600'000'000, 4000, 0.8), 1e-3);
  EXPECT_EQ(device_copy_s(0, 4000, 0.8), 0.0);
  EXPECT_THROW(device_copy_s(1, 0.0, 0.8), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
