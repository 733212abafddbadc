// Which communicator a rank joins for a schedule ProcessGroup: the (color, key) it passes to
// ncclCommSplit. A group is a shape (sim/schedule/schedule.hpp): `size` members, `stride` ranks apart;
// the world is tiled by such groups. Pure functions, so every shape is tested on the host.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zrun {

struct SplitColorKey {
  int color = 0;  // equal for the members of one group instance, distinct across instances
  int key = 0;    // the member's rank inside its group (0 .. size-1)
};

// Throws std::invalid_argument naming the group when the shape does not tile the world (size * stride
// must divide it) or does not match gpus_per_node (ranks_per_node must be the members on one node).
SplitColorKey split_color_key(int rank, const zsim::ProcessGroup& group, int world_size, int gpus_per_node);

// The global ranks of `rank`'s group, in key order (for messages and tests).
std::vector<int> group_members(int rank, const zsim::ProcessGroup& group, int world_size, int gpus_per_node);

}  // namespace zrun
