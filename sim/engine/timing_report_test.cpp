// TimingReport: the step-time split, exposed communication, FLOPS, tokens/s and the critical path on
// hand-built schedules whose answers are known in closed form.
#include "sim/engine/timing_report.hpp"

#include <gtest/gtest.h>

#include "cost_models/collective_cost.hpp"
#include "cost_models/compute_cost.hpp"
#include "sim/engine/test_schedules.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;
using testing::test_cluster;

const AlphaBeta kNvl{2e-6, 400e9};
constexpr double kOneSecondOfFlops = 5e14;  // test GPU: 1000 TFLOPS x 0.5

TEST(TimingReport, CommunicationFullyHiddenBehindComputeExposesNothing) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  b.compute("fwd", Phase::forward, kOneSecondOfFlops);
  b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, 4 * kGiB);  // ~9 ms, concurrent
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  EXPECT_DOUBLE_EQ(r.step_s, 1.0);
  EXPECT_NEAR(r.exposed_comm_s, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.compute_s, 1.0);
  EXPECT_NEAR(r.comm_busy_s, collective_s(CollectiveKind::all_gather, 4.0 * kGiB, 8, kNvl), 1e-12);
}

TEST(TimingReport, ACommunicationOnlyStepIsAllExposedComm) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  OpId a = b.collective("ag", Phase::forward, CollectiveKind::all_gather, world, kGiB);
  b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, kGiB, {a});
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  const double one = collective_s(CollectiveKind::all_gather, 1.0 * kGiB, 8, kNvl);
  EXPECT_NEAR(r.step_s, 2 * one, 1e-12);
  EXPECT_NEAR(r.exposed_comm_s, 2 * one, 1e-12);
  EXPECT_NEAR(r.exposed_comm_by_phase.at("forward"), one, 1e-12);
  EXPECT_NEAR(r.exposed_comm_by_phase.at("backward"), one, 1e-12);
  EXPECT_NEAR(r.exposed_comm_by_collective.at("all_gather"), one, 1e-12);
  EXPECT_NEAR(r.exposed_comm_by_collective.at("reduce_scatter"), one, 1e-12);
  EXPECT_EQ(r.compute_s, 0.0);
}

TEST(TimingReport, TheStepSplitsIntoComputeOptimizerExposedCommOffloadAndIdle) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  OpId f = b.compute("fwd", Phase::forward, kOneSecondOfFlops);                                  // 1 s compute
  OpId g = b.collective("rs", Phase::backward, CollectiveKind::reduce_scatter, world, kGiB, {f});  // exposed
  OpId d = b.copy("d2h", Phase::step, CopyKind::d2h, 5'000'000'000, true, {g});                  // 0.1 s exposed
  b.cpu_adam("adam", 800'000'000, {d});                                                          // 1 s optimizer
  const TimingResult t = simulate(c, b.s);
  const TimingReport r = summarize(b.s, t);
  EXPECT_DOUBLE_EQ(r.compute_s, 1.0);
  EXPECT_NEAR(r.exposed_comm_s, t.ops[g].duration_s(), 1e-12);
  EXPECT_NEAR(r.offload_s, 3e-6 + 0.1, 1e-12);
  EXPECT_NEAR(r.optimizer_s, 1.0, 1e-12);
  EXPECT_NEAR(r.compute_s + r.optimizer_s + r.exposed_comm_s + r.offload_s + r.idle_s, r.step_s, 1e-12);
  EXPECT_NEAR(r.idle_s, 0.0, 1e-12);
}

TEST(TimingReport, ModelFlopsCountForwardAndBackwardAndHardwareFlopsAddRecomputation) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  b.s.meta.tokens_per_step = 8 * 4096;
  const double F = kOneSecondOfFlops;
  OpId f = b.compute("fwd", Phase::forward, F);
  OpId re = b.compute("recompute", Phase::backward, F, {f}, "compute", ComputeKind::recompute);
  b.compute("bwd", Phase::backward, 2 * F, {re}, "compute", ComputeKind::backward);
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  ASSERT_DOUBLE_EQ(r.step_s, 4.0);
  EXPECT_DOUBLE_EQ(r.model_flops_per_gpu, 3 * F);
  EXPECT_DOUBLE_EQ(r.hardware_flops_per_gpu, 4 * F);
  EXPECT_DOUBLE_EQ(r.tflops_per_gpu, 3 * F / 4.0 / 1e12);
  EXPECT_DOUBLE_EQ(r.hardware_tflops_per_gpu, 4 * F / 4.0 / 1e12);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 8 * 4096 / 4.0);
}

