// The issuing thread's calls per op (what efficiency.host_issue prices), counted as zrun's executor makes them.
#include "sim/engine/host_issue.hpp"

#include <gtest/gtest.h>

#include "sim/engine/test_schedules.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"
#include "sim/schedule/zeroed_allocs.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;

// The first compute op of that name (a micro-step's tag aside).
const Op& named(const Schedule& s, const std::string& name) {
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && (op.name == name || op.name.rfind(name + ".s", 0) == 0)) return op;
  throw std::runtime_error("no op " + name);
}

// A linear unit's forward is one cuBLASLt call; up's forward adds the activation kernel; a backward two GEMMs per
// weight; every other launch of the op (norms, the loss) a kernel.
TEST(HostCalls, ALayerOpsGemmsAreCublasCallsAndItsOtherLaunchesKernels) {
  Scenario sc = test::scenario(test::small_llama(2), 3, 1, 1);
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  const HostCalls q = host_calls(named(s, "fwd.L0.attn.q"), s, 0, false);
  EXPECT_EQ(q.gemms, 1);
  EXPECT_EQ(q.kernels, 0);
  const HostCalls up = host_calls(named(s, "fwd.L0.mlp.up"), s, 0, false);
  EXPECT_EQ(up.gemms, 1);
  EXPECT_EQ(up.kernels, 1);
  const HostCalls qb = host_calls(named(s, "bwd.L0.attn.q"), s, 0, false);
  EXPECT_EQ(qb.gemms, 2);
  const HostCalls norm = host_calls(named(s, "fwd.L0.attn.norm"), s, 0, false);
  EXPECT_EQ(norm.gemms, 0);
  EXPECT_EQ(norm.kernels, named(s, "fwd.L0.attn.norm").compute.kernel_launches);
}

// A copy: one cudaMemcpyAsync per (input, output) pair; a torch.cat of fewer launches than pieces its launches; a cast
// or an add a kernel per pair; an NVMe transfer or a CPU op one host function; a collective one NCCL call.
TEST(HostCalls, CopiesCallOncePerPieceOrPerBatchedLaunch) {
  const ClusterSpec c = testing::test_cluster(1, 1);
  ScheduleBuilder b(c);
  Op buf;
  buf.name = "alloc.buf";
  buf.kind = OpKind::alloc;
  buf.stream = b.s.stream("rs");
  buf.mem = {"buf", Tier::gpu, MemCategory::buffers, "bucket", 4096};
  const OpId a = b.s.add(buf);
  const OpId cp = b.copy("cp", Phase::forward, CopyKind::d2d, 1024, true, {a}, "rs");
  for (int i = 0; i < 3; ++i) {
    b.s.ops[cp].uses.push_back({a, 100 * i, 100, Role::input, Access::read});
    b.s.ops[cp].uses.push_back({a, 2048 + 100 * i, 100, Role::output, Access::write});
  }
  b.s.ops[cp].copy.kernel_launches = 3;  // a copy_ per piece
  EXPECT_EQ(host_calls(b.s.ops[cp], b.s, 0, false).memcpys, 3);
  b.s.ops[cp].copy.kernel_launches = 1;  // a torch.cat: one batched launch
  HostCalls h = host_calls(b.s.ops[cp], b.s, 0, false);
  EXPECT_EQ(h.memcpys, 0);
  EXPECT_EQ(h.kernels, 1);
  b.s.ops[cp].copy.kernel_launches = 3;
  b.s.ops[cp].uses[1].access = Access::read_write;  // add_: a kernel per piece
  h = host_calls(b.s.ops[cp], b.s, 0, false);
  EXPECT_EQ(h.kernels, 3);
  const OpId rd = b.copy("rd", Phase::forward, CopyKind::nvme_read, 1 << 20);
  EXPECT_EQ(host_calls(b.s.ops[rd], b.s, 0, false).kernels, 1);
  const OpId adam = b.cpu_adam("adam", 1000);
  EXPECT_EQ(host_calls(b.s.ops[adam], b.s, 0, false).kernels, 1);
  const OpId ag = b.collective("ag", Phase::forward, CollectiveKind::all_gather, b.group("one", 1, 1), 4096);
  EXPECT_EQ(host_calls(b.s.ops[ag], b.s, 0, false).collectives, 1);
}

