// Topology: the cluster graph's devices and links, paths, and rank 0's per-rank link view.
#include "sim/topology/topology.hpp"

#include <gtest/gtest.h>

#include "sim/topology/rank_links.hpp"

namespace zsim {
namespace {

ClusterSpec cluster(int nodes, int gpus, int nodes_per_leaf = 0, double oversub = 1.0) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.links.nvlink_GBps = 450;
  c.links.pcie_GBps = 55;
  c.links.ib_GBps = 50;
  c.links.nodes_per_leaf = nodes_per_leaf;
  c.links.ib_oversubscription = oversub;
  c.nvme.read_GBps = 24;
  c.nvme.write_GBps = 12;
  return c;
}

std::vector<LinkKind> kinds(const Topology& t, const std::vector<int>& links) {
  std::vector<LinkKind> k;
  for (int id : links) k.push_back(t.link(id).kind);
  return k;
}

TEST(Topology, GpusOfOneNodeTalkOverNvlink) {
  Topology t(cluster(2, 8));
  EXPECT_EQ(kinds(t, t.path(t.gpu(0), t.gpu(3))), (std::vector<LinkKind>{LinkKind::nvlink, LinkKind::nvlink}));
}

TEST(Topology, GpusOnNodesUnderOneLeafGoThroughPcieNicAndLeaf) {
  Topology t(cluster(4, 8));
  const auto k = kinds(t, t.path(t.gpu(0), t.gpu(8)));
  EXPECT_EQ(k, (std::vector<LinkKind>{LinkKind::pcie, LinkKind::pcie, LinkKind::ib, LinkKind::ib, LinkKind::pcie,
                                      LinkKind::pcie}));
}

TEST(Topology, GpusUnderDifferentLeavesCrossTheSpine) {
  Topology t(cluster(4, 8, /*nodes_per_leaf=*/2));
  EXPECT_EQ(t.num_leaves(), 2);
  const auto k = kinds(t, t.path(t.gpu(0), t.gpu(2 * 8)));
  ASSERT_EQ(k.size(), 8u);
  EXPECT_EQ(k[3], LinkKind::ib_uplink);
  EXPECT_EQ(k[4], LinkKind::ib_uplink);
}

TEST(Topology, LeafUplinkCapacityIsDownlinkOverOversubscription) {
  Topology t(cluster(4, 8, 2, /*oversub=*/4.0));
  const auto p = t.path(t.gpu(0), t.gpu(16));
  const TopoLink& up = t.link(p[3]);
  EXPECT_DOUBLE_EQ(up.bytes_per_s, 2 * 8 * 50e9 / 4.0);
  EXPECT_EQ(up.sharers, 16);
}

TEST(RankLinks, PerRankShareOfTheUplinkIsNicBandwidthOverOversubscription) {
  Topology t(cluster(4, 8, 2, 4.0));
  const RankLinks r = rank_links(t);
  ASSERT_EQ(r.leaf_uplink.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bytes_per_s[r.leaf_uplink[0].link], 50e9 / 4.0);
  ASSERT_EQ(r.nic.size(), 3u);  // gpu->pcie switch, switch->nic, nic->leaf
  EXPECT_DOUBLE_EQ(r.bytes_per_s[r.nic.back().link], 50e9);
}

TEST(RankLinks, NodeNvmeIsSharedByTheNodesGpus) {
  Topology t(cluster(1, 8));
  const RankLinks r = rank_links(t);
  ASSERT_EQ(r.nvme_read.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bytes_per_s[r.nvme_read[0].link], 24e9 / 8);
  EXPECT_DOUBLE_EQ(r.bytes_per_s[r.nvme_write[0].link], 12e9 / 8);
}

TEST(RankLinks, DeviceToHostCopiesAndNicTrafficShareTheGpusPcieLink) {
  Topology t(cluster(2, 8));
  const RankLinks r = rank_links(t);
  EXPECT_EQ(r.d2h.front().link, r.nic.front().link);
  EXPECT_TRUE(r.leaf_uplink.empty());
}

TEST(RankLinks, ASingleNodeHasNoNetworkRoutes) {
  const RankLinks r = rank_links(Topology(cluster(1, 4)));
  EXPECT_TRUE(r.nic.empty());
  EXPECT_EQ(r.nvlink.size(), 1u);
  EXPECT_DOUBLE_EQ(r.bytes_per_s[r.nvlink[0].link], 450e9);
}

}  // namespace
}  // namespace zsim
