// The event engine on hand-built schedules: exact communication times, stream order and deps, link
// sharing, steady state over several steps, determinism, and bad shapes.
#include "sim/engine/simulate.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "cost_models/collective_cost.hpp"
#include "cost_models/compute_cost.hpp"
#include "sim/engine/op_work.hpp"
#include "sim/engine/test_schedules.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;
using testing::test_cluster;

constexpr double kRel = 1e-12;

TEST(Simulate, ACommunicationOnlyScheduleTakesExactlyItsCommunicationTime) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  const Bytes S = 512 * kMiB;
  OpId a = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, S);
  OpId r = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, S, {a});
  b.collective("ar", Phase::step, CollectiveKind::all_reduce, world, S / 4, {r});
  const AlphaBeta nvl{2e-6, 400e9};
  const double expected = collective_s(CollectiveKind::all_gather, S, 8, nvl) +
                          collective_s(CollectiveKind::reduce_scatter, S, 8, nvl) +
                          collective_s(CollectiveKind::all_reduce, S / 4, 8, nvl);
  const TimingResult t = simulate(c, b.s);
  EXPECT_NEAR(t.step_s(), expected, expected * kRel);
  EXPECT_NEAR(t.makespan_s, expected, expected * kRel);
}

TEST(Simulate, AnInterNodeGroupWithOneRankPerNodeRunsAtNicBandwidth) {
  const ClusterSpec c = test_cluster(4, 8);
  ScheduleBuilder b(c);
  const int inter = b.group("inter_node", 4, 1, 8);
  const Bytes S = 256 * kMiB;
  b.collective("ag", Phase::forward, CollectiveKind::all_gather, inter, S);
  const double expected = 3 * (6e-6 + S / (4 * 40e9));  // (k-1)(alpha + S/(k B_ib))
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * kRel);
}

TEST(Simulate, AWorldGroupAcrossNodesIsLimitedByTheNodesAggregateNicBandwidth) {
  // 8 GPUs per node x 40 GB/s NICs = 320 GB/s < 400 GB/s NVLink: bus bandwidth ~ 320 (n/(n-1) (k-1)/k).
  const ClusterSpec c = test_cluster(4, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 32, 8);
  const Bytes S = 4 * kGiB;
  b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, S);
  const double nic_bytes = static_cast<double>(S) * 3 / (4 * 8);  // S (k-1)/(k r)
  const double expected = 28 * 2e-6 + 3 * 6e-6 + nic_bytes / 40e9;  // 28 NVLink + 3 network ring steps
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);
}

TEST(Simulate, AnOversubscribedFabricSlowsTheAllToAllTrafficThatLeavesTheLeaf) {
  // 4 nodes, 2 per leaf, 4:1 oversubscription: a rank's uplink share is 40/4 = 10 GB/s. Of the NIC bytes
  // S(k-1)/k, (k - 2)/(k - 1) = 2/3 leave the leaf, so the uplink allows S(k-1)/k x 2/3 at 10 GB/s.
  ClusterSpec c = test_cluster(4, 8);
  c.links.nodes_per_leaf = 2;
  c.links.ib_oversubscription = 4;
  ScheduleBuilder b(c);
  const int world = b.group("world", 32, 8);
  const Bytes S = 3 * kGiB;
  b.collective("a2a", Phase::backward, CollectiveKind::all_to_all, world, S);
  const double nic_bytes = static_cast<double>(S) * 3 / 4;
  const double latency = 7 * 2e-6 + 24 * 6e-6;  // pairwise: 7 peers on the node, 24 elsewhere
  const double expected = latency + nic_bytes * (2.0 / 3) / 10e9;
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-9);
  c.links.ib_oversubscription = 1;  // non-blocking: the NIC (40 GB/s) is the bottleneck again
  const double non_blocking = latency + nic_bytes / 40e9;
  EXPECT_NEAR(simulate(c, b.s).step_s(), non_blocking, non_blocking * 1e-9);
}

// Two communicators over the same ranks (two groups of the same shape): their calls run at once on the links.
TEST(Simulate, TwoConcurrentCollectivesOnOneLinkEachGetHalfOfIt) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8), other = b.group("world_b", 8, 8);
  const Bytes S = 1 * kGiB;
  OpId a = b.collective("ag", Phase::backward, CollectiveKind::all_gather, world, S, {}, "comm");
  OpId r = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, other, S, {}, "comm_rs");
  const TimingResult t = simulate(c, b.s, SimOptions{SharePolicy::fair});
  const double alone = bus_bytes(CollectiveKind::all_gather, S, 8) / 400e9;
  const double expected = 7 * 2e-6 + 2 * alone;  // both flows at half rate, ending together
  EXPECT_NEAR(t.ops[a].end_s, expected, expected * kRel);
  EXPECT_NEAR(t.ops[r].end_s, expected, expected * kRel);
}

// Ordered links serialise the bytes, not the latency steps: the second collective starts at once, runs
// its latency steps while the first moves its bytes, then moves its own bytes at the full rate.
TEST(Simulate, WithOrderedLinksTransfersOnOneLinkMoveTheirBytesOneAfterTheOtherInProgramOrder) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8), other = b.group("world_b", 8, 8);
  const Bytes S = 1 * kGiB;
  OpId a = b.collective("ag", Phase::backward, CollectiveKind::all_gather, world, S, {}, "comm");
  OpId r = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, other, S, {}, "comm_rs");
  const TimingResult t = simulate(c, b.s, SimOptions{SharePolicy::ordered});
  const double one = collective_s(CollectiveKind::all_gather, S, 8, {2e-6, 400e9});
  const double bytes_alone = bus_bytes(CollectiveKind::all_gather, S, 8) / 400e9;
  EXPECT_NEAR(t.ops[a].end_s, one, one * kRel);
  EXPECT_DOUBLE_EQ(t.ops[r].start_s, 0.0);
  EXPECT_NEAR(t.ops[r].end_s, one + bytes_alone, one * kRel);
  EXPECT_LT(t.ops[r].end_s, 2 * one);  // the latency steps overlapped the first transfer
}

