// First-fit allocation of byte ranges inside [0, capacity): every range starts at a multiple of the alignment
// (256 bytes, or more: the pinned host arena uses 4096 for O_DIRECT transfers) and is rounded up to one; a released range merges with free neighbours. Pure bookkeeping over
// offsets (no memory), so it is tested on the host; the Arena puts it over real device memory.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include "sim/common/units.hpp"

namespace zrun {

using zsim::Bytes;

class RangeAllocator {
 public:
  static constexpr Bytes kAlignmentBytes = 256;
  Bytes aligned(Bytes bytes) const { return (bytes + alignment_ - 1) / alignment_ * alignment_; }

  // alignment_bytes: a power of two >= 256.
  explicit RangeAllocator(Bytes capacity_bytes, Bytes alignment_bytes = kAlignmentBytes);

  // The lowest free offset with room for `bytes` (rounded up; 0 bytes takes one alignment unit), or
  // nullopt when no free range is large enough.
  std::optional<Bytes> allocate(Bytes bytes);
  // Releases the range allocated at `offset`; throws std::logic_error if none is.
  void release(Bytes offset);

  Bytes capacity_bytes() const { return capacity_; }
  Bytes alignment_bytes() const { return alignment_; }
  Bytes used_bytes() const { return used_; }        // aligned sizes of the live ranges
  Bytes largest_free_bytes() const;
  std::size_t free_range_count() const { return free_.size(); }
  std::size_t live_range_count() const { return live_.size(); }

 private:
  Bytes alignment_;
  Bytes capacity_;
  Bytes used_ = 0;
  std::map<Bytes, Bytes> free_;  // offset -> size, disjoint and never adjacent (always coalesced)
  std::map<Bytes, Bytes> live_;  // offset -> aligned size
};

}  // namespace zrun
