// The arena over a fake device: buffers by schedule name, stream-ordered reuse through fences, live and
// peak accounting by tier / category / detail, and an out-of-memory message that says what is live.
#include "runtime/memory/arena.hpp"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace zrun {
namespace {

using zsim::MemCategory;
using zsim::Tier;

// Host memory as "device" memory; fences complete when the test says so.
class FakeBackend : public MemoryBackend {
 public:
  std::byte* reserve(Bytes bytes) override {
    storage_.emplace_back(static_cast<std::size_t>(bytes));
    return storage_.back().data();
  }
  void release(std::byte*) override { ++released; }
  FenceId record_fence(StreamHandle) override {
    pending.insert(next_);
    return next_++;
  }
  bool fence_done(FenceId f) override {
    ++queries;
    return !pending.count(f);
  }
  void wait_fence(FenceId f) override {
    ++waits;
    pending.erase(f);  // the host blocked until the GPU got there
  }
  void complete_all() { pending.clear(); }

  std::set<FenceId> pending;
  int waits = 0, released = 0, queries = 0;

 private:
  std::vector<std::vector<std::byte>> storage_;
  FenceId next_ = 1;
};

TEST(Arena, BuffersAreAllocatedAndFoundByScheduleName) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 1 << 20, dev, 0, acc);
  std::byte* a = arena.alloc("param.L0", MemCategory::params, "", 1000, "init.alloc");
  std::byte* b = arena.alloc("grad.L0", MemCategory::grads, "", 1000, "bwd.L0");
  EXPECT_NE(a, b);
  EXPECT_EQ(arena.get("param.L0"), a);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 256, reinterpret_cast<std::uintptr_t>(a) % 256);
  EXPECT_THROW(arena.alloc("param.L0", MemCategory::params, "", 8, "again"), std::logic_error);
  EXPECT_THROW(arena.free("nope"), std::logic_error);
}

TEST(Arena, AFreedRangeIsNotReusedWhileItsStreamWorkIsPending) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 4096, dev, 0, acc);
  std::byte* first = arena.alloc("a", MemCategory::activations, "", 1024, "fwd");
  arena.free("a");  // the GPU may still be reading it
  std::byte* second = arena.alloc("b", MemCategory::activations, "", 1024, "fwd");
  EXPECT_NE(second, first);
  EXPECT_EQ(dev.waits, 0);
  dev.complete_all();
  arena.free("b");
  dev.complete_all();
  EXPECT_EQ(arena.alloc("c", MemCategory::activations, "", 1024, "fwd"), first);  // reclaimed without waiting
  EXPECT_EQ(dev.waits, 0);
}

TEST(Arena, WhenOnlyPendingFreesWouldMakeRoomTheArenaWaitsForThem) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 2048, dev, 0, acc);
  std::byte* first = arena.alloc("a", MemCategory::buffers, "bucket", 2048, "bwd");
  arena.free("a");
  EXPECT_EQ(arena.alloc("b", MemCategory::buffers, "bucket", 2048, "bwd"), first);
  EXPECT_EQ(dev.waits, 1);
}

TEST(Arena, AnAllocationQueriesOnlyTheOldestPendingFreeOfEachStream) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 1 << 20, dev, 0, acc);
  int stream_a = 0, stream_b = 0;  // two streams' handles
  for (int i = 0; i < 40; ++i) {
    const std::string name = "t" + std::to_string(i);
    arena.alloc(name, MemCategory::activations, "", 256, "fwd");
    arena.free(name, i % 2 ? &stream_a : &stream_b);
  }
  // Every free so far is still in use on the GPU: the last allocations queried one fence per stream, not 39.
  dev.queries = 0;
  arena.alloc("next", MemCategory::activations, "", 256, "fwd");
  EXPECT_EQ(dev.queries, 2);
  EXPECT_EQ(arena.pending_free_count(), 40u);
}

TEST(Arena, AFinishedFreeOnOneStreamIsReclaimedWhileAnotherStreamIsStillBusy) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 2048, dev, 0, acc);
  int stream_a = 0, stream_b = 0;
  arena.alloc("a", MemCategory::activations, "", 1024, "fwd");
  std::byte* b = arena.alloc("b", MemCategory::activations, "", 1024, "fwd");
  arena.free("a", &stream_a);  // fence 1, still in use
  arena.free("b", &stream_b);  // fence 2
  dev.pending.erase(2);        // stream b got past its free
  EXPECT_EQ(arena.alloc("c", MemCategory::activations, "", 1024, "fwd"), b);
  EXPECT_EQ(dev.waits, 0);
  EXPECT_EQ(arena.pending_free_count(), 1u);
}