// One communicator runs its calls in the order they were issued (NCCL): a gather issued after a reduce-scatter of
// the same group, on another stream, holds its stream from the start (as zrun's op and NCCL's kernel do) but moves
// its bytes only once the reduce-scatter, which waits for compute, has ended.
TEST(Simulate, ACollectiveWaitsForTheOneIssuedBeforeItOnItsGroupWhateverItsStream) {
  const ClusterSpec c = test_cluster(1, 8);
  const Bytes S = 64 * kMiB;
  ScheduleBuilder alone(c);
  const OpId only = alone.collective("ag", Phase::backward, CollectiveKind::all_gather, alone.group("world", 8, 8), S);
  const Seconds own = simulate(c, alone.s).ops[only].end_s;
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8), other = b.group("world_b", 8, 8);
  const OpId work = b.compute("bwd", Phase::backward, 1e12);
  const OpId rs = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, S, {work}, "reduce");
  const OpId ag = b.collective("ag", Phase::backward, CollectiveKind::all_gather, world, S, {}, "fetch");
  const OpId free = b.collective("ag_other", Phase::backward, CollectiveKind::all_gather, other, S, {}, "fetch2");
  const TimingResult t = simulate(c, b.s);
  EXPECT_GT(t.ops[rs].start_s, 0.0);
  EXPECT_DOUBLE_EQ(t.ops[ag].start_s, 0.0);                      // on its stream at once
  EXPECT_NEAR(t.ops[ag].end_s, t.ops[rs].end_s + own, own * kRel);  // its bytes after the reduce-scatter's
  EXPECT_DOUBLE_EQ(t.ops[free].start_s, 0.0);  // another communicator (TwoConcurrentCollectives...: both move at once)
  // Issued the other way round, the gather runs at once and the reduce-scatter waits for its deps only.
  ScheduleBuilder b2(c);
  const int w2 = b2.group("world", 8, 8);
  const OpId work2 = b2.compute("bwd", Phase::backward, 1e12);
  const OpId ag2 = b2.collective("ag", Phase::backward, CollectiveKind::all_gather, w2, S, {}, "fetch");
  const OpId rs2 = b2.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, w2, S, {work2}, "reduce");
  const TimingResult t2 = simulate(c, b2.s);
  EXPECT_NEAR(t2.ops[ag2].end_s, own, own * kRel);
  EXPECT_DOUBLE_EQ(t2.ops[rs2].start_s, t2.ops[work2].end_s);
}

TEST(Simulate, TheDefaultSharePolicyIsOrdered) { EXPECT_EQ(SimOptions{}.share, SharePolicy::ordered); }

TEST(Simulate, AnOpWaitsForItsDepsOnOtherStreams) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  OpId f = b.compute("fwd", Phase::forward, 1e12);
  OpId g = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, 64 * kMiB, {f});
  const TimingResult t = simulate(c, b.s);
  EXPECT_DOUBLE_EQ(t.ops[f].end_s, gemm_s(1e12, 1000, 0.5));
  EXPECT_DOUBLE_EQ(t.ops[g].start_s, t.ops[f].end_s);
}

TEST(Simulate, OpsOfOneStreamRunInProgramOrderOneAtATime) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  OpId a = b.compute("a", Phase::forward, 1e12);
  OpId x = b.compute("b", Phase::forward, 2e12);
  const TimingResult t = simulate(c, b.s);
  EXPECT_DOUBLE_EQ(t.ops[x].start_s, t.ops[a].end_s);
  EXPECT_NEAR(t.stream_busy_s[0], gemm_s(3e12, 1000, 0.5), 1e-15);
}

