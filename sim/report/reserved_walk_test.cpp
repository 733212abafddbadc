// The reserved walk: the schedule's GPU allocations and frees, in program order, through the caching allocator model.
#include "sim/report/reserved_walk.hpp"

#include <gtest/gtest.h>

#include "sim/report/walk_test_util.hpp"

namespace zsim {
namespace {

using testing::alloc_op;
using testing::free_op;

constexpr Bytes MiB = 1024 * 1024;

Schedule schedule_of(std::vector<Op> ops) {
  Schedule s;
  s.streams = {"compute", "reduce"};
  for (Op& op : ops) s.add(std::move(op));
  return s;
}

Op on(Op op, int stream) {
  op.stream = stream;
  return op;
}

// A buffer freed on one stream's pool is reused by the next allocation of that stream, not by another stream's.
TEST(ReservedWalk, FreedBuffersAreReusedOnTheStreamThatAllocatedThem) {
  const Op a = alloc_op("a", Tier::gpu, MemCategory::buffers, 30 * MiB);
  const Op b = alloc_op("b", Tier::gpu, MemCategory::buffers, 30 * MiB);
  EXPECT_EQ(walk_reserved(schedule_of({a, free_op(a), b}), 0).peak_reserved, 30 * MiB);
  EXPECT_EQ(walk_reserved(schedule_of({a, free_op(a), on(b, 1)}), 0).peak_reserved, 60 * MiB);
}

// CPU and NVMe buffers are not the GPU allocator's; small GPU tensors share 2 MiB segments.
TEST(ReservedWalk, OnlyGpuBuffersReserveAndSmallOnesShareSegments) {
  const Op cpu = alloc_op("host", Tier::cpu, MemCategory::buffers, 100 * MiB);
  const Op x = alloc_op("x", Tier::gpu, MemCategory::activations, 4);
  const Op y = alloc_op("y", Tier::gpu, MemCategory::activations, 600 * 1024);
  const ReservedWalk w = walk_reserved(schedule_of({cpu, x, y}), 0);
  EXPECT_EQ(w.peak_reserved, 2 * MiB);
  EXPECT_EQ(w.peak_allocated, 512 + 600 * 1024);
  EXPECT_EQ(w.segments, 1);
}

// Reserved is never below what the schedule holds at its peak, and stays at its most after frees.
TEST(ReservedWalk, ReservedHoldsThePeakAfterFrees) {
  const Op a = alloc_op("a", Tier::gpu, MemCategory::buffers, 100 * MiB);
  const Op b = alloc_op("b", Tier::gpu, MemCategory::buffers, 50 * MiB);
  const ReservedWalk w = walk_reserved(schedule_of({a, b, free_op(a), free_op(b)}), 0);
  EXPECT_EQ(w.peak_reserved, 150 * MiB);
  EXPECT_EQ(w.segments, 2);
}

}  // namespace
}  // namespace zsim
