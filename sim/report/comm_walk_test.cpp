// Specification of the communication walk: per-phase, per-collective and cross-node bytes per GPU.
#include "sim/report/comm_walk.hpp"

#include <gtest/gtest.h>

#include "sim/report/walk_test_util.hpp"

using namespace zsim;
using namespace zsim::testing;

namespace {

constexpr int kNodes = 2;
constexpr int kGpn = 8;
constexpr Bytes kLayerBytes = Bytes{1} << 22;  // bf16 bytes of one layer (powers of two: exact shares)
constexpr int kLayers = 4;
constexpr Bytes M = kLayerBytes * kLayers;  // model bytes in the training dtype

Schedule base() {
  Schedule s;
  s.meta.nodes = kNodes;
  s.meta.gpus_per_node = kGpn;
  s.meta.world_size = kNodes * kGpn;
  s.stream("compute");
  s.stream("comm");
  return s;
}

// Plain ZeRO-3 on the world group: per layer a forward all-gather, a backward all-gather and a
// gradient reduce-scatter of the layer's bytes.
Schedule zero3() {
  Schedule s = base();
  const int world = s.group({"world", kNodes * kGpn, kGpn, 1});
  for (int l = 0; l < kLayers; ++l)
    s.add(collective_op("fwd.ag", Phase::forward, CollectiveKind::all_gather, world, kLayerBytes));
  for (int l = 0; l < kLayers; ++l) {
    s.add(collective_op("bwd.ag", Phase::backward, CollectiveKind::all_gather, world, kLayerBytes));
    s.add(collective_op("bwd.rs", Phase::backward, CollectiveKind::reduce_scatter, world, kLayerBytes));
  }
  return s;
}

// ZeRO++: qwZ int8 forward all-gather on the world group (one fp32 scale per 2048 elements), hpZ bf16
// backward all-gather inside the node, qgZ int4 gradients: intra-node all-to-all, then an inter-node
// all-to-all of this rank's 1/8 share (one fp32 scale per 512 elements in both).
constexpr Bytes kLayerElems = kLayerBytes / 2;
constexpr Bytes kQwzScale = kLayerElems / 2048 * 4;
constexpr Bytes kQwz = kLayerElems + kQwzScale;
constexpr Bytes kQgzScale = kLayerElems / 512 * 4;
constexpr Bytes kQgzIntra = kLayerElems / 2 + kQgzScale;
constexpr Bytes kQgzInter = kQgzIntra / kGpn;
constexpr Bytes kQgzInterScale = kQgzScale / kGpn;

Schedule zeropp() {
  Schedule s = base();
  const int world = s.group({"world", kNodes * kGpn, kGpn, 1});
  const int hpz = s.group({"hpz", kGpn, kGpn, 1});
  const int intra = s.group({"intra_node", kGpn, kGpn, 1});
  const int inter = s.group({"inter_node", kNodes, 1, kGpn});
  for (int l = 0; l < kLayers; ++l)
    s.add(collective_op("fwd.qwz", Phase::forward, CollectiveKind::all_gather, world, kQwz, kQwzScale, DType::int8));
  for (int l = 0; l < kLayers; ++l) {
    s.add(collective_op("bwd.hpz", Phase::backward, CollectiveKind::all_gather, hpz, kLayerBytes));
    s.add(collective_op("bwd.qgz.intra", Phase::backward, CollectiveKind::all_to_all, intra, kQgzIntra, kQgzScale,
                        DType::int4));
    s.add(collective_op("bwd.qgz.inter", Phase::backward, CollectiveKind::all_to_all, inter, kQgzInter,
                        kQgzInterScale, DType::int4));
  }
  return s;
}

}  // namespace

TEST(CommWalk, Zero3SendsThreeTimesModelBytesPerGpuPerStep) {
  const CommWalk w = walk_comm(zero3());
  const Bytes n = kNodes * kGpn;
  EXPECT_EQ(w.per_gpu.forward, M * (n - 1) / n);
  EXPECT_EQ(w.per_gpu.backward, 2 * M * (n - 1) / n);
  EXPECT_EQ(w.per_gpu.step, 0);
  EXPECT_EQ(w.per_gpu.total(), 3 * M * (n - 1) / n);
}

