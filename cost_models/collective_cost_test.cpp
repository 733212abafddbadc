// Collective cost models against their closed forms and nccl-tests' bus-bandwidth definitions.
#include "cost_models/collective_cost.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace zsim {
namespace {

constexpr double kRel = 1e-12;
const AlphaBeta kLink{5e-6, 100e9};  // 5 us, 100 GB/s

TEST(BusBandwidthFactor, MatchesNcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::reduce_scatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_reduce, 8), 2 * 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_to_all, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::reduce, 8), 1.0);
}

TEST(BusBandwidthFactor, GroupOfOneMovesNothing) {
  EXPECT_EQ(busbw_factor(CollectiveKind::all_reduce, 1), 0.0);
  EXPECT_EQ(collective_s(CollectiveKind::all_gather, 1e9, 1, kLink), 0.0);
}

TEST(RingAllGather, IsNMinusOneStepsOfLatencyPlusOneShard) {
  const double S = 1 << 30;
  for (int n : {2, 8, 64, 1024}) {
    const double expected = (n - 1) * (kLink.latency_s + S / (n * kLink.bytes_per_s));
    EXPECT_NEAR(collective_s(CollectiveKind::all_gather, CollectiveAlgorithm::ring, S, n, kLink), expected,
                expected * kRel)
        << n;
  }
}

TEST(RingReduceScatter, CostsTheSameAsRingAllGather) {
  const double S = 3e8;
  EXPECT_DOUBLE_EQ(collective_s(CollectiveKind::reduce_scatter, S, 16, kLink),
                   collective_s(CollectiveKind::all_gather, S, 16, kLink));
}

TEST(RingAllReduce, IsReduceScatterPlusAllGather) {
  const double S = 1e9;
  const int n = 16;
  const double expected = 2 * (n - 1) * (kLink.latency_s + S / (n * kLink.bytes_per_s));
  EXPECT_NEAR(collective_s(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, S, n, kLink), expected,
              expected * kRel);
}

TEST(TreeAllReduce, IsTwoLogNLatencyPlusTwoSizesOverBandwidth) {
  const double S = 1e6;
  const int n = 100;  // ceil(log2 100) = 7
  const double expected = 2 * 7 * kLink.latency_s + 2 * S / kLink.bytes_per_s;
  EXPECT_NEAR(collective_s(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, S, n, kLink), expected,
              expected * kRel);
}

TEST(AllReduceAlgorithm, SmallMessagesTakeTheTreeLargeMessagesTheRing) {
  EXPECT_EQ(choose_algorithm(CollectiveKind::all_reduce, 4096, 256, kLink), CollectiveAlgorithm::tree);
  // n = 8: ring saves 2(n-1) - 2 ceil(log2 n) = 8 latencies less than the tree's extra 2S/(nB) once S > 16 MB.
  EXPECT_EQ(choose_algorithm(CollectiveKind::all_reduce, 4e9, 8, kLink), CollectiveAlgorithm::ring);
  const double small = collective_s(CollectiveKind::all_reduce, 4096, 256, kLink);
  EXPECT_LT(small, collective_s(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 4096, 256, kLink));
}

TEST(SmallMessageRegime, TimeIsLatencyBoundAndAlmostIndependentOfSize) {
  const double t1 = collective_s(CollectiveKind::all_gather, 1024, 8, kLink);
  const double t2 = collective_s(CollectiveKind::all_gather, 2048, 8, kLink);
  EXPECT_NEAR(t1, 7 * kLink.latency_s, 7 * kLink.latency_s * 0.01);
  EXPECT_LT((t2 - t1) / t1, 0.01);
}

TEST(LargeMessageRegime, AchievedBusBandwidthApproachesTheLink) {
  const double S = 64.0 * (1 << 30);
  const int n = 8;
  const double t = collective_s(CollectiveKind::all_gather, S, n, kLink);
  const double algbw = S / t;
  const double busbw = algbw * busbw_factor(CollectiveKind::all_gather, n);
  EXPECT_NEAR(busbw / kLink.bytes_per_s, 1.0, 1e-4);
}

TEST(AllToAll, IsPairwiseExchangeOfOneNthPerPeer) {
  const double S = 8e8;
  const int n = 8;
  const double expected = (n - 1) * (kLink.latency_s + S / (n * kLink.bytes_per_s));
  EXPECT_EQ(choose_algorithm(CollectiveKind::all_to_all, S, n, kLink), CollectiveAlgorithm::pairwise);
  EXPECT_NEAR(collective_s(CollectiveKind::all_to_all, S, n, kLink), expected, expected * kRel);
}

TEST(Broadcast, IsPipelinedRingOfFullSize) {
  const double S = 5e8;
  const int n = 4;
  const double expected = 3 * kLink.latency_s + S / kLink.bytes_per_s;
  EXPECT_NEAR(collective_s(CollectiveKind::broadcast, S, n, kLink), expected, expected * kRel);
}

TEST(HierarchicalAllToAll, IsIntraNodeThenInterNodeSteps) {
  const AlphaBeta nvl{2e-6, 300e9}, ib{5e-6, 50e9};
  const double s_intra = 1e9, s_inter = 1e9 / 8;
  const int r = 8, k = 16;
  const double expected = (r - 1) * (nvl.latency_s + s_intra / (r * nvl.bytes_per_s)) +
                          (k - 1) * (ib.latency_s + s_inter / (k * ib.bytes_per_s));
  EXPECT_NEAR(hierarchical_all_to_all_s(s_intra, r, nvl, s_inter, k, ib), expected, expected * kRel);
}

