// The caching allocator model against the rules of c10/cuda/CUDACachingAllocator.cpp (torch 2.11), one rule a test.
#include "sim/report/caching_allocator.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

constexpr Bytes KiB = 1024, MiB = 1024 * 1024;

TEST(CachingAllocatorModel, RoundsEveryRequestUpToA512ByteMultiple) {
  EXPECT_EQ(CachingAllocatorModel::round_size(1), 512);
  EXPECT_EQ(CachingAllocatorModel::round_size(512), 512);
  EXPECT_EQ(CachingAllocatorModel::round_size(513), 1024);
  CachingAllocatorModel a;
  a.allocate(4, 0);  // a 4-byte scalar holds a 512-byte block
  EXPECT_EQ(a.allocated_bytes(), 512);
}

TEST(CachingAllocatorModel, SmallRequestsShareTwoMiBSegments) {
  CachingAllocatorModel a;
  for (int i = 0; i < 4; ++i) a.allocate(512 * KiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 2 * MiB);  // four 512 KiB blocks split out of one 2 MiB segment
  EXPECT_EQ(a.segments(), 1);
  a.allocate(512 * KiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 4 * MiB);
  a.allocate(1 * MiB, 0);  // 1 MiB is still small: the second segment's rest
  EXPECT_EQ(a.reserved_bytes(), 4 * MiB);
}

TEST(CachingAllocatorModel, LargeRequestsUnderTenMiBShareTwentyMiBSegments) {
  CachingAllocatorModel a;
  for (int i = 0; i < 6; ++i) a.allocate(3 * MiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 20 * MiB);  // 18 MiB of blocks, 2 MiB free in the segment
  a.allocate(3 * MiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 40 * MiB);
  EXPECT_EQ(a.segments(), 2);
}

TEST(CachingAllocatorModel, LargerRequestsGetTheirOwnSegmentRoundedToTwoMiB) {
  CachingAllocatorModel a;
  a.allocate(11 * MiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 12 * MiB);
  // The 1 MiB left is not split off (a large block's rest must exceed 1 MiB): the block is the whole segment.
  EXPECT_EQ(a.allocated_bytes(), 12 * MiB);
  a.allocate(10 * MiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 22 * MiB);
}

TEST(CachingAllocatorModel, FreedBlocksStayReservedAndServeTheNextRequest) {
  CachingAllocatorModel a;
  const auto h = a.allocate(100 * MiB, 0);
  a.free(h);
  EXPECT_EQ(a.allocated_bytes(), 0);
  EXPECT_EQ(a.reserved_bytes(), 100 * MiB);  // cached, not given back
  a.allocate(60 * MiB, 0);                   // split out of the cached block
  a.allocate(30 * MiB, 0);                   // and the rest
  EXPECT_EQ(a.reserved_bytes(), 100 * MiB);
  EXPECT_EQ(a.allocated_bytes(), 90 * MiB);
}

TEST(CachingAllocatorModel, TakesTheSmallestFreeBlockThatFits) {
  CachingAllocatorModel a;
  const auto big = a.allocate(40 * MiB, 0);
  const auto mid = a.allocate(24 * MiB, 0);
  a.free(big);
  a.free(mid);
  a.allocate(22 * MiB, 0);  // the 24 MiB block (its 2 MiB rest split off)
  a.allocate(38 * MiB, 0);  // so the 40 MiB block is still whole for this one
  EXPECT_EQ(a.reserved_bytes(), 64 * MiB);
  a.allocate(24 * MiB, 0);  // nothing free that large: a new segment
  EXPECT_EQ(a.reserved_bytes(), 88 * MiB);
}

TEST(CachingAllocatorModel, AStreamReusesOnlyBlocksAllocatedOnIt) {
  CachingAllocatorModel a;
  a.free(a.allocate(50 * MiB, 0));
  a.allocate(50 * MiB, 1);
  EXPECT_EQ(a.reserved_bytes(), 100 * MiB);
  a.allocate(50 * MiB, 0);
  EXPECT_EQ(a.reserved_bytes(), 100 * MiB);
}

TEST(CachingAllocatorModel, FreedNeighboursMergeIntoOneBlock) {
  CachingAllocatorModel a;
  a.free(a.allocate(90 * MiB, 0));  // one 90 MiB segment, cached
  const auto x = a.allocate(30 * MiB, 0);
  const auto y = a.allocate(30 * MiB, 0);
  const auto z = a.allocate(30 * MiB, 0);  // three blocks split out of it
  EXPECT_EQ(a.reserved_bytes(), 90 * MiB);
  a.free(x);
  a.free(z);
  a.free(y);                // x, y and z are one free block again
  a.allocate(90 * MiB, 0);  // which holds all of this
  EXPECT_EQ(a.reserved_bytes(), 90 * MiB);
}

TEST(CachingAllocatorModel, BlocksSplitOutOfASegmentDoNotMergeAcrossSegments) {
  CachingAllocatorModel a;
  const auto x = a.allocate(30 * MiB, 0);
  const auto y = a.allocate(30 * MiB, 0);
  a.free(x);
  a.free(y);
  a.allocate(60 * MiB, 0);  // two separate 30 MiB segments: neither holds it
  EXPECT_EQ(a.reserved_bytes(), 120 * MiB);
}

TEST(CachingAllocatorModel, GivesCachedSegmentsBackOnlyWhenTheDeviceIsFull) {
  CachingAllocatorModel a(100 * MiB);
  const auto x = a.allocate(60 * MiB, 0);
  a.allocate(20 * MiB, 0);
  a.free(x);
  EXPECT_EQ(a.reserved_bytes(), 80 * MiB);
  a.allocate(40 * MiB, 1);  // another stream: 80 + 40 > 100, so the free 60 MiB segment is released first
  EXPECT_EQ(a.releases(), 1);
  EXPECT_EQ(a.reserved_bytes(), 60 * MiB);
  EXPECT_FALSE(a.out_of_memory());
  a.allocate(50 * MiB, 0);  // nothing left to release
  EXPECT_TRUE(a.out_of_memory());
  EXPECT_EQ(a.peak_reserved_bytes(), 110 * MiB);
}

TEST(CachingAllocatorModel, FreeingABlockNotInUseIsAnError) {
  CachingAllocatorModel a;
  const auto h = a.allocate(1 * MiB, 0);
  a.free(h);
  EXPECT_THROW(a.free(h), std::logic_error);
}

}  // namespace
}  // namespace zsim
