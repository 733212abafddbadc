#include "runtime/exec/device_buffers.hpp"

#include <stdexcept>

namespace zrun {

using zsim::Op;

DeviceBuffers::DeviceBuffers(const zsim::Schedule& s, Arena& gpu, Arena& cpu,
                             std::function<zsim::Bytes(const Op&)> needed)
    : s_(s), gpu_(gpu), cpu_(cpu), needed_(std::move(needed)), ptr_(s.ops.size(), nullptr) {}

std::byte* DeviceBuffers::alloc(const Op& op) {
  const zsim::MemOp& m = op.mem;
  if (m.tier == zsim::Tier::nvme)
    throw std::runtime_error("op '" + op.name + "': NVMe buffers are not built into zrun yet (issue 14)");
  Arena& arena = m.tier == zsim::Tier::gpu ? gpu_ : cpu_;
  const zsim::Bytes need = needed_ ? needed_(op) : m.bytes;
  if (need != m.bytes) {
    bool seen = false;
    for (const BufferMismatch& b : mismatches_)
      seen |= b.category == m.category && b.detail == m.detail && b.schedule_bytes == m.bytes && b.needed_bytes == need;
    if (!seen) mismatches_.push_back({m.buffer, m.category, m.detail, m.bytes, need});
  }
  const zsim::Bytes beyond = need > m.bytes ? need - m.bytes : 0;
  ptr_[op.id] = arena.alloc(m.buffer, m.category, m.detail, m.bytes, op.name, beyond);
  return ptr_[op.id];
}

void DeviceBuffers::free(const Op& op, StreamHandle stream) {
  (op.mem.tier == zsim::Tier::gpu ? gpu_ : cpu_).free(op.mem.buffer, stream);
}

std::byte* DeviceBuffers::at(const zsim::BufferUse& use, int index) const {
  std::byte* base = ptr_.at(use.alloc);
  if (base == nullptr) throw std::logic_error("buffer of alloc op " + std::to_string(use.alloc) + " is not allocated");
  return base + use.offset + static_cast<zsim::Bytes>(index) * use.rank_stride;
}

}  // namespace zrun
