// The arena's first-fit allocator: alignment, first fit, coalescing, exhaustion.
#include "runtime/memory/range_allocator.hpp"

#include <gtest/gtest.h>

namespace zrun {
namespace {

TEST(RangeAllocator, RangesStartAtMultiplesOf256AndAreRoundedUp) {
  RangeAllocator a(4096);
  EXPECT_EQ(a.allocate(1), 0);
  EXPECT_EQ(a.allocate(257), 256);   // takes 512 bytes
  EXPECT_EQ(a.allocate(0), 768);     // even an empty buffer has its own address
  EXPECT_EQ(a.used_bytes(), 1024);
}

TEST(RangeAllocator, TheLowestFreeRangeThatFitsIsTaken) {
  RangeAllocator a(4096);
  const auto x = a.allocate(256), y = a.allocate(1024), z = a.allocate(256);
  ASSERT_TRUE(x && y && z);
  a.release(*x);  // hole of 256 at 0
  a.release(*y);  // merges: hole of 1280 at 0
  EXPECT_EQ(a.allocate(512), 0);
  EXPECT_EQ(a.allocate(768), 512);  // still inside the first hole, before z
}

TEST(RangeAllocator, ReleasedNeighboursCoalesceIntoOneRange) {
  RangeAllocator a(1024);
  const auto p = a.allocate(256), q = a.allocate(256), r = a.allocate(256), s = a.allocate(256);
  ASSERT_TRUE(p && q && r && s);
  a.release(*q);
  a.release(*s);
  EXPECT_EQ(a.free_range_count(), 2u);
  a.release(*r);  // joins q's and s's ranges
  EXPECT_EQ(a.free_range_count(), 1u);
  a.release(*p);
  EXPECT_EQ(a.largest_free_bytes(), 1024);
  EXPECT_EQ(a.allocate(1024), 0);
}

TEST(RangeAllocator, NoRangeLargeEnoughIsNulloptEvenWithEnoughBytesFreeInPieces) {
  RangeAllocator a(1024);
  const auto p = a.allocate(256), q = a.allocate(256), r = a.allocate(256);
  ASSERT_TRUE(p && q && r);
  a.release(*p);
  a.release(*r);  // 256 + 512 free, not adjacent
  EXPECT_FALSE(a.allocate(768).has_value());
  EXPECT_EQ(a.allocate(512), 512);
}

TEST(RangeAllocator, ReleasingAnOffsetThatIsNotAllocatedIsALogicError) {
  RangeAllocator a(1024);
  a.allocate(10);
  EXPECT_THROW(a.release(256), std::logic_error);
}

}  // namespace
}  // namespace zrun

namespace zrun {
namespace {

TEST(RangeAllocator, ALargerAlignmentStartsAndRoundsEveryRangeToIt) {
  RangeAllocator a(1 << 20, 4096);
  EXPECT_EQ(a.allocate(1), 0);
  EXPECT_EQ(a.allocate(4097), 4096);
  EXPECT_EQ(a.allocate(100), 3 * 4096);
  EXPECT_EQ(a.used_bytes(), 4 * 4096);
}

TEST(RangeAllocator, AnAlignmentThatIsNotAPowerOfTwoOfAtLeast256IsRefused) {
  EXPECT_THROW(RangeAllocator(1 << 20, 128), std::invalid_argument);
  EXPECT_THROW(RangeAllocator(1 << 20, 3000), std::invalid_argument);
}

}  // namespace
}  // namespace zrun
