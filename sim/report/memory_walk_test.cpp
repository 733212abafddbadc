// Specification of the memory walk: peaks come from replaying the schedule's allocs and frees.
#include "sim/report/memory_walk.hpp"

#include <gtest/gtest.h>

#include "sim/report/walk_test_util.hpp"

using namespace zsim;
using namespace zsim::testing;

namespace {

// A hand-built step on 4 GPUs per node. GPU live bytes after each op (closed form):
//   0 params 100 | 1 grads +100 = 200 | 2 optimizer +600 = 800 | 3 cpu optimizer (GPU unchanged)
//   4 forward compute | 5 activations +50 = 850 | 6 prefetch +30 = 880 | 7 gathered +40 = 920 (peak)
//   8 free gathered = 880 | 9 free prefetch = 850 | 10 bucket +60 = 910 | 11 free activations = 860
//   12 free bucket = 800
// CPU: 1000 bytes per rank of optimizer state from op 3 on = 4000 per node.
Schedule hand_built_step() {
  Schedule s;
  s.meta.gpus_per_node = 4;
  s.meta.nodes = 2;
  s.meta.world_size = 8;
  s.stream("compute");
  s.add(alloc_op("p", Tier::gpu, MemCategory::params, 100, "", Phase::init));
  s.add(alloc_op("g", Tier::gpu, MemCategory::grads, 100, "", Phase::init));
  s.add(alloc_op("opt", Tier::gpu, MemCategory::optimizer, 600, "", Phase::init));
  s.add(alloc_op("opt_cpu", Tier::cpu, MemCategory::optimizer, 1000, "", Phase::init));
  s.add(compute_op("fwd.L0", Phase::forward, ComputeKind::forward));
  const Op act = alloc_op("act.L0", Tier::gpu, MemCategory::activations, 50);
  const Op pf = alloc_op("pf.L1", Tier::gpu, MemCategory::buffers, 30, "prefetch");
  const Op gath = alloc_op("gath.L0", Tier::gpu, MemCategory::buffers, 40, "gathered", Phase::backward);
  const Op bkt = alloc_op("bucket0", Tier::gpu, MemCategory::buffers, 60, "bucket", Phase::backward);
  s.add(act);
  s.add(pf);
  s.add(gath);
  s.add(free_op(gath));
  s.add(free_op(pf));
  s.add(bkt);
  s.add(free_op(act));
  s.add(free_op(bkt));
  return s;
}

const MemoryCapacity kRoomy{1000, 10'000, 0};

}  // namespace

TEST(MemoryWalk, PeakFoundByWalkingEqualsWhatIsLiveAtThatOp) {
  const Schedule s = hand_built_step();
  const MemoryWalk w = walk_memory(s, kRoomy);
  EXPECT_EQ(w.gpu.peak, 100 + 100 + 600 + 50 + 30 + 40);
  EXPECT_EQ(w.gpu.peak_op, 7);
  EXPECT_EQ(w.gpu.peak_op_name, "alloc.gath.L0");
  EXPECT_EQ(live_after(s, w.gpu.peak_op, Tier::gpu).total(), w.gpu.peak);
  EXPECT_EQ(live_after(s, w.gpu.peak_op, Tier::gpu), w.gpu.at_peak);
}

TEST(MemoryWalk, BreakdownAtPeakSplitsCategoriesAndBufferDetails) {
  const MemoryBreakdown& b = walk_memory(hand_built_step(), kRoomy).gpu.at_peak;
  EXPECT_EQ(b.params, 100);
  EXPECT_EQ(b.grads, 100);
  EXPECT_EQ(b.optimizer, 600);
  EXPECT_EQ(b.activations, 50);
  EXPECT_EQ(b.buffers, 30 + 40);
  EXPECT_EQ(b.buffer_detail, (std::map<std::string, Bytes>{{"gathered", 40}, {"prefetch", 30}}));
}

TEST(MemoryWalk, NoOpLeavesMoreLiveThanThePeak) {
  const Schedule s = hand_built_step();
  const MemoryWalk w = walk_memory(s, kRoomy);
  for (const Op& op : s.ops) EXPECT_LE(live_after(s, op.id, Tier::gpu).total(), w.gpu.peak) << op.id;
}

TEST(MemoryWalk, PersistentStatesRemainLiveAtEnd) {
  const MemoryWalk w = walk_memory(hand_built_step(), kRoomy);
  EXPECT_EQ(w.gpu.at_end.total(), 800);
  EXPECT_EQ(w.gpu.at_end.buffers, 0);
  EXPECT_TRUE(w.gpu.at_end.buffer_detail.empty());
}

TEST(MemoryWalk, CpuTierIsPerNodeWhichIsPerRankTimesGpusPerNode) {
  const MemoryWalk w = walk_memory(hand_built_step(), kRoomy);
  EXPECT_EQ(w.cpu.peak, 1000 * 4);
  EXPECT_EQ(w.cpu.peak_op, 3);
  EXPECT_EQ(w.cpu.at_peak.optimizer, 4000);
}

TEST(MemoryWalk, UnusedTierHasNoPeakOpAndFitsEvenWithoutCapacity) {
  const MemoryWalk w = walk_memory(hand_built_step(), kRoomy);
  EXPECT_EQ(w.nvme.peak, 0);
  EXPECT_EQ(w.nvme.peak_op, -1);
  EXPECT_TRUE(w.nvme.fits());
}

TEST(MemoryWalk, FitsWithHeadroomWhenEveryTierHoldsItsPeak) {
  const MemoryWalk w = walk_memory(hand_built_step(), kRoomy);
  EXPECT_TRUE(w.fits());
  EXPECT_EQ(w.gpu.headroom(), 1000 - 920);
  EXPECT_EQ(w.cpu.headroom(), 10'000 - 4000);
  EXPECT_FALSE(w.first_overflow.has_value());
}

TEST(MemoryWalk, GpuMisfitNamesTheFirstOpThatOverflowsAndByHowMuch) {
  const MemoryWalk w = walk_memory(hand_built_step(), {900, 10'000, 0});
  EXPECT_FALSE(w.fits());
  EXPECT_FALSE(w.gpu.fits());
  EXPECT_EQ(w.gpu.headroom(), 900 - 920);
  ASSERT_TRUE(w.first_overflow.has_value());
  EXPECT_EQ(w.first_overflow->tier, Tier::gpu);
  EXPECT_EQ(w.first_overflow->op, 7);  // 920 > 900; op 10 (910) overflows too, later
  EXPECT_EQ(w.first_overflow->over_by, 20);
}

TEST(MemoryWalk, FirstOverflowIsTheEarliestOpInProgramOrderAcrossTiers) {
  // The GPU overflows at op 7, but the CPU (4000 > 3000) already at op 3.
  const MemoryWalk w = walk_memory(hand_built_step(), {900, 3000, 0});
  ASSERT_TRUE(w.first_overflow.has_value());
  EXPECT_EQ(w.first_overflow->tier, Tier::cpu);
  EXPECT_EQ(w.first_overflow->op, 3);
  EXPECT_EQ(w.first_overflow->over_by, 1000);
  EXPECT_FALSE(w.gpu.fits());
}

TEST(MemoryWalk, FreeReleasesWhatItsAllocTookEvenIfTheFreeMislabelsTheCategory) {
  Schedule s;
  s.stream("compute");
  const Op a = alloc_op("x", Tier::gpu, MemCategory::buffers, 64, "bucket");
  s.add(a);
  Op f = free_op(a);
  f.mem.category = MemCategory::params;
  s.add(f);
  const MemoryWalk w = walk_memory(s, kRoomy);
  EXPECT_EQ(w.gpu.at_end, MemoryBreakdown{});
}

TEST(MemoryWalk, RejectsFreeOfABufferThatIsNotLive) {
  Schedule s;
  s.stream("compute");
  s.add(free_op(alloc_op("ghost", Tier::gpu, MemCategory::buffers, 8)));
  EXPECT_THROW(walk_memory(s, kRoomy), std::logic_error);
}

TEST(MemoryWalk, CapacityComesFromTheScenarioGpuHostAndNvme) {
  Scenario sc;
  sc.cluster.gpu.hbm_bytes = 80 * kGiB;
  sc.cluster.host.memory_bytes = 2048 * kGiB;
  sc.cluster.nvme.bytes = 30'000 * kGiB;
  const MemoryCapacity c = capacity_of(sc);
  EXPECT_EQ(c.gpu, 80 * kGiB);
  EXPECT_EQ(c.cpu, 2048 * kGiB);
  EXPECT_EQ(c.nvme, 30'000 * kGiB);
}

// Buffers peak at 30 + 40 = 70 (prefetch and gathered live together), then 60 (the bucket alone): the category's own
// peak is 70, although at the tier's peak (op 7) it is also 70 and at op 10 the bucket holds 60; CPU per rank, unscaled.
TEST(MemoryWalk, EachCategorysOwnPeakIsPerRankOverProgramOrder) {
  const Schedule s = hand_built_step();
  const std::map<MemCategory, Bytes> gpu = category_peaks(s, Tier::gpu);
  EXPECT_EQ(gpu.at(MemCategory::params), 100);
  EXPECT_EQ(gpu.at(MemCategory::optimizer), 600);
  EXPECT_EQ(gpu.at(MemCategory::activations), 50);
  EXPECT_EQ(gpu.at(MemCategory::buffers), 70);
  const std::map<MemCategory, Bytes> cpu = category_peaks(s, Tier::cpu);
  EXPECT_EQ(cpu.at(MemCategory::optimizer), 1000);  // per rank: the walk's node figure is 4000
  EXPECT_EQ(cpu.count(MemCategory::params), 0u);
  EXPECT_TRUE(category_peaks(s, Tier::nvme).empty());
}
