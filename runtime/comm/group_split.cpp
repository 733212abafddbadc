#include "runtime/comm/group_split.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace zrun {
namespace {

// Members of one group instance that share a node, for a group of `size` members `stride` apart.
int members_per_node(int size, int stride, int gpus_per_node) {
  if (stride >= gpus_per_node) return 1;
  const int span = size * stride;            // ranks covered by one instance
  if (span <= gpus_per_node) return size;    // the instance lies inside one node
  return gpus_per_node / stride;             // it spans nodes: the node holds every stride-th rank
}

void check_shape(int rank, const zsim::ProcessGroup& g, int world, int gpus_per_node) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("process group '{}' (size {}, ranks_per_node {}, stride {}) in a world "
                                            "of {} with {} GPUs per node: {}",
                                            g.name, g.size, g.ranks_per_node, g.stride, world, gpus_per_node, why));
  };
  if (world < 1 || gpus_per_node < 1 || world % gpus_per_node != 0)
    fail("the world is not a whole number of nodes");
  if (rank < 0 || rank >= world) fail(fmt::format("rank {} is outside the world", rank));
  if (g.size < 1 || g.stride < 1) fail("size and stride must be >= 1");
  if (world % (g.size * g.stride) != 0) fail("size x stride does not divide the world");
  if (g.stride < gpus_per_node && gpus_per_node % g.stride != 0 && g.size > 1)
    fail("the stride does not divide gpus_per_node");
  if (g.size * g.stride > gpus_per_node && g.stride < gpus_per_node && (g.size * g.stride) % gpus_per_node != 0)
    fail("an instance covers a fraction of a node");
  if (members_per_node(g.size, g.stride, gpus_per_node) != g.ranks_per_node)
    fail(fmt::format("its members put {} ranks on one node, not ranks_per_node",
                     members_per_node(g.size, g.stride, gpus_per_node)));
}

}  // namespace

// Instance of `rank`: the block of size*stride consecutive ranks that holds it, and within the block the
// residue rank % stride. Members are base + k * stride, k = 0 .. size-1; the key is k.
SplitColorKey split_color_key(int rank, const zsim::ProcessGroup& g, int world, int gpus_per_node) {
  check_shape(rank, g, world, gpus_per_node);
  const int span = g.size * g.stride;
  return {(rank / span) * g.stride + rank % g.stride, (rank % span) / g.stride};
}

std::vector<int> group_members(int rank, const zsim::ProcessGroup& g, int world, int gpus_per_node) {
  check_shape(rank, g, world, gpus_per_node);
  const int span = g.size * g.stride;
  const int base = (rank / span) * span + rank % g.stride;
  std::vector<int> members;
  for (int k = 0; k < g.size; ++k) members.push_back(base + k * g.stride);
  return members;
}

}  // namespace zrun
