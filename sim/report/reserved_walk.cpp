#include "sim/report/reserved_walk.hpp"

#include <stdexcept>
#include <unordered_map>

#include "sim/report/caching_allocator.hpp"

namespace zsim {

ReservedWalk walk_reserved(const Schedule& s, Bytes device_bytes) {
  CachingAllocatorModel a(device_bytes);
  std::unordered_map<std::string, CachingAllocatorModel::Handle> live;
  for (const Op& op : s.ops) {
    if ((op.kind != OpKind::alloc && op.kind != OpKind::free) || op.mem.tier != Tier::gpu) continue;
    if (op.kind == OpKind::alloc) {
      if (!live.emplace(op.mem.buffer, a.allocate(op.mem.bytes, op.stream)).second)
        throw std::logic_error("reserved walk: '" + op.mem.buffer + "' allocated while live");
    } else {
      const auto it = live.find(op.mem.buffer);
      if (it == live.end()) throw std::logic_error("reserved walk: free of '" + op.mem.buffer + "', not live");
      a.free(it->second);
      live.erase(it);
    }
  }
  return {a.peak_reserved_bytes(), a.peak_allocated_bytes(), a.segments(), a.releases(), a.out_of_memory()};
}

}  // namespace zsim