TEST(Simulate, PageableCopiesRunAtTheirFractionOfPcie) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  OpId p = b.copy("pinned", Phase::step, CopyKind::h2d, 1'000'000'000, true);
  OpId q = b.copy("pageable", Phase::step, CopyKind::h2d, 1'000'000'000, false, {p});
  const TimingResult t = simulate(c, b.s);
  EXPECT_NEAR(t.ops[p].duration_s(), 3e-6 + 1e9 / 50e9, 1e-15);
  EXPECT_NEAR(t.ops[q].duration_s(), 3e-6 + 1e9 / (0.5 * 50e9), 1e-15);
}

TEST(Simulate, HostToDevicePageableCopiesRunAtTheirOwnFractionWhereGiven) {
  ClusterSpec c = test_cluster(1, 8);
  c.efficiency.pageable_pcie_fraction = 0.1;
  c.efficiency.pageable_h2d_pcie_fraction = 0.25;
  ScheduleBuilder b(c);
  OpId up = b.copy("up", Phase::step, CopyKind::h2d, 1'000'000'000, false);
  OpId down = b.copy("down", Phase::step, CopyKind::d2h, 1'000'000'000, false, {up});
  const TimingResult t = simulate(c, b.s);
  EXPECT_NEAR(t.ops[up].duration_s(), 3e-6 + 1e9 / (0.25 * 50e9), 1e-15);
  EXPECT_NEAR(t.ops[down].duration_s(), 3e-6 + 1e9 / (0.1 * 50e9), 1e-15);
}

// A d2d copy reads and writes its bytes in HBM; the program timed is rank 0's, so a copy that only
// another rank runs (DeepSpeed's copy-out of a slice that rank owns) takes rank 0 no time.
TEST(Simulate, DeviceCopiesReadAndWriteInHbmAndOtherRanksCopiesCostNothing) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  OpId mine = b.copy("mine", Phase::backward, CopyKind::d2d, 1'200'000'000, true, {}, "comm");
  OpId theirs = b.copy("theirs", Phase::backward, CopyKind::d2d, 1'200'000'000, true, {mine}, "comm");
  b.s.ops[theirs].copy.rank = 3;
  const TimingResult t = simulate(c, b.s);
  EXPECT_NEAR(t.ops[mine].duration_s(), 2 * 1.2e9 / (3000e9 * 0.8), 1e-15);
  EXPECT_EQ(t.ops[theirs].duration_s(), 0);
}

// ncclReduce is timed as a pipelined ring, like broadcast: (n-1) a + S/B.
TEST(Simulate, AReduceTakesAPipelinedRingsTime) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  const Bytes S = 256 * kMiB;
  OpId r = b.collective("reduce", Phase::backward, CollectiveKind::reduce, world, S);
  b.s.ops[r].collective.root = 5;
  const double expected = 7 * 2e-6 + static_cast<double>(S) / 400e9;
  EXPECT_NEAR(simulate(c, b.s).ops[r].duration_s(), expected, expected * kRel);
}

TEST(Simulate, ANodesNvmeIsSharedByItsGpus) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  OpId r = b.copy("read", Phase::step, CopyKind::nvme_read, 3'000'000'000);
  EXPECT_NEAR(simulate(c, b.s).ops[r].duration_s(), 3e9 / (24e9 / 8), 1e-12);
}

TEST(Simulate, CpuAdamUsesTheRanksShareOfTheHostCores) {
  const ClusterSpec c = test_cluster(1, 8);  // 64 cores / 8 GPUs = 8 cores per rank at 1e8 params/s
  ScheduleBuilder b(c);
  OpId o = b.cpu_adam("adam", 1'600'000'000);
  EXPECT_DOUBLE_EQ(simulate(c, b.s).ops[o].duration_s(), 2.0);
}

TEST(Simulate, CpuAdamRanksShareTheNodesCeiling) {
  ClusterSpec c = test_cluster(1, 8);  // 8 cores per rank at 1e8: 8e8 params/s from the cores
  c.efficiency.cpu_adam_node_params_per_s = 4e9;  // 5e8 each of the node's 8 ranks
  ScheduleBuilder b(c);
  OpId o = b.cpu_adam("adam", 1'600'000'000);
  EXPECT_DOUBLE_EQ(simulate(c, b.s).ops[o].duration_s(), 1.6e9 / 5e8);
  c.efficiency.cpu_adam_node_params_per_s = 1e10;  // 1.25e9 each: the cores' 8e8 binds
  EXPECT_DOUBLE_EQ(simulate(c, b.s).ops[o].duration_s(), 2.0);
}

// Where calibrate measured the node's rank count at once (efficiency.cpu_adam_measured), a rank runs at that rate
// interpolated at its cores, in place of the per-core slope and the node's ceiling; other rank counts' rates are not
// used.
TEST(Simulate, CpuAdamRunsAtTheRateMeasuredForTheNodesRankCountAtItsCores) {
  ClusterSpec c = test_cluster(1, 8);  // 8 cores per rank: 8e8 params/s from the per-core slope
  ScheduleBuilder b(c);
  OpId o = b.cpu_adam("adam", 1'600'000'000);
  c.efficiency.cpu_adam_measured[1] = {{4, 1e9}, {16, 4e9}};
  EXPECT_DOUBLE_EQ(simulate(c, b.s).ops[o].duration_s(), 2.0);  // no rates for 8 ranks at once: the slope
  c.efficiency.cpu_adam_measured[8] = {{4, 2e8}, {16, 8e8}};     // 8 threads: the geometric mean, 4e8
  EXPECT_NEAR(simulate(c, b.s).ops[o].duration_s(), 1.6e9 / 4e8, 1e-9);
}

// Another pass over host memory on the CPU (DeepSpeed's unscale mul_: hbm_bytes given) runs at CPU Adam's rate per
// byte, 28 bytes a parameter (Adam reads weight, gradient and both moments, writes three back), measured or not.
TEST(Simulate, ACpuPassWithHostBytesRunsAtCpuAdamsRatePerByte) {
  ClusterSpec c = test_cluster(1, 8);  // 8 cores per rank at 1e8: 8e8 params/s
  ScheduleBuilder b(c);
  OpId o = b.cpu_adam("unscale", 1'400'000'000);
  b.s.ops[o].compute.hbm_bytes = 8 * 1'400'000'000LL;  // 4e8 Adam-equivalents
  EXPECT_NEAR(simulate(c, b.s).ops[o].duration_s(), 4e8 / 8e8, 1e-9);
  c.efficiency.cpu_adam_measured[8] = {{4, 2e8}, {16, 8e8}};  // 8 threads: 4e8 params/s
  EXPECT_NEAR(simulate(c, b.s).ops[o].duration_s(), 4e8 / 4e8, 1e-9);
}

TEST(Simulate, SeveralStepsGiveTheSteadyStatePerStep) {
  // Each step: compute 1 s, then an all-reduce; step k's forward waits for step k-1's all-reduce.
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c, 3);
  const int world = b.group("world", 8, 8);
  OpId prev = -1;
  for (int k = 0; k < 3; ++k) {
    std::vector<OpId> deps;
    if (prev >= 0) deps.push_back(prev);
    OpId f = b.compute("fwd", Phase::forward, 5e14, deps);
    prev = b.collective("ar", Phase::step, CollectiveKind::all_reduce, world, kGiB, {f});
  }
  const TimingResult t = simulate(c, b.s);
  ASSERT_EQ(t.steps.size(), 3u);
  const double per_step = 1.0 + collective_s(CollectiveKind::all_reduce, kGiB, 8, {2e-6, 400e9});
  EXPECT_NEAR(t.step_s(), per_step, per_step * 1e-12);
  EXPECT_NEAR(t.makespan_s, 3 * per_step, 3 * per_step * 1e-12);
}

TEST(Simulate, IsDeterministicBitForBit) {
  const ClusterSpec c = test_cluster(2, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 16, 8);
  const int intra = b.group("intra_node", 8, 8);
  OpId f = b.compute("fwd", Phase::forward, 3e13);
  b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, 300 * kMiB, {});
  b.collective("a2a", Phase::backward, CollectiveKind::all_to_all, intra, 77 * kMiB, {f}, "comm_rs");
  b.copy("off", Phase::step, CopyKind::d2h, 123456789, false, {f});
  const TimingResult t1 = simulate(c, b.s);
  const TimingResult t2 = simulate(c, b.s);
  ASSERT_EQ(t1.ops.size(), t2.ops.size());
  for (size_t i = 0; i < t1.ops.size(); ++i) {
    EXPECT_EQ(t1.ops[i].start_s, t2.ops[i].start_s);
    EXPECT_EQ(t1.ops[i].end_s, t2.ops[i].end_s);
  }
  EXPECT_EQ(t1.link_bytes, t2.link_bytes);
}

TEST(Simulate, GivesTheSameResultsFromFourConcurrentThreadsAsFromOne) {
  const ClusterSpec c = test_cluster(2, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 16, 8);
  OpId f = b.compute("fwd", Phase::forward, 3e13);
  b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, 300 * kMiB);
  b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, 100 * kMiB, {f}, "comm_rs");
  b.copy("off", Phase::step, CopyKind::d2h, 123456789, true, {f});
  const TimingResult one = simulate(c, b.s);
  std::vector<TimingResult> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { results[i] = simulate(c, b.s); });
  for (auto& t : threads) t.join();
  for (const TimingResult& r : results) {
    ASSERT_EQ(r.ops.size(), one.ops.size());
    for (size_t i = 0; i < r.ops.size(); ++i) {
      EXPECT_EQ(r.ops[i].start_s, one.ops[i].start_s);
      EXPECT_EQ(r.ops[i].end_s, one.ops[i].end_s);
    }
  }
}

Op mem_op(Schedule& s, OpKind kind, const std::string& buffer, const std::string& stream, Bytes bytes,
          std::vector<OpId> deps) {
  Op op;
  op.kind = kind;
  op.name = std::string(kind == OpKind::alloc ? "alloc." : "free.") + buffer;
  op.phase = Phase::forward;
  op.stream = s.stream(stream);
  op.deps = std::move(deps);
  op.mem = {buffer, Tier::gpu, MemCategory::buffers, "gathered", bytes};
  return op;
}

// Comm stream: alloc+gather L0, alloc+gather L1 (no deps on compute); compute: fwd L0, free L0, fwd L1,
// free L1. Two gathered layers do not fit next to each other in a 3 GiB GPU.
Schedule prefetch_ahead(const ClusterSpec& c) {
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  Schedule& s = b.s;
  OpId a0 = s.add(mem_op(s, OpKind::alloc, "L0", "comm", 2 * kGiB, {}));
  OpId g0 = b.collective("ag0", Phase::forward, CollectiveKind::all_gather, world, kMiB, {a0});
  OpId a1 = s.add(mem_op(s, OpKind::alloc, "L1", "comm", 2 * kGiB, {}));
  OpId g1 = b.collective("ag1", Phase::forward, CollectiveKind::all_gather, world, kMiB, {a1});
  OpId f0 = b.compute("fwd0", Phase::forward, 5e14, {g0});
  s.add(mem_op(s, OpKind::free, "L0", "compute", 2 * kGiB, {f0}));
  OpId f1 = b.compute("fwd1", Phase::forward, 5e14, {g1});
  s.add(mem_op(s, OpKind::free, "L1", "compute", 2 * kGiB, {f1}));
  return b.s;
}

TEST(Simulate, AGpuAllocWaitsUntilAFreeMakesRoom) {
  ClusterSpec c = test_cluster(1, 8);
  c.gpu.hbm_bytes = 3 * kGiB;
  const Schedule s = prefetch_ahead(c);
  const TimingResult t = simulate(c, s);
  EXPECT_EQ(t.memory_waits, 1);
  EXPECT_EQ(t.memory_overcommits, 0);
  EXPECT_DOUBLE_EQ(t.ops[2].start_s, t.ops[5].end_s);  // alloc L1 waits for free L0 at t = 1 s
  EXPECT_GT(t.makespan_s, 2.0);                        // so ag1 is exposed before fwd1
  ClusterSpec roomy = c;
  roomy.gpu.hbm_bytes = 80 * kGiB;
  const TimingResult u = simulate(roomy, s);
  EXPECT_EQ(u.memory_waits, 0);
  EXPECT_DOUBLE_EQ(u.ops[2].start_s, u.ops[1].end_s);
  SimOptions unlimited;
  unlimited.limit_gpu_memory = false;
  EXPECT_EQ(simulate(c, s, unlimited).memory_waits, 0);
}

TEST(Simulate, AnAllocThatCanNeverFitGoesThroughOverCapacityInsteadOfDeadlocking) {
  ClusterSpec c = test_cluster(1, 8);
  c.gpu.hbm_bytes = 3 * kGiB;
  ScheduleBuilder b(c);
  Schedule& s = b.s;
  s.add(mem_op(s, OpKind::alloc, "A", "compute", 2 * kGiB, {}));
  s.add(mem_op(s, OpKind::alloc, "B", "compute", 2 * kGiB, {}));  // same stream holds the free of A
  s.add(mem_op(s, OpKind::free, "A", "compute", 2 * kGiB, {}));
  s.add(mem_op(s, OpKind::free, "B", "compute", 2 * kGiB, {}));
  const TimingResult t = simulate(c, s);
  EXPECT_EQ(t.memory_overcommits, 1);
  EXPECT_EQ(t.ops.size(), 4u);
}

// Ordered links: a transfer that waits for an earlier transfer on its link (link_wait) makes no progress;
// if that earlier transfer is stuck behind an alloc that can never fit, the over-commit must still happen.
TEST(Simulate, WithOrderedLinksATransferWaitingForALinkDoesNotHideAMemoryDeadlock) {
  ClusterSpec c = test_cluster(1, 8);
  c.gpu.hbm_bytes = 3 * kGiB;
  ScheduleBuilder b(c);
  Schedule& s = b.s;
  const int world = b.group("world", 8, 8);
  s.add(mem_op(s, OpKind::alloc, "A", "compute", 2 * kGiB, {}));
  const OpId alloc_b = s.add(mem_op(s, OpKind::alloc, "B", "compute", 2 * kGiB, {}));
  const OpId ag = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, kGiB, {alloc_b}, "comm");
  const OpId rs = b.collective("rs", Phase::forward, CollectiveKind::reduce_scatter, world, kGiB, {}, "comm_rs");
  s.add(mem_op(s, OpKind::free, "A", "compute", 2 * kGiB, {}));
  s.add(mem_op(s, OpKind::free, "B", "compute", 2 * kGiB, {ag}));
  const TimingResult t = simulate(c, s, SimOptions{SharePolicy::ordered});
  EXPECT_EQ(t.memory_overcommits, 1);
  EXPECT_GT(t.ops[rs].end_s, t.ops[ag].end_s);  // rs moved its bytes after ag's, on the shared link
  EXPECT_LT(t.makespan_s, 1.0);
}

TEST(Simulate, RejectsAScheduleBuiltForAnotherClusterShape) {
  ScheduleBuilder b(test_cluster(2, 8));
  b.compute("fwd", Phase::forward, 1e12);
  EXPECT_THROW(simulate(test_cluster(1, 8), b.s), std::invalid_argument);
}

TEST(Simulate, RejectsACopyOverALinkOfZeroBandwidth) {
  ClusterSpec c = test_cluster(1, 8);
  c.nvme.read_GBps = 0;
  ScheduleBuilder b(c);
  b.copy("read", Phase::step, CopyKind::nvme_read, 1000);
  EXPECT_THROW(simulate(c, b.s), std::invalid_argument);
}

TEST(FindSteps, AStepStartsAtTheFirstNonStepOpAfterAStepPhaseOp) {
  const ClusterSpec c = test_cluster(1, 1);
  ScheduleBuilder b(c, 2);
  b.compute("init", Phase::init, 0);
  b.compute("f0", Phase::forward, 1);
  b.compute("o0", Phase::step, 1);
  b.compute("f1", Phase::forward, 1);
  b.compute("b1", Phase::backward, 1);
  b.compute("o1", Phase::step, 1);
  std::vector<StepSpan> spans;
  EXPECT_EQ(find_steps(b.s, &spans), (std::vector<int>{-1, 0, 0, 1, 1, 1}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].first, 3);
  EXPECT_EQ(spans[1].last, 5);
}

}  // namespace
}  // namespace zsim