TEST(CommWalk, Zero3CrossesThreeMTimesKMinusOneOverKPerNode) {
  const CommWalk w = walk_comm(zero3());
  EXPECT_EQ(w.cross_node_per_node_total(), 3 * M * (kNodes - 1) / kNodes);
  EXPECT_EQ(w.cross_node_per_gpu.total(), 3 * M * (kNodes - 1) / kNodes / kGpn);
}

TEST(CommWalk, ZeroPlusPlusCutsCrossNodeVolumeToThreeQuartersMPlusScales) {
  const CommWalk w = walk_comm(zeropp());
  const Bytes k = kNodes;
  // qwZ: 0.5M (k-1)/k; hpZ: 0; qgZ: 0.25M (k-1)/k; plus the scales carried by both.
  const Bytes scales_per_node = kLayers * (kQwzScale * (k - 1) / k + kQgzInterScale * kGpn * (k - 1) / k);
  EXPECT_EQ(w.cross_node_per_node_total(), M / 2 * (k - 1) / k + M / 4 * (k - 1) / k + scales_per_node);
  EXPECT_EQ(w.cross_node_scale_per_gpu.total() * kGpn, scales_per_node);
  EXPECT_EQ(w.cross_node_per_node_total() - w.cross_node_scale_per_gpu.total() * kGpn, 3 * M / 4 * (k - 1) / k);
}

TEST(CommWalk, CollectivesAggregateByPhaseKindGroupAndSize) {
  const CommWalk w = walk_comm(zero3());
  ASSERT_EQ(w.collectives.size(), 3u);
  const CollectiveSummary& fwd = w.collectives[0];
  EXPECT_EQ(fwd.phase, Phase::forward);
  EXPECT_EQ(fwd.op, CollectiveKind::all_gather);
  EXPECT_EQ(fwd.group, "world");
  EXPECT_EQ(fwd.group_size, 16);
  EXPECT_EQ(fwd.bytes, kLayerBytes);
  EXPECT_EQ(fwd.count, kLayers);
  EXPECT_EQ(fwd.bytes_per_gpu, kLayers * kLayerBytes * 15 / 16);
  EXPECT_EQ(fwd.cross_node_bytes_per_gpu, kLayers * kLayerBytes / 16);
  EXPECT_EQ(w.collectives[1].op, CollectiveKind::all_gather);
  EXPECT_EQ(w.collectives[1].phase, Phase::backward);
  EXPECT_EQ(w.collectives[2].op, CollectiveKind::reduce_scatter);
}

TEST(CommWalk, CollectiveSummariesAddUpToThePhaseTotals) {
  const CommWalk w = walk_comm(zeropp());
  PhaseBytes sent, cross;
  for (const CollectiveSummary& c : w.collectives) {
    sent.at(c.phase) += c.bytes_per_gpu;
    cross.at(c.phase) += c.cross_node_bytes_per_gpu;
  }
  EXPECT_EQ(sent, w.per_gpu);
  EXPECT_EQ(cross, w.cross_node_per_gpu);
}

TEST(CommWalk, QuantizedCollectiveKeepsItsScaleBytesInTheSummary) {
  const CommWalk w = walk_comm(zeropp());
  EXPECT_EQ(w.collectives[0].scale_bytes, kQwzScale);
  EXPECT_EQ(w.scale_per_gpu.forward, kLayers * kQwzScale * 15 / 16);
}

TEST(CommWalk, InitPhaseIsReportedApartAndLeftOutOfTheTotal) {
  Schedule s = zero3();
  const int world = s.group({"world", 16, 8, 1});
  s.add(collective_op("init.bcast", Phase::init, CollectiveKind::broadcast, world, 1600));
  const CommWalk w = walk_comm(s);
  EXPECT_EQ(w.per_gpu.init, 1600 * 15 / 16);
  EXPECT_EQ(w.per_gpu.total(), walk_comm(zero3()).per_gpu.total());
}

