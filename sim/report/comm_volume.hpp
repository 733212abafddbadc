// Communication volume of one collective, per GPU: bytes each rank sends, and the part that crosses node
// boundaries. The one place these formulas live; the memory/comm reports and the timing models call them.
#pragma once
#include "sim/common/units.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Bytes one rank sends in one collective of nccl-tests "size" `size_bytes` on a group of `group_size`
// ranks (ring / pairwise algorithms, the bandwidth-optimal lower bound):
//   all_gather, reduce_scatter, all_to_all, broadcast, reduce: S (n-1)/n;   all_reduce: 2 S (n-1)/n.
// broadcast and reduce: the rank average (the root of a reduce sends nothing, the others S each).
// A group of one rank sends nothing. Rounded to the nearest byte.
Bytes bytes_sent_per_gpu(CollectiveKind kind, Bytes size_bytes, int group_size);

// Bytes one rank sends across its node's boundary in one collective on `group`, which spans k nodes with
// r_g = group.ranks_per_node members per node (hierarchical/ring algorithms that cross each node
// boundary once per node-level step):
//   all_gather, reduce_scatter, broadcast, reduce: S (k-1)/(k r_g);   all_reduce: 2 S (k-1)/(k r_g);
//   all_to_all: S (k-1)/k (each rank's own send buffer, (k-1)/k of it addressed to other nodes).
// A group on one node (k = 1) sends nothing across nodes. Rounded to the nearest byte.
// Per node = this x gpus_per_node.
Bytes cross_node_bytes_per_gpu(CollectiveKind kind, Bytes size_bytes, const ProcessGroup& group);

}  // namespace zsim