namespace zsim {
namespace {

// A forward op of 2.5 x the time of a 400 MB side copy (of `kernel_launches` kernels, on another stream) started
// beside it, run with these rates of efficiency.beside_compute.memcpy (the copy's) and compute_beside.memcpy (the
// compute's): both ops' ends, and their alone times.
struct ComputeBesideACopy {
  ClusterSpec c = testing::test_cluster(1, 1);
  double copy_s = 0, compute_s = 0;
  Flops flops = 0;
  ComputeBesideACopy() {
    c.efficiency.hbm_by_kind.copy = 0.5;
    copy_s = 2 * memory_bound_s(kBytes, c.gpu.hbm_GBps, 0.5);
    flops = 2.5 * copy_s * c.gpu.peak_tflops * 1e12 * c.efficiency.gemm;  // 2.5 x the copy alone
    compute_s = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm);
  }
  std::pair<double, double> ends(double side_rate, double compute_rate, int kernel_launches = 1) const {
    ScheduleBuilder b(c);
    const OpId f = b.compute("fwd", Phase::forward, flops);
    const OpId k = b.copy("side", Phase::forward, CopyKind::d2d, kBytes, true, {}, "rs");
    b.s.ops[k].copy.kernel_launches = kernel_launches;
    ClusterSpec cl = c;
    cl.efficiency.beside_compute.memcpy = side_rate;
    cl.efficiency.compute_beside.memcpy = compute_rate;
    const TimingResult r = simulate(cl, b.s);
    return {r.ops[f].end_s, r.ops[k].end_s};
  }
  static constexpr Bytes kBytes = 400'000'000;
};

// efficiency.beside_compute: a side stream's cudaMemcpyAsync-like copy runs at the measured fraction of its rate while
// the compute stream runs a forward op, and at its full rate before and after; without the key it is unaffected.
TEST(SimulateBesideCompute, ASideCopySlowsWhileTheComputeStreamRunsAndNotOtherwise) {
  const ComputeBesideACopy x;
  const double copy_s = x.copy_s, compute_s = x.compute_s;
  auto step = [&](double memcpy_rate, int kernel_launches) { return x.ends(memcpy_rate, 0, kernel_launches).second; };
  EXPECT_NEAR(step(0, 1), copy_s, copy_s * 1e-9);            // not measured: its alone time
  // A quarter: 2.5 x copy_s of compute moves 0.625 of it, the rest at the full rate once the compute is done.
  EXPECT_NEAR(step(0.25, 1), compute_s + 0.375 * copy_s, copy_s * 1e-9);
  // A tenth: a quarter of it beside the compute.
  EXPECT_NEAR(step(0.1, 1), compute_s + 0.75 * copy_s, copy_s * 1e-9);
  // Well above the compute's length at a tiny rate: a hundredth moves 2.5% beside it.
  EXPECT_NEAR(step(0.01, 1), compute_s + 0.975 * copy_s, copy_s * 1e-9);
}

// Each kind of side kernel takes its own rate: a copy of fewer kernels than pieces (a torch.cat) is a copy kernel, and a
// one-rank all-reduce a collective; the compute's own stream is never slowed.
TEST(SimulateBesideCompute, EachSideKindTakesItsOwnRate) {
  ClusterSpec c = testing::test_cluster(1, 1);
  c.efficiency.beside_compute = {0.5, 0.25, 0.2};
  const Bytes bytes = 100'000'000;
  const Flops flops = 1e15;  // far longer than any side op
  ScheduleBuilder b(c);
  b.compute("fwd", Phase::forward, flops);
  Op buf;
  buf.name = "alloc.buf";
  buf.kind = OpKind::alloc;
  buf.stream = b.s.stream("rs");
  buf.mem = {"buf", Tier::gpu, MemCategory::buffers, "bucket", 2 * bytes};
  const OpId a = b.s.add(buf);
  const OpId cat = b.copy("cat", Phase::forward, CopyKind::d2d, bytes, true, {a}, "rs");
  // Two pieces in one kernel: a torch.cat.
  b.s.ops[cat].uses = {{a, 0, bytes / 2, Role::input, Access::read}, {a, bytes, bytes / 2, Role::output, Access::write},
                       {a, bytes / 2, bytes / 2, Role::input, Access::read},
                       {a, 3 * bytes / 2, bytes / 2, Role::output, Access::write}};
  const int one = b.group("one", 1, 1);
  const OpId ar = b.collective("ar", Phase::forward, CollectiveKind::all_reduce, one, bytes, {}, "comm");
  const TimingResult r = simulate(c, b.s);
  ClusterSpec alone = c;
  alone.efficiency.beside_compute = {};
  const TimingResult al = simulate(alone, b.s);
  EXPECT_NEAR(r.ops[cat].end_s - r.ops[cat].start_s, 4 * (al.ops[cat].end_s - al.ops[cat].start_s), 1e-12);
  EXPECT_NEAR(r.ops[ar].end_s - r.ops[ar].start_s, 5 * (al.ops[ar].end_s - al.ops[ar].start_s), 1e-12);
  EXPECT_NEAR(r.ops[0].end_s, al.ops[0].end_s, 1e-12);
}

// efficiency.compute_beside: the compute stream's forward op runs at the measured fraction of its rate while a side
// copy runs, and at its full rate before and after; both ways at once, each at its own rate.
TEST(SimulateBesideCompute, TheComputeStreamSlowsWhileASideCopyRuns) {
  const ComputeBesideACopy x;
  const double copy_s = x.copy_s, compute_s = x.compute_s;
  auto step = [&](double compute_rate, double side_rate) { return x.ends(side_rate, compute_rate); };
  EXPECT_NEAR(step(0, 0).first, compute_s, compute_s * 1e-9);  // not measured: its alone time
  // Half: the copy's copy_s leaves the compute half of it done, the rest at the full rate.
  EXPECT_NEAR(step(0.5, 0).first, compute_s + 0.5 * copy_s, compute_s * 1e-9);
  EXPECT_NEAR(step(0.5, 0).second, copy_s, copy_s * 1e-9);  // the copy unaffected without beside_compute
  // Both ways: the copy, at a quarter beside the compute, ends at 4 copy_s; the compute has then done 2 of its 2.5
  // copy_s of work at half rate and runs the last 0.5 at its full rate.
  const auto [compute_end, copy_end] = step(0.5, 0.25);
  EXPECT_NEAR(copy_end, 4 * copy_s, copy_s * 1e-9);
  EXPECT_NEAR(compute_end, 4 * copy_s + (2.5 - 2) * copy_s, copy_s * 1e-9);
}

// .link_collective: a collective among ranks moves its bytes at the measured fraction of its rate while the compute
// stream runs (its latency steps are not slowed), and the compute stream keeps its own fraction while the collective's
// bytes move; without the keys neither is affected.
TEST(SimulateBesideCompute, ACollectiveAmongRanksMovesSlowerBesideComputeAndSlowsIt) {
  ClusterSpec c = testing::test_cluster(1, 2);
  const Bytes bytes = 400'000'000;
  ScheduleBuilder b(c);
  const int world = b.group("world", 2, 2);
  const OpId f = b.compute("fwd", Phase::forward, 1e16);  // far longer than the collective
  const OpId ag = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, bytes, {}, "comm");
  const TimingResult al = simulate(c, b.s);
  const OpWork w = op_work(b.s.ops[ag], b.s, c, rank_links(Topology(c)), SimOptions{});
  ASSERT_GT(w.flow_bytes, 0);
  const double flow_s = al.ops[ag].end_s - w.fixed_s;  // its bytes' time alone
  ClusterSpec paced = c;
  paced.efficiency.beside_compute.link_collective = 0.25;
  paced.efficiency.compute_beside.link_collective = 0.5;
  const TimingResult r = simulate(paced, b.s);
  EXPECT_NEAR(r.ops[ag].end_s, w.fixed_s + 4 * flow_s, flow_s * 1e-9);
  // The compute lost half its rate while the bytes moved (4 flow_s).
  EXPECT_NEAR(r.ops[f].end_s, al.ops[f].end_s + 0.5 * 4 * flow_s, al.ops[f].end_s * 1e-12);
  // The one-rank classes' keys leave it alone.
  ClusterSpec other = c;
  other.efficiency.beside_compute = {0.5, 0.5, 0.5, 0};
  other.efficiency.compute_beside = {0.5, 0.5, 0.5, 0};
  const TimingResult o = simulate(other, b.s);
  EXPECT_NEAR(o.ops[ag].end_s, al.ops[ag].end_s, 1e-12);
  EXPECT_NEAR(o.ops[f].end_s, al.ops[f].end_s, 1e-12);
}

