// First-fit allocation of byte ranges inside [0, capacity): every range starts at a multiple of 256
// bytes and is rounded up to one; a released range merges with free neighbours. Pure bookkeeping over
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
  static Bytes aligned(Bytes bytes) { return (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes; }

  explicit RangeAllocator(Bytes capacity_bytes);

  // The lowest free offset with room for `bytes` (rounded up; 0 bytes takes one alignment unit), or
  // nullopt when no free range is large enough.
  std::optional<Bytes> allocate(Bytes bytes);
  // Releases the range allocated at `offset`; throws std::logic_error if none is.
  void release(Bytes offset);

  Bytes capacity_bytes() const { return capacity_; }
  Bytes used_bytes() const { return used_; }        // aligned sizes of the live ranges
  Bytes largest_free_bytes() const;
  std::size_t free_range_count() const { return free_.size(); }
  std::size_t live_range_count() const { return live_.size(); }

 private:
  Bytes capacity_;
  Bytes used_ = 0;
  std::map<Bytes, Bytes> free_;  // offset -> size, disjoint and never adjacent (always coalesced)
  std::map<Bytes, Bytes> live_;  // offset -> aligned size
};

}  // namespace zrun
