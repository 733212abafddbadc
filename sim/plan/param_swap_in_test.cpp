// offload_param nvme: the trace's swap-ins follow DeepSpeed's swapper and coordinator (partitioned_param_swapper.py,
// partitioned_param_coordinator.py): reads into a pool of buffer_count buffers, prefetch that stops at a partition not
// read yet, reads ahead, and the assertion where the pool runs out.
#include "sim/plan/param_swap_in.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

namespace zsim {
namespace {


// Replays a trace's reads and releases; checks that a buffer is taken only when free and that every gather (own fetch
// or prefetch) finds its unit's NVMe partitions read. Returns the most buffers held at once.
int replay(const Plan& p) {
  const auto swapped = tensors_swapped_in(p);
  std::map<std::pair<int, int>, int> held;  // (unit, tensor) -> buffer
  std::set<int> busy;
  int most = 0;
  auto take = [&](const SwapIn& r) {
    EXPECT_FALSE(busy.count(r.buffer)) << "buffer " << r.buffer << " taken twice";
    EXPECT_FALSE(held.count({r.unit, r.tensor})) << p.units[r.unit].name << " read twice";
    EXPECT_GE(r.buffer, 0);
    EXPECT_LT(r.buffer, p.param_swap_buffers);
    busy.insert(r.buffer);
    held[{r.unit, r.tensor}] = r.buffer;
    most = std::max(most, static_cast<int>(busy.size()));
  };
  auto expect_read = [&](int u) {
    for (const auto& [su, k] : swapped)
      if (su == u) EXPECT_TRUE(held.count({u, k})) << p.units[u].name << " gathered before its partition was read";
  };
  auto give_back = [&](int u) {
    for (auto it = held.begin(); it != held.end();)
      if (it->first.first == u) {
        busy.erase(it->second);
        it = held.erase(it);
      } else {
        ++it;
      }
  };
  for (const FetchStep& st : p.trace) {
    // A recompute's modules run one by one: each reads its own, and one released after the step gives its buffers
    // back before the next module reads.
    for (int u : st.fetch) {
      for (const SwapIn& r : st.swap_in)
        if (r.unit == u) take(r);
      expect_read(u);
      if (st.recompute && std::count(st.release.begin(), st.release.end(), u)) give_back(u);
    }
    for (int u : st.prefetch) expect_read(u);
    for (const SwapIn& r : st.swap_in_ahead) take(r);
    for (int u : st.release) give_back(u);
  }
  EXPECT_TRUE(held.empty()) << "buffers still held at the end of the micro-step";
  return most;
}

TEST(ParamSwapIn, EveryGatherFindsItsPartitionsReadIntoBuffersOfThePool) {
  const Plan p = make_plan(test::nvme_swapping());
  EXPECT_EQ(p.param_swap_buffers, 5);
  EXPECT_EQ(p.param_swap_buffer_elements, swap_io_aligned(100'000'000, 2));
  ASSERT_EQ(tensors_swapped_in(p).size(), 2u * 7 + 2);  // every matrix, the embedding and the head
  const int most = replay(p);
  EXPECT_GT(most, 1);
  EXPECT_LE(most, 5);
}

TEST(ParamSwapIn, ThePrefetchReadsAheadAndStopsAtAPartitionNotReadYet) {
  Scenario s = test::nvme_swapping();
  s.runtime = RuntimeKind::zrun;  // zrun's trace with and without NVMe reads (DeepSpeed's reads through its pool too)
  s.zero.stage3_prefetch_bucket_size = 1'000'000'000;  // the whole model fits the prefetch bucket
  const Plan nvme = make_plan(s);
  size_t ahead = 0, prefetched = 0;
  for (const FetchStep& st : nvme.trace) ahead += st.swap_in_ahead.size(), prefetched += st.prefetch.size();
  EXPECT_GT(ahead, 0u);
  replay(nvme);  // no prefetch of a unit whose partition is not read
  s.zero.offload_param.device = OffloadDevice::cpu;  // nothing to read: the prefetch takes the whole window
  size_t cpu_prefetched = 0;
  for (const FetchStep& st : make_plan(s).trace) cpu_prefetched += st.prefetch.size();
  EXPECT_LT(prefetched, cpu_prefetched);
  s.zero.offload_param.device = OffloadDevice::nvme;
  s.zero.stage3_prefetch_bucket_size = 0;  // no prefetch, no reads ahead: each fetch reads its own
  for (const FetchStep& st : make_plan(s).trace) EXPECT_TRUE(st.swap_in_ahead.empty());
}

TEST(ParamSwapIn, KeptParametersThatHoldEveryBufferAreRefusedWithTheCountThatRuns) {
  Scenario s = test::nvme_swapping();
  s.zero.stage3_max_reuse_distance = 1'000'000'000;  // DeepSpeed's default: the forward's gathers kept for the backward
  try {
    make_plan(s);
    FAIL() << "5 buffers cannot hold the parameters kept for reuse";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("offload_param.buffer_count 5 is too few"), std::string::npos) << what;
    const auto at = what.find(">= ");
    ASSERT_NE(at, std::string::npos) << what;
    const int enough = std::stoi(what.substr(at + 3));
    s.zero.offload_param.buffer_count = enough;  // the count it names runs, one fewer does not
    EXPECT_LE(replay(make_plan(s)), enough);
    s.zero.offload_param.buffer_count = enough - 1;
    EXPECT_THROW(make_plan(s), std::invalid_argument);
  }
}

TEST(ParamSwapIn, ABufferNoLargerThanALargestSwappedPartitionIsRefused) {
  Scenario s = test::nvme_swapping();
  s.zero.offload_param.buffer_size = 1 << 20;  // the MLP matrices' partitions are 1 Mi elements
  try {
    make_plan(s);
    FAIL() << "get_buffer asserts numel < buffer_size";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("offload_param.buffer_size 1048576 is too small"), std::string::npos) << e.what();
  }
  s.zero.offload_param.buffer_size = (1 << 20) + 1;
  EXPECT_NO_THROW(make_plan(s));
}