TEST(CommWalk, FiguresArePerStepWhenTheScheduleHoldsSeveralSteps) {
  Schedule two = zero3();
  const Schedule one = zero3();
  for (const Op& op : one.ops) two.add(op);
  two.meta.steps = 2;
  const CommWalk w2 = walk_comm(two);
  const CommWalk w1 = walk_comm(one);
  EXPECT_EQ(w2.per_gpu, w1.per_gpu);
  EXPECT_EQ(w2.cross_node_per_gpu, w1.cross_node_per_gpu);
  EXPECT_EQ(w2.collectives[0].count, w1.collectives[0].count);
}

TEST(CommWalk, InitHappensOnceAndIsNotAveragedOverSteps) {
  Schedule two = base();
  const int world = two.group({"world", kNodes * kGpn, kGpn, 1});
  two.add(collective_op("init.bcast", Phase::init, CollectiveKind::broadcast, world, 1600));
  for (int step = 0; step < 2; ++step)
    two.add(collective_op("fwd.ag", Phase::forward, CollectiveKind::all_gather, world, kLayerBytes));
  two.meta.steps = 2;
  const CommWalk w = walk_comm(two);
  EXPECT_EQ(w.per_gpu.init, 1600 * 15 / 16);
  EXPECT_EQ(w.per_gpu.forward, kLayerBytes * 15 / 16);
  EXPECT_EQ(w.collectives[0].count, 1);  // the broadcast, once
  EXPECT_EQ(w.collectives[1].count, 1);  // the all-gather, once per step
}

TEST(CommWalk, CopiesAreSummedPerKindAndPhase) {
  Schedule s = base();
  s.add(copy_op("grad.d2h", Phase::backward, CopyKind::d2h, 300));
  s.add(copy_op("grad.d2h", Phase::backward, CopyKind::d2h, 200));
  s.add(copy_op("param.h2d", Phase::step, CopyKind::h2d, 700));
  s.add(copy_op("opt.read", Phase::step, CopyKind::nvme_read, 900));
  const CommWalk w = walk_comm(s);
  EXPECT_EQ(w.d2h.backward, 500);
  EXPECT_EQ(w.h2d.step, 700);
  EXPECT_EQ(w.nvme_read.step, 900);
  EXPECT_EQ(w.nvme_write.total(), 0);
  EXPECT_EQ(w.per_gpu.total(), 0);
}

// A d2d copy that every rank runs counts whole; one that a single rank runs (DeepSpeed's copy-out of an
// owned slice) adds bytes / world_size to the per-GPU average.
TEST(CommWalk, DeviceCopiesOfOneRankCountAWorldSizethOfTheirBytes) {
  Schedule s = base();
  s.meta.world_size = 16;
  s.add(copy_op("flatten", Phase::backward, CopyKind::d2d, 3200));
  Op out = copy_op("copy_out", Phase::backward, CopyKind::d2d, 1600);
  out.copy.rank = 7;
  s.add(out);
  EXPECT_EQ(walk_comm(s).d2d.backward, 3200 + 1600 / 16);
}

// Each rank but the root sends a reduce's buffer once: S (n-1)/n per GPU on average.
TEST(CommWalk, AReduceSendsItsBufferFromAllButTheRoot) {
  Schedule s = base();
  const int world = s.group({"world", 16, 8, 1});
  Op r = collective_op("bwd.reduce", Phase::backward, CollectiveKind::reduce, world, 1600);
  r.collective.root = 2;
  s.add(r);
  EXPECT_EQ(walk_comm(s).per_gpu.backward, 1600 * 15 / 16);
}

TEST(CommWalk, RejectsACollectiveWithoutAValidGroup) {
  Schedule s = base();
  s.add(collective_op("bad", Phase::forward, CollectiveKind::all_gather, 3, 100));
  EXPECT_THROW(walk_comm(s), std::logic_error);
}
