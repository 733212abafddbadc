// Specification of the per-GPU communication volume formulas (conventions in docs/report-schema.md).
#include "sim/report/comm_volume.hpp"

#include <gtest/gtest.h>

using namespace zsim;

namespace {
const ProcessGroup kWorld2x8{"world", 16, 8, 1};        // 2 nodes x 8 GPUs
const ProcessGroup kIntraNode{"intra_node", 8, 8, 1};   // one node
const ProcessGroup kInterNode{"inter_node", 2, 1, 8};   // one GPU per node, 2 nodes
}  // namespace

TEST(BytesSentPerGpu, AllGatherReduceScatterAllToAllBroadcastSendSTimesNMinusOneOverN) {
  const Bytes S = 1600;
  for (CollectiveKind k : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                           CollectiveKind::all_to_all, CollectiveKind::broadcast})
    EXPECT_EQ(bytes_sent_per_gpu(k, S, 16), S * 15 / 16) << to_string(k);
}

// ncclReduce (ring, pipelined): every rank but the root sends the buffer once; averaged over the ranks
// (the roots rotate over DeepSpeed's per-owner reduces) that is S (N-1)/N per GPU.
TEST(BytesSentPerGpu, ReduceSendsTheBufferFromEveryRankButTheRoot) {
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::reduce, 1600, 16), 1600 * 15 / 16);
}

TEST(BytesSentPerGpu, AllReduceSendsTwiceAsMuch) {
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::all_reduce, 1600, 16), 2 * 1600 * 15 / 16);
}

TEST(BytesSentPerGpu, GroupOfOneSendsNothing) {
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::all_reduce, 1 << 20, 1), 0);
}

TEST(BytesSentPerGpu, RoundsToNearestByte) {
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::all_gather, 10, 3), 7);  // 20/3 = 6.67
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::all_gather, 4, 3), 3);   // 8/3 = 2.67
}

TEST(BytesSentPerGpu, DoesNotOverflowForTerabyteBuffersOnLargeGroups) {
  const Bytes S = 4 * (Bytes{1} << 40);  // 4 TiB
  EXPECT_EQ(bytes_sent_per_gpu(CollectiveKind::all_reduce, S, 65536), 2 * (S / 65536) * 65535);
}

TEST(BytesSentPerGpu, RejectsEmptyGroup) {
  EXPECT_THROW(bytes_sent_per_gpu(CollectiveKind::all_gather, 8, 0), std::invalid_argument);
}

TEST(CrossNodeBytesPerGpu, RingCollectivesCrossSTimesKMinusOneOverKTimesMembersPerNode) {
  const Bytes S = 1600;  // k = 2 nodes, r_g = 8: S (k-1)/(k r_g) = S/16
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::all_gather, S, kWorld2x8), S / 16);
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::reduce_scatter, S, kWorld2x8), S / 16);
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::broadcast, S, kWorld2x8), S / 16);
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::all_reduce, S, kWorld2x8), 2 * S / 16);
}

TEST(CrossNodeBytesPerGpu, AllToAllSendsTheOtherNodesShareOfItsBuffer) {
  const ProcessGroup world4x8{"world", 32, 8, 1};
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::all_to_all, 1600, world4x8), 1600 * 3 / 4);
}

TEST(CrossNodeBytesPerGpu, GroupInsideOneNodeCrossesNothing) {
  for (CollectiveKind k : {CollectiveKind::all_gather, CollectiveKind::all_reduce, CollectiveKind::all_to_all})
    EXPECT_EQ(cross_node_bytes_per_gpu(k, 1 << 20, kIntraNode), 0) << to_string(k);
}

TEST(CrossNodeBytesPerGpu, InterNodeGroupWithOneMemberPerNodeSendsEverythingAcross) {
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::all_to_all, 1000, kInterNode),
            bytes_sent_per_gpu(CollectiveKind::all_to_all, 1000, kInterNode.size));
  EXPECT_EQ(cross_node_bytes_per_gpu(CollectiveKind::all_gather, 1000, kInterNode), 500);
}

TEST(CrossNodeBytesPerGpu, PlainZero3StepCrossesThreeMTimesKMinusOneOverKPerNode) {
  // ZeRO-3: forward all-gather M, backward all-gather M, gradient reduce-scatter M, all on the world group.
  const Bytes M = 7'000'000'000LL * 2;  // 7B params in bf16
  const int gpus_per_node = 8;
  for (int k : {2, 4, 8}) {
    const ProcessGroup world{"world", k * gpus_per_node, gpus_per_node, 1};
    const Bytes per_gpu = 2 * cross_node_bytes_per_gpu(CollectiveKind::all_gather, M, world) +
                          cross_node_bytes_per_gpu(CollectiveKind::reduce_scatter, M, world);
    EXPECT_NEAR(static_cast<double>(per_gpu * gpus_per_node), 3.0 * M * (k - 1) / k, 3.0 * gpus_per_node)
        << k << " nodes";
  }
}