TEST(TimingReport, CriticalPathFollowsTheLatestFinishingPredecessor) {
  // compute A (1 s) -> all-reduce; an independent short compute B on another stream is off the path.
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  const int world = b.group("world", 8, 8);
  OpId a = b.compute("A", Phase::backward, kOneSecondOfFlops, {}, "compute", ComputeKind::backward);
  b.compute("B", Phase::backward, kOneSecondOfFlops / 10, {}, "side");
  OpId ar = b.collective("ar", Phase::step, CollectiveKind::all_reduce, world, kGiB, {a});
  const TimingResult t = simulate(c, b.s);
  const TimingReport r = summarize(b.s, t);
  EXPECT_EQ(r.critical_ops, (std::vector<OpId>{ar, a}));
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[0].label, "backward compute.backward");
  EXPECT_DOUBLE_EQ(r.critical_path[0].seconds, 1.0);
  EXPECT_EQ(r.critical_path[1].label, "step all_reduce@world");
  EXPECT_NEAR(r.critical_path[1].seconds, t.ops[ar].duration_s(), 1e-12);
  EXPECT_NEAR(r.critical_path_s, r.step_s, 1e-12);
}

TEST(TimingReport, WithSeveralStepsItReportsTheLastStepsWindow) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c, 2);
  b.s.meta.tokens_per_step = 1000;
  for (int k = 0; k < 2; ++k) {
    OpId f = b.compute("fwd", Phase::forward, kOneSecondOfFlops, k ? std::vector<OpId>{1} : std::vector<OpId>{});
    b.compute("opt", Phase::step, kOneSecondOfFlops / 2, {f}, "compute", ComputeKind::optimizer);
  }
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  EXPECT_EQ(r.steps_simulated, 2);
  EXPECT_DOUBLE_EQ(r.step_s, 1.5);
  EXPECT_DOUBLE_EQ(r.compute_s, 1.0);
  EXPECT_DOUBLE_EQ(r.optimizer_s, 0.5);
  EXPECT_DOUBLE_EQ(r.model_flops_per_gpu, kOneSecondOfFlops);  // one step's forward only
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 1000 / 1.5);
}

TEST(TimingReport, TimedPeakMemoryCountsBuffersAllocatedAheadOnAnotherStream) {
  // Program order: alloc A, compute (1 s), free A, alloc B (on the comm stream, no deps), free B after.
  // In program order at most one buffer is live; in time B is allocated at t = 0, while A is live.
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  auto mem = [&](OpKind kind, const std::string& buffer, const std::string& stream, std::vector<OpId> deps) {
    Op op;
    op.kind = kind;
    op.name = std::string(kind == OpKind::alloc ? "alloc." : "free.") + buffer;
    op.phase = Phase::forward;
    op.stream = b.s.stream(stream);
    op.deps = std::move(deps);
    op.mem = {buffer, Tier::gpu, MemCategory::buffers, "gathered", kGiB};
    return b.s.add(std::move(op));
  };
  OpId a = mem(OpKind::alloc, "A", "compute", {});
  OpId f = b.compute("fwd", Phase::forward, kOneSecondOfFlops, {a});
  mem(OpKind::free, "A", "compute", {f});
  OpId bb = mem(OpKind::alloc, "B", "comm", {});
  mem(OpKind::free, "B", "compute", {bb});
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  EXPECT_EQ(r.timed_peak_bytes[static_cast<int>(Tier::gpu)], 2 * kGiB);
  EXPECT_EQ(r.timed_peak_bytes[static_cast<int>(Tier::cpu)], 0);
}

TEST(TimingReport, AProgramOfOnlyInitOpsHasNoStepAndNoThroughput) {
  const ClusterSpec c = test_cluster(1, 8);
  ScheduleBuilder b(c);
  b.compute("init.warmup", Phase::init, kOneSecondOfFlops);
  const TimingReport r = summarize(b.s, simulate(c, b.s));
  EXPECT_EQ(r.steps_simulated, 0);
  EXPECT_EQ(r.step_s, 0.0);
  EXPECT_EQ(r.model_flops_per_gpu, 0.0);
  EXPECT_EQ(r.tflops_per_gpu, 0.0);
}

}  // namespace
}  // namespace zsim
