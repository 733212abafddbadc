#include "runtime/memory/range_allocator.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace zrun {

RangeAllocator::RangeAllocator(Bytes capacity_bytes, Bytes alignment_bytes)
    : alignment_(alignment_bytes), capacity_(capacity_bytes / alignment_bytes * alignment_bytes) {
  if (alignment_ < kAlignmentBytes || (alignment_ & (alignment_ - 1)) != 0)
    throw std::invalid_argument("RangeAllocator: the alignment must be a power of two >= 256");
  if (capacity_ > 0) free_[0] = capacity_;
}

std::optional<Bytes> RangeAllocator::allocate(Bytes bytes) {
  if (bytes < 0) throw std::invalid_argument("RangeAllocator: negative size");
  const Bytes size = std::max(alignment_, aligned(bytes));
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const Bytes offset = it->first, rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_[offset + size] = rest;
    live_[offset] = size;
    used_ += size;
    return offset;
  }
  return std::nullopt;
}

void RangeAllocator::release(Bytes offset) {
  const auto live = live_.find(offset);
  if (live == live_.end())
    throw std::logic_error("RangeAllocator: no range is allocated at offset " + std::to_string(offset));
  Bytes start = offset, size = live->second;
  used_ -= size;
  live_.erase(live);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {  // merge with the free range after
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // merge with the free range before
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

Bytes RangeAllocator::largest_free_bytes() const {
  Bytes largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace zrun