// An alloc is a cudaMemsetAsync where the runtime fills the buffer with zeros (a bucket, gradients; zeroed_allocs),
// else no CUDA call; a free records the arena's fence event, after which its range can be reused.
TEST(HostCalls, AZeroedAllocIsAMemsetAndAFreeRecordsItsFence) {
  Scenario sc = test::scenario(test::small_llama(2), 2, 1, 1);
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  const std::vector<char> zeroed = zeroed_allocs(s);
  int buckets = 0, plain = 0, frees = 0;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::alloc && op.phase != Phase::init) {
      const HostCalls h = host_calls(op, s, 0, false, zeroed[op.id]);
      const bool starts_at_zero = op.mem.detail == "bucket" || op.mem.category == MemCategory::grads;
      EXPECT_EQ(h.kernels, starts_at_zero ? 1 : 0) << op.name;
      EXPECT_EQ(h.gemms + h.collectives + h.memcpys + h.events, 0) << op.name;
      (starts_at_zero ? buckets : plain) += 1;
    }
    if (op.kind == OpKind::free) {
      const HostCalls h = host_calls(op, s, 0, false);
      EXPECT_EQ(h.events, 1) << op.name;
      EXPECT_EQ(h.kernels + h.gemms + h.collectives + h.memcpys, 0) << op.name;
      ++frees;
    }
  }
  EXPECT_GT(buckets, 0);  // stage 2's reduction buckets and gradient buffers
  EXPECT_GT(plain, 0);
  EXPECT_GT(frees, 0);
}

// Events: each wait for another stream and the event a later op of another stream waits for. The step zsim predicts
// has no per-op timing events (zrun records those only in its op-timed step, which the reported step time leaves out).
TEST(HostCalls, EventsAreTheWaitsAndTheRecordForOtherStreams) {
  const ClusterSpec c = testing::test_cluster(1, 1);
  ScheduleBuilder b(c);
  const OpId f = b.compute("f", Phase::forward, 1e9);
  EXPECT_EQ(host_calls(b.s.ops[f], b.s, 0, false).events, 0);
  EXPECT_EQ(host_calls(b.s.ops[f], b.s, 2, true).events, 2 + 1);
  Op buf;
  buf.name = "alloc.buf";
  buf.kind = OpKind::alloc;
  buf.mem = {"buf", Tier::gpu, MemCategory::buffers, "bucket", 4096};
  const OpId a = b.s.add(buf);
  EXPECT_EQ(host_calls(b.s.ops[a], b.s, 1, false).events, 1);
}

// Without the profile's block the host costs nothing; with it, an op's time is its calls at their prices, and its lead
// the waits, then its first call.
TEST(HostIssue, PricesEachOpsCallsAtTheProfilesFigures) {
  ClusterSpec c = testing::test_cluster(1, 1);
  ScheduleBuilder b(c);
  const OpId f = b.compute("f", Phase::forward, 1e9);
  b.s.ops[f].compute.kernel_launches = 3;
  const OpId g = b.copy("g", Phase::forward, CopyKind::h2d, 4096, true, {f});
  EXPECT_EQ(host_issue(b.s, c)[f].total_s, 0);
  c.efficiency.host_issue = {2, 5, 7, 3, 1};  // kernel, gemm, collective, memcpy, event
  const std::vector<HostIssue> h = host_issue(b.s, c);
  EXPECT_NEAR(h[f].total_s, (3 * 2 + 1) * 1e-6, 1e-15);  // 3 kernels, the event g waits for
  EXPECT_NEAR(h[f].lead_s, 2e-6, 1e-15);
  EXPECT_NEAR(h[g].total_s, (1 + 3) * 1e-6, 1e-15);  // the wait, one memcpy
  EXPECT_NEAR(h[g].lead_s, (1 + 3) * 1e-6, 1e-15);
}

// An NCCL call on a group of 2+ ranks costs the host calibrate's enqueue among the GPUs where the profile has it; a
// one-rank call (one GPU's collectives) the one-rank figure, as every collective does without it.
TEST(HostIssue, ACollectiveAmongRanksIsPricedAtTheEnqueueAmongTheGpus) {
  ClusterSpec c = testing::test_cluster(1, 2);
  ScheduleBuilder b(c);
  const OpId two = b.collective("two", Phase::forward, CollectiveKind::all_gather, b.group("world", 2, 2), 4096);
  const OpId one = b.collective("one", Phase::forward, CollectiveKind::all_gather, b.group("self", 1, 1), 4096);
  c.efficiency.host_issue = {2, 5, 7, 3, 1};
  EXPECT_NEAR(host_issue(b.s, c)[two].total_s, 7e-6, 1e-15);
  c.efficiency.host_issue.link_collective_us = 9;
  const std::vector<HostIssue> h = host_issue(b.s, c);
  EXPECT_NEAR(h[two].total_s, 9e-6, 1e-15);
  EXPECT_NEAR(h[two].lead_s, 9e-6, 1e-15);
  EXPECT_NEAR(h[one].total_s, 7e-6, 1e-15);
}

}  // namespace
}  // namespace zsim