// The lowest rate of the side classes running applies to the compute stream.
TEST(SimulateBesideCompute, TheComputeStreamTakesTheLowestRateOfTheSideOpsRunning) {
  ClusterSpec c = testing::test_cluster(1, 1);
  c.efficiency.compute_beside = {0.5, 0, 0.2};
  const Bytes bytes = 100'000'000;
  const Flops flops = 1e15;  // far longer than any side op
  ScheduleBuilder b(c);
  const OpId f = b.compute("fwd", Phase::forward, flops);
  const OpId k = b.copy("side", Phase::forward, CopyKind::d2d, bytes, true, {}, "rs");
  const int one = b.group("one", 1, 1);
  const OpId ar = b.collective("ar", Phase::forward, CollectiveKind::all_reduce, one, bytes, {}, "comm");
  const TimingResult r = simulate(c, b.s);
  ClusterSpec alone = c;
  alone.efficiency.compute_beside = {};
  const TimingResult al = simulate(alone, b.s);
  const double copy_s = al.ops[k].end_s, ar_s = al.ops[ar].end_s;  // both start at 0, unaffected by the compute
  EXPECT_NEAR(r.ops[k].end_s, copy_s, 1e-12);
  EXPECT_NEAR(r.ops[ar].end_s, ar_s, 1e-12);
  // Work lost: while both run the collective's 0.8, then the remaining side op's loss until it ends.
  const double both = std::min(copy_s, ar_s), last = std::max(copy_s, ar_s);
  const double lost = 0.8 * both + (last - both) * (copy_s > ar_s ? 0.5 : 0.8);
  EXPECT_NEAR(r.ops[f].end_s, al.ops[f].end_s + lost, al.ops[f].end_s * 1e-12);
}

}  // namespace
}  // namespace zsim