TEST(ParamSwapIn, PartitionsUnderOneMiBDoNotUseThePool) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);  // 512 KiB matrices over 8 ranks
  s.zero.offload_param.device = OffloadDevice::nvme;
  s.zero.offload_param.max_in_cpu = 0;
  const Plan p = make_plan(s);
  EXPECT_TRUE(tensors_swapped_in(p).empty());
  for (const FetchStep& st : p.trace) EXPECT_TRUE(st.swap_in.empty() && st.swap_in_ahead.empty());
}

// DeepSpeed's 16-bit write-back buffer (reserve_partitioned_swap_space) holds the whole parameters of the largest
// sub-group, io-aligned, not the rank's partition of them: with one sub-group on 8 ranks, every tensor's io-aligned
// numel, about 8x the partition. The schedule allocates it so.
TEST(ParamSwapIn, TheWriteBackBufferHoldsTheLargestSubGroupsWholeParametersIoAligned) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.offload_param.device = OffloadDevice::nvme;
  s.zero.offload_param.max_in_cpu = 0;
  const Plan p = make_plan(s);
  ASSERT_EQ(p.sub_groups.size(), 1u);
  Elements whole = 0;
  for (const FetchUnit& u : p.units)
    for (const TensorShape& t : u.tensors) whole += swap_io_aligned(t.numel(), p.elem_bytes);
  EXPECT_EQ(param_swap_out_elements(p), whole);
  EXPECT_GT(param_swap_out_elements(p), 7 * p.optimizer_partition);
  const Schedule sch = make_schedule(s, p, 1);
  int found = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::alloc && op.mem.buffer == "params16.swap_out") {
      EXPECT_EQ(op.mem.bytes, p.elem_bytes * whole);
      ++found;
    }
  EXPECT_EQ(found, 1);
  // Sub-groups of a third of the partition: the first of the largest holds the tensors whose chunks meet its range.
  s.zero.sub_group_size = p.optimizer_partition / 3;
  const Plan q = make_plan(s);
  ASSERT_GE(q.sub_groups.size(), 3u);
  EXPECT_LT(param_swap_out_elements(q), whole);
  EXPECT_GE(param_swap_out_elements(q), 8 * q.sub_groups.front() - 8 * 512);
}

TEST(ParamSwapIn, ThePoolHandsOutTheLastFreeBufferFirst) {
  ParamSwapPool pool(3);
  EXPECT_EQ(pool.take(), 2);
  EXPECT_EQ(pool.take(), 1);
  pool.give_back(2);
  EXPECT_EQ(pool.take(), 2);
  EXPECT_EQ(pool.free(), 1);
  EXPECT_EQ(swap_io_aligned(100'000'000, 2), 100'000'256);  // a multiple of 512 bf16 elements (1 KiB)
  EXPECT_EQ(swap_io_aligned(512, 2), 512);
}

}  // namespace
}  // namespace zsim
