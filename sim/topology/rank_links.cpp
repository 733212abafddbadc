#include "sim/topology/rank_links.hpp"

#include <map>

#include <fmt/format.h>

namespace zsim {

namespace {

const char* device_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::nvswitch: return "nvswitch";
    case DeviceKind::pcie_switch: return "pcie_switch";
    case DeviceKind::host: return "host";
    case DeviceKind::nic: return "nic";
    case DeviceKind::leaf: return "leaf";
    case DeviceKind::spine: return "spine";
    case DeviceKind::nvme: return "nvme";
  }
  return "?";
}

int level(DeviceKind k) {
  switch (k) {
    case DeviceKind::gpu: return 0;
    case DeviceKind::pcie_switch: return 1;
    case DeviceKind::host:
    case DeviceKind::nic: return 2;
    case DeviceKind::nvswitch:
    case DeviceKind::nvme: return 3;
    case DeviceKind::leaf: return 4;
    case DeviceKind::spine: return 5;
  }
  return 0;
}

class Builder {
 public:
  Builder(const Topology& t, RankLinks& out) : t_(t), out_(out) {}

  // The send side of a route: its links up to (and including the one into) the highest switch on it.
  FlowPath send_side(TopoVertexId from, TopoVertexId to) {
    const std::vector<int> links = t_.path(from, to);
    size_t top = 0;
    int best = -1;
    for (size_t i = 0; i < links.size(); ++i) {
      const int lv = level(t_.graph()[t_.link_target(links[i])].kind);
      if (lv > best) {
        best = lv;
        top = i;
      }
    }
    FlowPath path;
    for (size_t i = 0; i <= top && i < links.size(); ++i) path.push_back({local(links[i]), 1.0});
    return path;
  }

  FlowPath whole(TopoVertexId from, TopoVertexId to) {
    FlowPath path;
    for (int id : t_.path(from, to)) path.push_back({local(id), 1.0});
    return path;
  }

 private:
  int local(int topo_id) {
    auto it = index_.find(topo_id);
    if (it != index_.end()) return it->second;
    const TopoLink& l = t_.link(topo_id);
    const TopoVertex& a = t_.graph()[t_.link_source(topo_id)];
    const TopoVertex& b = t_.graph()[t_.link_target(topo_id)];
    const int idx = static_cast<int>(out_.bytes_per_s.size());
    out_.bytes_per_s.push_back(l.bytes_per_s / l.sharers);
    out_.topo_link.push_back(topo_id);
    out_.names.push_back(fmt::format("{}:{}{}->{}{}", to_string(l.kind), device_name(a.kind), a.index,
                                     device_name(b.kind), b.index));
    index_[topo_id] = idx;
    return idx;
  }

  const Topology& t_;
  RankLinks& out_;
  std::map<int, int> index_;
};

}  // namespace

RankLinks rank_links(const Topology& topo) {
  RankLinks r;
  Builder b(topo, r);
  const ClusterSpec& c = topo.cluster();
  const int G = c.gpus_per_node;
  if (G > 1) r.nvlink = b.send_side(topo.gpu(0), topo.gpu(1));
  r.nodes_per_leaf = c.nodes;
  if (c.nodes > 1) {
    const int npl = (c.links.nodes_per_leaf <= 0 || c.links.nodes_per_leaf >= c.nodes) ? c.nodes
                                                                                        : c.links.nodes_per_leaf;
    r.nodes_per_leaf = npl;
    if (npl > 1) {
      r.nic = b.send_side(topo.gpu(0), topo.gpu(G));  // node 1, same leaf, same rail
    } else {
      FlowPath far = b.send_side(topo.gpu(0), topo.gpu(G));
      r.leaf_uplink.assign(far.end() - 1, far.end());
      r.nic.assign(far.begin(), far.end() - 1);
    }
    if (npl < c.nodes && npl > 1) {
      FlowPath far = b.send_side(topo.gpu(0), topo.gpu(npl * G));  // first node of leaf 1
      r.leaf_uplink.assign(far.begin() + static_cast<long>(r.nic.size()), far.end());
    }
  }
  r.h2d = b.whole(topo.host(0), topo.gpu(0));
  r.d2h = b.whole(topo.gpu(0), topo.host(0));
  r.nvme_read = b.whole(topo.nvme(0), topo.host(0));
  r.nvme_write = b.whole(topo.host(0), topo.nvme(0));
  r.nvlink_latency_s = c.links.nvlink_latency_us * 1e-6;
  r.ib_latency_s = c.links.ib_latency_us * 1e-6;
  r.pcie_latency_s = c.links.pcie_latency_us * 1e-6;
  r.nvme_read_latency_s = c.nvme.read_latency_us * 1e-6;
  r.nvme_write_latency_s = c.nvme.write_latency_us * 1e-6;
  return r;
}

}  // namespace zsim
