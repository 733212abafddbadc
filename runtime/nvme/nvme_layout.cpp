#include "runtime/nvme/nvme_layout.hpp"

#include <algorithm>

namespace zrun {

std::map<zsim::OpId, std::vector<NvmeRange>> nvme_ranges(const zsim::Schedule& s) {
  std::map<zsim::OpId, std::vector<NvmeRange>> out;
  for (const zsim::Op& op : s.ops)
    if (op.kind == zsim::OpKind::alloc && op.mem.tier == zsim::Tier::nvme) out[op.id];
  for (const zsim::Op& op : s.ops)
    for (const zsim::BufferUse& u : op.uses)
      if (out.count(u.alloc)) out[u.alloc].push_back({u.offset, u.bytes});
  return out;
}

zsim::Bytes nvme_bytes_per_rank(const zsim::Schedule& s) {
  zsim::Bytes total = 0;
  for (auto& [id, ranges] : nvme_ranges(s)) {
    std::sort(ranges.begin(), ranges.end());
    ranges.erase(std::unique(ranges.begin(), ranges.end(),
                             [](const NvmeRange& a, const NvmeRange& b) { return a.offset == b.offset && a.bytes == b.bytes; }),
                 ranges.end());
    total += NvmeStore::file_bytes(ranges);
  }
  return total;
}

}  // namespace zrun
