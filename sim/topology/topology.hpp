// The cluster as a Boost.Graph: GPUs, NVSwitch, PCIe switches, host, NICs (one per GPU, rail-aligned),
// an InfiniBand leaf/spine fat tree, NVMe. Directed edges are links with a capacity and a latency;
// transfers follow shortest paths on it. Built from a ClusterSpec; pure data + path queries.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

enum class DeviceKind { gpu, nvswitch, pcie_switch, host, nic, leaf, spine, nvme };
enum class LinkKind { nvlink, pcie, ib, ib_uplink, nvme_read, nvme_write };

struct TopoVertex {
  DeviceKind kind = DeviceKind::gpu;
  int node = -1;   // node index; -1 for switches of the fabric core
  int index = 0;   // local index (GPU / NIC within its node, leaf number, ...)
};

struct TopoLink {
  LinkKind kind = LinkKind::nvlink;
  double bytes_per_s = 0;  // capacity, one direction
  Seconds latency_s = 0;
  // How many ranks of a symmetric SPMD program drive this link at once (1 for a GPU's own NVLink/PCIe/
  // NIC; gpus_per_node for a node's NVMe; every rank under a leaf for that leaf's uplink). One simulated
  // rank gets capacity / sharers of it.
  int sharers = 1;
  int id = 0;      // dense edge index, 0..num_edges-1
};

using TopoGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, TopoVertex, TopoLink>;
using TopoVertexId = boost::graph_traits<TopoGraph>::vertex_descriptor;

class Topology {
 public:
  explicit Topology(const ClusterSpec& cluster);

  const TopoGraph& graph() const { return g_; }
  const ClusterSpec& cluster() const { return cluster_; }
  int num_links() const { return static_cast<int>(links_.size()); }
  const TopoLink& link(int id) const { return links_[id]; }
  TopoVertexId link_source(int id) const { return ends_[id].first; }
  TopoVertexId link_target(int id) const { return ends_[id].second; }

  TopoVertexId gpu(int rank) const;
  TopoVertexId host(int node) const;
  TopoVertexId nvme(int node) const;
  int leaf_of_node(int node) const;
  int num_leaves() const { return static_cast<int>(leaves_.size()); }

  // Links (edge ids) of a fewest-hops path from a to b (BFS; ties broken by vertex order, deterministic).
  std::vector<int> path(TopoVertexId a, TopoVertexId b) const;

 private:
  int add_link(TopoVertexId a, TopoVertexId b, LinkKind kind, double GBps, double latency_us, int sharers);

  ClusterSpec cluster_;
  TopoGraph g_;
  std::vector<TopoLink> links_;
  std::vector<std::pair<TopoVertexId, TopoVertexId>> ends_;
  std::vector<TopoVertexId> gpus_, hosts_, nvmes_, leaves_;
  int nodes_per_leaf_ = 1;
};

const char* to_string(LinkKind);

}  // namespace zsim