TEST(HierarchicalAllGather, IsInterNodeShardGatherThenIntraNodeGather) {
  const AlphaBeta nvl{2e-6, 300e9}, ib{5e-6, 50e9};
  const double S = 2e9;
  const int r = 8, k = 4;
  const double expected = (k - 1) * (ib.latency_s + (S / r) / (k * ib.bytes_per_s)) +
                          (r - 1) * (nvl.latency_s + S / (r * nvl.bytes_per_s));
  EXPECT_NEAR(hierarchical_all_gather_s(S, r, nvl, k, ib), expected, expected * kRel);
}

TEST(TwoLevelLatency, ARingAcrossNodesCrossesTheNetworkOncePerNodeBoundary) {
  // 4 nodes x 8 GPUs: 31 ring steps, 3 of them between nodes (NCCL tuning model: nInterSteps = nNodes - 1).
  const CollectiveLink link{2e-6, 6e-6, 100e9};
  const LatencySteps st = latency_steps(CollectiveKind::all_gather, CollectiveAlgorithm::ring, 32, 4);
  EXPECT_EQ(st.intra, 28);
  EXPECT_EQ(st.inter, 3);
  const double S = 1e9;
  const double expected = 28 * 2e-6 + 3 * 6e-6 + S * 31 / 32 / 100e9;
  EXPECT_NEAR(collective_s(CollectiveKind::all_gather, CollectiveAlgorithm::ring, S, 32, 4, link), expected,
              expected * kRel);
}

TEST(TwoLevelLatency, RingAllReduceMakesTwoPasses) {
  const LatencySteps st = latency_steps(CollectiveKind::all_reduce, CollectiveAlgorithm::ring, 32, 4);
  EXPECT_EQ(st.intra, 56);
  EXPECT_EQ(st.inter, 6);
}

TEST(TwoLevelLatency, TreeAllReduceClimbsTheNodeChainThenLogKNetworkLevels) {
  const LatencySteps st = latency_steps(CollectiveKind::all_reduce, CollectiveAlgorithm::tree, 1024, 128);
  EXPECT_EQ(st.intra, 2 * 7);
  EXPECT_EQ(st.inter, 2 * 7);
}

TEST(TwoLevelLatency, PairwiseAllToAllTalksToEveryPeerOnce) {
  const LatencySteps st = latency_steps(CollectiveKind::all_to_all, CollectiveAlgorithm::pairwise, 32, 4);
  EXPECT_EQ(st.intra, 7);
  EXPECT_EQ(st.inter, 24);
}

TEST(TwoLevelLatency, AFlatGroupWithEqualLatenciesIsTheSingleLinkForm) {
  const CollectiveLink link{kLink.latency_s, kLink.latency_s, kLink.bytes_per_s};
  for (auto kind : {CollectiveKind::all_gather, CollectiveKind::all_reduce, CollectiveKind::all_to_all})
    EXPECT_DOUBLE_EQ(collective_s(kind, CollectiveAlgorithm::ring, 1e8, 16, 16, link),
                     collective_s(kind, CollectiveAlgorithm::ring, 1e8, 16, kLink));
}

TEST(TwoLevelLatency, RejectsAGroupThatDoesNotSplitEvenlyOverItsNodes) {
  EXPECT_THROW(latency_steps(CollectiveKind::all_gather, CollectiveAlgorithm::ring, 12, 5), std::invalid_argument);
}

TEST(CollectiveCost, RejectsAnEmptyGroup) {
  EXPECT_THROW(collective_s(CollectiveKind::all_gather, 1e6, 0, kLink), std::invalid_argument);
}

TEST(InterpolatedBusbw, IsTheMeasuredRateAtAMeasuredSize) {
  const std::vector<std::pair<double, double>> pts{{1024, 1}, {4096, 4}, {16384, 8}};  // GB/s
  EXPECT_NEAR(interpolated_busbw(pts, 4096), 4e9, 4e9 * kRel);
}

TEST(InterpolatedBusbw, IsLinearInLogSizeAndLogRateBetweenTwoSizes) {
  const std::vector<std::pair<double, double>> pts{{1024, 1}, {4096, 4}};
  EXPECT_NEAR(interpolated_busbw(pts, 2048), 2e9, 2e9 * 1e-9);  // halfway in log size: the geometric mean
}

TEST(InterpolatedBusbw, TakesTheNearestMeasuredRateBeyondTheMeasuredSizes) {
  const std::vector<std::pair<double, double>> pts{{1024, 1}, {4096, 4}};
  EXPECT_EQ(interpolated_busbw(pts, 16), 1e9);
  EXPECT_EQ(interpolated_busbw(pts, 1e12), 4e9);
}

TEST(InterpolatedBusbw, RejectsNoPointsAndARateThatIsNotPositive) {
  EXPECT_THROW(interpolated_busbw({}, 1024), std::invalid_argument);
  EXPECT_THROW(interpolated_busbw({{1024, 0}}, 1024), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
