// (color, key) for ncclCommSplit from a schedule group's shape. The expected membership is written from
// what each group means (docs/schedule-semantics.md), not from the formula under test: two ranks share a
// color exactly when they belong to the same group instance, and the key is the member's position in it.
#include "runtime/comm/group_split.hpp"

#include <functional>

#include <gtest/gtest.h>

namespace zrun {
namespace {

using zsim::ProcessGroup;

// The shapes zsim's plan gives its groups (sim/plan/plan.cpp) for a world of nodes x gpn.
ProcessGroup world_group(int nodes, int gpn) { return {"world", nodes * gpn, gpn, 1}; }
ProcessGroup intra_node(int gpn) { return {"intra_node", gpn, gpn, 1}; }
ProcessGroup inter_node(int nodes, int gpn) { return {"inter_node", nodes, 1, gpn}; }
ProcessGroup hpz(int h) { return {"hpz", h, h, 1}; }

// same(a, b): a and b are in one instance; position(r): r's index inside its instance.
void expect_split(const ProcessGroup& g, int world, int gpn, const std::function<bool(int, int)>& same,
                  const std::function<int(int)>& position) {
  for (int a = 0; a < world; ++a) {
    const SplitColorKey ka = split_color_key(a, g, world, gpn);
    EXPECT_EQ(ka.key, position(a)) << g.name << " rank " << a;
    for (int b = 0; b < world; ++b)
      EXPECT_EQ(ka.color == split_color_key(b, g, world, gpn).color, same(a, b))
          << g.name << " ranks " << a << ", " << b;
  }
}

TEST(GroupSplit, WorldIsOneGroupKeyedByGlobalRank) {
  expect_split(world_group(2, 4), 8, 4, [](int, int) { return true; }, [](int r) { return r; });
}

TEST(GroupSplit, IntraNodeGroupsAreTheRanksOfOneNodeKeyedByLocalRank) {
  const int gpn = 4;
  expect_split(intra_node(gpn), 16, gpn, [&](int a, int b) { return a / gpn == b / gpn; },
               [&](int r) { return r % gpn; });
}

TEST(GroupSplit, InterNodeGroupsAreOneRankPerNodeWithTheSameLocalRankKeyedByNode) {
  const int gpn = 4, nodes = 3;
  expect_split(inter_node(nodes, gpn), nodes * gpn, gpn, [&](int a, int b) { return a % gpn == b % gpn; },
               [&](int r) { return r / gpn; });
}

TEST(GroupSplit, HpzGroupsAreConsecutiveBlocksInsideANode) {
  const int gpn = 8, h = 2;
  expect_split(hpz(h), 16, gpn, [&](int a, int b) { return a / h == b / h; }, [&](int r) { return r % h; });
}

TEST(GroupSplit, VirtualNodesOfOneGpuMakeIntraNodeGroupsOfOneAndInterNodeTheWorld) {
  // `zrun --gpus-per-node 1` on a host of 2 GPUs: two virtual nodes of one GPU each.
  expect_split(intra_node(1), 2, 1, [](int a, int b) { return a == b; }, [](int) { return 0; });
  expect_split(inter_node(2, 1), 2, 1, [](int, int) { return true; }, [](int r) { return r; });
}

TEST(GroupSplit, VirtualNodesOfTwoOnAHostOfFour) {
  const int gpn = 2, nodes = 2;
  expect_split(intra_node(gpn), 4, gpn, [&](int a, int b) { return a / gpn == b / gpn; },
               [&](int r) { return r % gpn; });
  expect_split(inter_node(nodes, gpn), 4, gpn, [&](int a, int b) { return a % gpn == b % gpn; },
               [&](int r) { return r / gpn; });
}

TEST(GroupSplit, MembersOfAnInterNodeGroupAreOneStrideApart) {
  EXPECT_EQ(group_members(6, inter_node(4, 4), 16, 4), (std::vector<int>{2, 6, 10, 14}));
}

TEST(GroupSplit, AShapeThatDoesNotTileTheWorldIsAnErrorNamingTheGroup) {
  try {
    split_color_key(0, ProcessGroup{"odd", 3, 3, 1}, 8, 8);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("process group 'odd'"), std::string::npos) << e.what();
  }
}

TEST(GroupSplit, RanksPerNodeThatContradictTheNodeSizeIsAnError) {
  // intra_node shape of a 4-GPU node, in a job of 2 GPUs per node.
  EXPECT_THROW(split_color_key(0, intra_node(4), 8, 2), std::invalid_argument);
}

}  // namespace
}  // namespace zrun
