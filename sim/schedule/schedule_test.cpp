#include "sim/schedule/schedule.hpp"

#include <gtest/gtest.h>

using namespace zsim;

namespace {
Op alloc(const std::string& name, Bytes bytes) {
  Op op;
  op.kind = OpKind::alloc;
  op.name = "alloc." + name;
  op.mem.buffer = name;
  op.mem.bytes = bytes;
  return op;
}
Op free_of(const Op& a) {
  Op op = a;
  op.kind = OpKind::free;
  op.name = "free." + a.mem.buffer;
  return op;
}
}  // namespace

TEST(Schedule, AddAssignsIdsInProgramOrder) {
  Schedule s;
  s.stream("compute");
  EXPECT_EQ(s.add(alloc("a", 10)), 0);
  EXPECT_EQ(s.add(alloc("b", 20)), 1);
  EXPECT_EQ(s.ops[1].id, 1);
}

TEST(Schedule, StreamAndGroupLookupsAreIdempotent) {
  Schedule s;
  EXPECT_EQ(s.stream("compute"), 0);
  EXPECT_EQ(s.stream("comm"), 1);
  EXPECT_EQ(s.stream("compute"), 0);
  EXPECT_EQ(s.group({"world", 16, 8, 1}), 0);
  EXPECT_EQ(s.group({"world", 16, 8, 1}), 0);
  EXPECT_EQ(s.groups[0].nodes_spanned(), 2);
  EXPECT_TRUE(s.groups[0].crosses_nodes());
}

TEST(Schedule, CheckAcceptsMatchedAllocAndFree) {
  Schedule s;
  s.stream("compute");
  Op a = alloc("x", 64);
  s.add(a);
  s.add(free_of(a));
  EXPECT_NO_THROW(check_schedule(s));
}

TEST(Schedule, CheckRejectsForwardDependency) {
  Schedule s;
  s.stream("compute");
  Op a = alloc("x", 64);
  a.deps = {1};
  s.add(a);
  s.add(alloc("y", 1));
  EXPECT_THROW(check_schedule(s), std::logic_error);
}

TEST(Schedule, CheckRejectsFreeOfUnknownBuffer) {
  Schedule s;
  s.stream("compute");
  s.add(free_of(alloc("ghost", 8)));
  EXPECT_THROW(check_schedule(s), std::logic_error);
}

TEST(Schedule, CheckRejectsFreeWithDifferentSize) {
  Schedule s;
  s.stream("compute");
  Op a = alloc("x", 64);
  s.add(a);
  Op f = free_of(a);
  f.mem.bytes = 32;
  s.add(f);
  EXPECT_THROW(check_schedule(s), std::logic_error);
}