TEST(Arena, LiveAndPeakBytesAreAccountedByTierCategoryAndDetail) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 1 << 20, dev, 0, acc);
  arena.alloc("p", MemCategory::params, "", 1000, "init");
  arena.alloc("b1", MemCategory::buffers, "bucket", 300, "bwd");
  arena.alloc("b2", MemCategory::buffers, "prefetch", 200, "fwd");
  arena.free("b1");
  arena.alloc("b3", MemCategory::buffers, "bucket", 100, "bwd");
  EXPECT_EQ(acc.tier(Tier::gpu).live, 1300);
  EXPECT_EQ(acc.tier(Tier::gpu).peak, 1500);
  EXPECT_EQ(acc.category(Tier::gpu, MemCategory::buffers).live, 300);
  EXPECT_EQ(acc.category(Tier::gpu, MemCategory::buffers).peak, 500);
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::buffers, "bucket").peak, 300);
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::buffers, "prefetch").live, 200);
  EXPECT_EQ(acc.tier(Tier::cpu).peak, 0);
}

TEST(Arena, PinnedHostTierIsAccountedSeparately) {
  FakeBackend gpu_dev, host_dev;
  MemoryAccounting acc;
  Arena gpu(Tier::gpu, 4096, gpu_dev, 0, acc);
  Arena host(Tier::cpu, 4096, host_dev, 0, acc);
  gpu.alloc("g", MemCategory::grads, "", 512, "bwd");
  host.alloc("m", MemCategory::optimizer, "", 1024, "init");
  EXPECT_EQ(acc.tier(Tier::gpu).live, 512);
  EXPECT_EQ(acc.tier(Tier::cpu).live, 1024);
  EXPECT_EQ(acc.category(Tier::cpu, MemCategory::optimizer).live, 1024);
}

TEST(Arena, OutOfMemoryNamesOpRankCategoryAndTheLiveBytesPerCategory) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 4096, dev, 3, acc);
  arena.alloc("p", MemCategory::params, "", 2048, "init");
  try {
    arena.alloc("act.L7", MemCategory::activations, "", 4096, "fwd.L7.compute");
    FAIL() << "no error";
  } catch (const ArenaOutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    EXPECT_NE(m.find("out of gpu memory at op 'fwd.L7.compute'"), std::string::npos) << m;
    EXPECT_NE(m.find("buffer 'act.L7' (activations)"), std::string::npos) << m;
    EXPECT_NE(m.find("live by category: params 2.00 KiB"), std::string::npos) << m;
  }
}

TEST(Arena, TheReservedBlockIsReturnedWhenTheArenaGoes) {
  FakeBackend dev;
  MemoryAccounting acc;
  { Arena arena(Tier::gpu, 4096, dev, 0, acc); }
  EXPECT_EQ(dev.released, 1);
}

}  // namespace
}  // namespace zrun

namespace zrun {
namespace {

TEST(ArenaBeyondSchedule, BytesPastTheSchedulesAreContiguousButAccountedApart) {
  FakeBackend dev;
  MemoryAccounting acc;
  Arena arena(Tier::gpu, 1 << 20, dev, 0, acc);
  std::byte* a = arena.alloc("act.L0", MemCategory::activations, "", 1000, "fwd.embedding", 500);
  std::byte* b = arena.alloc("act.L1", MemCategory::activations, "", 1000, "fwd.L0.mlp.down");
  EXPECT_GE(b - a, 1500);  // the first buffer's range holds its 500 extra bytes
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::activations, "").live, 2000);
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::activations, kBeyondSchedule).live, 500);
  EXPECT_EQ(acc.category(Tier::gpu, MemCategory::activations).live, 2500);
  arena.free("act.L0");
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::activations, kBeyondSchedule).live, 0);
  EXPECT_EQ(acc.detail(Tier::gpu, MemCategory::activations, kBeyondSchedule).peak, 500);
}

}  // namespace
}  // namespace zrun