namespace zsim {
namespace {

// efficiency.host_issue: ops shorter than their issue run at the host's rate (each starts once the host has made its
// call), ops longer hide it (the host runs ahead), and without the block the host costs nothing.
TEST(SimulateHostIssue, TinyOpsRunAtTheHostsRateAndLongOnesHideIt) {
  ClusterSpec c = testing::test_cluster(1, 1);
  auto last_end = [&](Flops flops, double kernel_us) {
    ScheduleBuilder b(c);
    OpId prev = -1;
    for (int i = 0; i < 100; ++i) {
      prev = b.compute("f" + std::to_string(i), Phase::forward, flops, prev < 0 ? std::vector<OpId>{} : std::vector<OpId>{prev});
      b.s.ops[prev].compute.kernel_launches = 1;
    }
    ClusterSpec cl = c;
    cl.efficiency.host_issue.kernel_us = kernel_us;
    return simulate(cl, b.s).ops[prev].end_s;
  };
  const Flops tiny = 1e-6 * c.gpu.peak_tflops * 1e12 * c.efficiency.gemm;  // 1 us of GPU work
  EXPECT_NEAR(last_end(tiny, 0), 100e-6, 1e-12);
  EXPECT_NEAR(last_end(tiny, 10), 100 * 10e-6 + 1e-6, 1e-12);  // the host's 100 calls, then the last op's 1 us
  EXPECT_NEAR(last_end(1000 * tiny, 10), 10e-6 + 100 * 1e-3, 1e-12);  // the first call, then the GPU's 100 ms
}

// An op of several kernels whose launches take the host longer than the GPU's work ends when the host has launched
// its last one.
TEST(SimulateHostIssue, AnOpEndsNoEarlierThanItsLastLaunch) {
  ClusterSpec c = testing::test_cluster(1, 1);
  c.efficiency.host_issue.kernel_us = 5;
  ScheduleBuilder b(c);
  const OpId f = b.compute("f", Phase::forward, 1e-6 * c.gpu.peak_tflops * 1e12 * c.efficiency.gemm);
  b.s.ops[f].compute.kernel_launches = 40;
  const TimingResult r = simulate(c, b.s);
  EXPECT_NEAR(r.ops[f].start_s, 5e-6, 1e-12);
  EXPECT_NEAR(r.ops[f].end_s, 200e-6, 1e-12);
}

// The host waits for each step to end before it issues the next (zrun synchronises between steps): an op of the second
// step that depends on nothing still starts after the first step's last op, by its own issue.
TEST(SimulateHostIssue, TheHostIssuesAStepOnlyAfterTheStepBeforeHasEnded) {
  ClusterSpec c = testing::test_cluster(1, 1);
  const Flops ms = 1e-3 * c.gpu.peak_tflops * 1e12 * c.efficiency.gemm;
  ScheduleBuilder b(c, 2);
  const OpId f0 = b.compute("fwd0", Phase::forward, ms);
  const OpId o0 = b.compute("opt0", Phase::step, ms, {f0}, "compute", ComputeKind::optimizer);
  const OpId f1 = b.compute("fwd1", Phase::forward, ms, {}, "other");
  for (OpId id : {f0, o0, f1}) b.s.ops[id].compute.kernel_launches = 1;
  EXPECT_NEAR(simulate(c, b.s).ops[f1].start_s, 0, 1e-12);  // no host model: at once, beside the first step
  c.efficiency.host_issue.kernel_us = 4;
  const TimingResult r = simulate(c, b.s);
  EXPECT_NEAR(r.ops[f0].start_s, 4e-6, 1e-12);
  EXPECT_NEAR(r.ops[o0].end_s, 4e-6 + 2e-3, 1e-9);
  EXPECT_NEAR(r.ops[f1].start_s, r.ops[o0].end_s + 4e-6, 1e-12);
}

}  // namespace
}  // namespace zsim

