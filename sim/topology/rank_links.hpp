// The links one rank of a symmetric SPMD program drives (rank 0 stands for all), each with the share of
// its capacity that one rank gets, and the routes (flow paths) its transfers take. The engine shares these
// links among the rank's concurrent transfers by max-min fairness.
#pragma once
#include <string>
#include <vector>

#include "sim/topology/max_min_fair.hpp"
#include "sim/topology/topology.hpp"

namespace zsim {

struct RankLinks {
  std::vector<double> bytes_per_s;  // per-rank capacity of each local link (topology capacity / sharers)
  std::vector<int> topo_link;       // local link -> Topology link id
  std::vector<std::string> names;   // "pcie:gpu0->pcie_switch0", ...

  // Send-side routes of rank 0 (receive sides are other ranks' send sides, identical by symmetry).
  FlowPath nvlink;       // to a GPU of the same node
  FlowPath nic;          // to the same-index GPU of another node under the same leaf: PCIe -> NIC -> leaf
  FlowPath leaf_uplink;  // the extra hop to a node under another leaf (empty with a single leaf)
  FlowPath h2d, d2h;     // host memory <-> GPU over PCIe
  FlowPath nvme_read, nvme_write;  // node NVMe <-> host memory
  Seconds nvlink_latency_s = 0, ib_latency_s = 0, pcie_latency_s = 0;
  Seconds nvme_read_latency_s = 0, nvme_write_latency_s = 0;  // per NVMe transfer
  int nodes_per_leaf = 1;  // effective (all nodes when the fabric has one leaf)
};

// Finds rank 0's routes with Topology::path and turns the links on them into per-rank capacities.
RankLinks rank_links(const Topology& topo);

}  // namespace zsim
