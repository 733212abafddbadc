#include "sim/topology/topology.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

namespace zsim {

Topology::Topology(const ClusterSpec& c) : cluster_(c) {
  if (c.nodes < 1 || c.gpus_per_node < 1) throw std::invalid_argument("cluster needs >= 1 node and GPU per node");
  const int G = c.gpus_per_node;
  const LinkSpec& L = c.links;
  nodes_per_leaf_ = (L.nodes_per_leaf <= 0 || L.nodes_per_leaf >= c.nodes) ? c.nodes : L.nodes_per_leaf;
  const int n_leaves = (c.nodes + nodes_per_leaf_ - 1) / nodes_per_leaf_;
  const bool has_spine = n_leaves > 1;
  const bool has_fabric = c.nodes > 1;

  TopoVertexId spine = 0;
  if (has_spine) spine = boost::add_vertex(TopoVertex{DeviceKind::spine, -1, 0}, g_);
  for (int l = 0; l < n_leaves && has_fabric; ++l) {
    leaves_.push_back(boost::add_vertex(TopoVertex{DeviceKind::leaf, -1, l}, g_));
    if (has_spine) {
      // Aggregated uplink of one leaf: its downlink capacity (ranks under it x ib) / oversubscription.
      const int under = std::min(nodes_per_leaf_, c.nodes - l * nodes_per_leaf_) * G;
      const double up_GBps = under * L.ib_GBps / std::max(1.0, L.ib_oversubscription);
      add_link(leaves_.back(), spine, LinkKind::ib_uplink, up_GBps, 0, under);
      add_link(spine, leaves_.back(), LinkKind::ib_uplink, up_GBps, 0, under);
    }
  }
  for (int node = 0; node < c.nodes; ++node) {
    const TopoVertexId nvsw = boost::add_vertex(TopoVertex{DeviceKind::nvswitch, node, 0}, g_);
    const TopoVertexId host = boost::add_vertex(TopoVertex{DeviceKind::host, node, 0}, g_);
    const TopoVertexId nvme = boost::add_vertex(TopoVertex{DeviceKind::nvme, node, 0}, g_);
    hosts_.push_back(host);
    nvmes_.push_back(nvme);
    add_link(host, nvme, LinkKind::nvme_write, c.nvme.write_GBps, 0, G);
    add_link(nvme, host, LinkKind::nvme_read, c.nvme.read_GBps, 0, G);
    for (int i = 0; i < G; ++i) {
      const TopoVertexId gpu = boost::add_vertex(TopoVertex{DeviceKind::gpu, node, i}, g_);
      const TopoVertexId psw = boost::add_vertex(TopoVertex{DeviceKind::pcie_switch, node, i}, g_);
      gpus_.push_back(gpu);
      if (G > 1) {
        add_link(gpu, nvsw, LinkKind::nvlink, L.nvlink_GBps, L.nvlink_latency_us, 1);
        add_link(nvsw, gpu, LinkKind::nvlink, L.nvlink_GBps, L.nvlink_latency_us, 1);
      }
      // The GPU's PCIe link to its switch carries both host copies and GPUDirect RDMA to its NIC.
      add_link(gpu, psw, LinkKind::pcie, L.pcie_GBps, L.pcie_latency_us, 1);
      add_link(psw, gpu, LinkKind::pcie, L.pcie_GBps, L.pcie_latency_us, 1);
      add_link(psw, host, LinkKind::pcie, L.pcie_GBps, 0, 1);
      add_link(host, psw, LinkKind::pcie, L.pcie_GBps, 0, 1);
      if (has_fabric) {
        const TopoVertexId nic = boost::add_vertex(TopoVertex{DeviceKind::nic, node, i}, g_);
        add_link(psw, nic, LinkKind::pcie, L.pcie_GBps, 0, 1);
        add_link(nic, psw, LinkKind::pcie, L.pcie_GBps, 0, 1);
        const TopoVertexId leaf = leaves_[leaf_of_node(node)];
        add_link(nic, leaf, LinkKind::ib, L.ib_GBps, L.ib_latency_us, 1);
        add_link(leaf, nic, LinkKind::ib, L.ib_GBps, L.ib_latency_us, 1);
      }
    }
  }
}

int Topology::add_link(TopoVertexId a, TopoVertexId b, LinkKind kind, double GBps, double latency_us, int sharers) {
  TopoLink link{kind, GBps_to_bytes_per_s(GBps), latency_us * 1e-6, sharers, static_cast<int>(links_.size())};
  boost::add_edge(a, b, link, g_);
  links_.push_back(link);
  ends_.emplace_back(a, b);
  return link.id;
}

TopoVertexId Topology::gpu(int rank) const { return gpus_.at(rank); }
TopoVertexId Topology::host(int node) const { return hosts_.at(node); }
TopoVertexId Topology::nvme(int node) const { return nvmes_.at(node); }
int Topology::leaf_of_node(int node) const { return node / nodes_per_leaf_; }

std::vector<int> Topology::path(TopoVertexId a, TopoVertexId b) const {
  const size_t n = boost::num_vertices(g_);
  std::vector<int> via(n, -1);  // edge id used to reach the vertex
  std::vector<TopoVertexId> from(n);
  std::vector<char> seen(n, 0);
  std::deque<TopoVertexId> queue{a};
  seen[a] = 1;
  while (!queue.empty() && !seen[b]) {
    const TopoVertexId v = queue.front();
    queue.pop_front();
    for (auto [e, end] = boost::out_edges(v, g_); e != end; ++e) {
      const TopoVertexId w = boost::target(*e, g_);
      if (seen[w]) continue;
      seen[w] = 1;
      via[w] = g_[*e].id;
      from[w] = v;
      queue.push_back(w);
    }
  }
  if (!seen[b]) throw std::logic_error("topology: no path between devices");
  std::vector<int> links;
  for (TopoVertexId v = b; v != a; v = from[v]) links.push_back(via[v]);
  std::reverse(links.begin(), links.end());
  return links;
}

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie: return "pcie";
    case LinkKind::ib: return "ib";
    case LinkKind::ib_uplink: return "ib_uplink";
    case LinkKind::nvme_read: return "nvme_read";
    case LinkKind::nvme_write: return "nvme_write";
  }
  return "?";
}

}  // namespace zsim