namespace zsim {
namespace {

// efficiency.beside_compute_wait: a side copy that starts with a forward op (one long kernel: FLOPs of no listed shape)
// first waits q of that kernel, then moves at its rate beside compute (efficiency.beside_compute), or its full rate.
TEST(SimulateBesideComputeWait, ASideCopyStartingWithAForwardOpWaitsQOfItsFirstKernelThenMovesAtItsRate) {
  const ComputeBesideACopy x;  // the forward op: 2.5 x the copy alone
  const double copy_s = x.copy_s;
  auto copy_end = [&](double q, double rate) {
    ScheduleBuilder b(x.c);
    b.compute("fwd", Phase::forward, x.flops);
    const OpId k = b.copy("side", Phase::forward, CopyKind::d2d, ComputeBesideACopy::kBytes, true, {}, "rs");
    ClusterSpec cl = x.c;
    cl.efficiency.beside_compute_wait.memcpy = q;
    cl.efficiency.beside_compute.memcpy = rate;
    const TimingResult r = simulate(cl, b.s);
    EXPECT_EQ(r.side_waits, q > 0 ? 1 : 0);
    return r.ops[k].end_s;
  };
  EXPECT_NEAR(copy_end(0, 0), copy_s, copy_s * 1e-9);                   // no key: its alone time at once
  EXPECT_NEAR(copy_end(0.5, 0), 1.25 * copy_s + copy_s, copy_s * 1e-9);  // half the 2.5 copy_s kernel, then alone
  // A quarter of its rate after the wait: 1.25 copy_s beside the compute move 0.3125 of it, the rest at full rate.
  EXPECT_NEAR(copy_end(0.5, 0.25), 2.5 * copy_s + 0.6875 * copy_s, copy_s * 1e-9);
  EXPECT_NEAR(copy_end(0, 0.25), 2.5 * copy_s + 0.375 * copy_s, copy_s * 1e-9);  // the rate alone, as before
}

// Waiting for SMs, a side copy holds none: the compute stream keeps its full rate until the wait ends, then its
// efficiency.compute_beside fraction while the copy moves.
TEST(SimulateBesideComputeWait, TheComputeStreamKeepsItsRateWhileASideCopyWaits) {
  const ComputeBesideACopy x;
  const double copy_s = x.copy_s;
  ScheduleBuilder b(x.c);
  const OpId f = b.compute("fwd", Phase::forward, x.flops);
  const OpId k = b.copy("side", Phase::forward, CopyKind::d2d, ComputeBesideACopy::kBytes, true, {}, "rs");
  ClusterSpec cl = x.c;
  cl.efficiency.beside_compute_wait.memcpy = 0.5;
  cl.efficiency.compute_beside.memcpy = 0.5;
  const TimingResult r = simulate(cl, b.s);
  EXPECT_NEAR(r.ops[k].end_s, 1.25 * copy_s + copy_s, copy_s * 1e-9);
  // 1.25 copy_s of its 2.5 at full rate, 0.5 in the copy's copy_s at half, the last 0.75 at full.
  EXPECT_NEAR(r.ops[f].end_s, 1.25 * copy_s + copy_s + 0.75 * copy_s, copy_s * 1e-9);
}

// A side copy that starts while a forward op is under way waits the mean, over a moment uniform in the op, of the time
// to q of the way through the kernel then running: q^2 L / 2 for one kernel of length L; never past the op's end.
TEST(SimulateBesideComputeWait, ASideCopyStartingMidOpWaitsTheMeanResidualAndNeverPastTheOpsEnd) {
  const ComputeBesideACopy x;
  const double copy_s = x.copy_s;
  // The copy waits for an h2d copy on a third stream, which ends while the forward op runs.
  auto run = [&](Flops flops, double q) {
    ScheduleBuilder b(x.c);
    b.compute("fwd", Phase::forward, flops);
    const OpId h = b.copy("h2d", Phase::forward, CopyKind::h2d, 5'000'000, true, {}, "h2d");
    b.copy("side", Phase::forward, CopyKind::d2d, ComputeBesideACopy::kBytes, true, {h}, "rs");
    ClusterSpec cl = x.c;
    cl.efficiency.beside_compute_wait.memcpy = q;
    return simulate(cl, b.s);
  };
  const TimingResult alone = run(x.flops, 0);
  const double t0 = alone.ops[1].end_s, long_s = x.compute_s;
  ASSERT_LT(t0, 0.5 * long_s);
  EXPECT_NEAR(alone.ops[2].end_s, t0 + copy_s, copy_s * 1e-9);
  EXPECT_NEAR(run(x.flops, 0.5).ops[2].end_s, t0 + 0.25 * long_s / 2 + copy_s, copy_s * 1e-9);
  // A forward op of 1.25 t0, q = 1: the mean residual (0.625 t0) would outlast the op; the copy starts at its end.
  const Flops short_flops = x.flops * 1.25 * t0 / long_s;
  const TimingResult capped = run(short_flops, 1);
  EXPECT_NEAR(capped.ops[0].end_s, 1.25 * t0, t0 * 1e-9);
  EXPECT_NEAR(capped.ops[2].end_s, 1.25 * t0 + copy_s, copy_s * 1e-9);
  EXPECT_NEAR(capped.side_wait_s, 0.25 * t0, t0 * 1e-9);
}

// A collective among ranks waits before its latency steps; the compute stream is not slowed by the key.
TEST(SimulateBesideComputeWait, ACollectiveAmongRanksWaitsBeforeItsLatencySteps) {
  ClusterSpec c = testing::test_cluster(1, 2);
  ScheduleBuilder b(c);
  const int world = b.group("world", 2, 2);
  const OpId f = b.compute("fwd", Phase::forward, 1e16);  // far longer than the collective
  const OpId ag = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, 400'000'000, {}, "comm");
  const TimingResult al = simulate(c, b.s);
  ClusterSpec waits = c;
  waits.efficiency.beside_compute_wait.link_collective = 0.5;
  const TimingResult r = simulate(waits, b.s);
  EXPECT_NEAR(r.ops[ag].end_s, 0.5 * al.ops[f].end_s + al.ops[ag].end_s, al.ops[f].end_s * 1e-12);
  EXPECT_NEAR(r.ops[f].end_s, al.ops[f].end_s, al.ops[f].end_s * 1e-12);
  // The one-rank classes' keys leave it alone.
  ClusterSpec other = c;
  other.efficiency.beside_compute_wait = {0.5, 0.5, 0.5, 0};
  EXPECT_NEAR(simulate(other, b.s).ops[ag].end_s, al.ops[ag].end_s, 1e-12);
}

// A collective priced by its measured bus bandwidth (efficiency.nvlink_busbw) has no fixed part, only bytes: it waits
// all the same, before they move.
TEST(SimulateBesideComputeWait, ACollectivePricedByItsMeasuredBusBandwidthWaitsBeforeItsBytes) {
  ClusterSpec c = testing::test_cluster(1, 2);
  c.efficiency.nvlink_busbw["all_gather"] = {{1e6, 100}, {1e9, 200}};
  ScheduleBuilder b(c);
  const int world = b.group("world", 2, 2);
  const OpId f = b.compute("fwd", Phase::forward, 1e16);
  const OpId ag = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, 400'000'000, {}, "comm");
  ASSERT_EQ(op_work(b.s.ops[ag], b.s, c, rank_links(Topology(c)), SimOptions{}).fixed_s, 0);
  const TimingResult al = simulate(c, b.s);
  ClusterSpec waits = c;
  waits.efficiency.beside_compute_wait.link_collective = 0.25;
  const TimingResult r = simulate(waits, b.s);
  EXPECT_NEAR(r.ops[ag].end_s, 0.25 * al.ops[f].end_s + al.ops[ag].end_s, al.ops[f].end_s * 1e-12);
  EXPECT_EQ(r.side_waits, 1);
}

}  // namespace
}  // namespace zsim
