#include "sim/report/caching_allocator.hpp"

#include <stdexcept>

namespace zsim {

Bytes CachingAllocatorModel::round_size(Bytes requested_bytes) {
  if (requested_bytes < kMinBlockBytes) return kMinBlockBytes;
  return kMinBlockBytes * ((requested_bytes + kMinBlockBytes - 1) / kMinBlockBytes);
}

Bytes CachingAllocatorModel::segment_size(Bytes rounded_bytes) {
  if (rounded_bytes <= kSmallRequestBytes) return kSmallSegmentBytes;
  if (rounded_bytes < kMinLargeSegmentBytes) return kLargeSegmentBytes;
  return kLargeRoundingBytes * ((rounded_bytes + kLargeRoundingBytes - 1) / kLargeRoundingBytes);
}

int CachingAllocatorModel::new_block(const Block& b) {
  if (!free_slots_.empty()) {
    const int i = free_slots_.back();
    free_slots_.pop_back();
    blocks_[i] = b;
    return i;
  }
  blocks_.push_back(b);
  return static_cast<int>(blocks_.size()) - 1;
}

// get_free_block: the pool's first block of this stream at least `size` long (size, then address order).
int CachingAllocatorModel::find_free(Bytes size, int stream, bool small) {
  std::set<Key>& p = pool(small);
  const auto it = p.lower_bound({stream, size, Bytes{-1}, -1});
  if (it == p.end() || std::get<0>(*it) != stream) return -1;
  const int b = std::get<3>(*it);
  p.erase(it);
  return b;
}

// alloc_block: a new segment (cudaMalloc), at an address after every earlier one.
int CachingAllocatorModel::reserve_segment(Bytes size, int stream, bool small) {
  if (device_bytes_ > 0 && reserved_ + size > device_bytes_) {
    release_free_segments();  // release_cached_blocks, then try again
    if (reserved_ + size > device_bytes_) oom_ = true;  // torch raises OutOfMemoryError; the model goes on
  }
  Block b;
  b.address = next_address_;
  b.size = size;
  b.stream = stream;
  b.segment = next_segment_++;
  b.small = small;
  next_address_ += size;
  reserved_ += size;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  ++live_segments_;
  return new_block(b);
}

// release_cached_blocks: every free block that is a whole segment goes back to the driver.
void CachingAllocatorModel::release_free_segments() {
  ++releases_;
  for (std::set<Key>* p : {&small_pool_, &large_pool_})
    for (auto it = p->begin(); it != p->end();) {
      const int b = std::get<3>(*it);
      if (blocks_[b].prev < 0 && blocks_[b].next < 0) {
        reserved_ -= blocks_[b].size;
        --live_segments_;
        free_slots_.push_back(b);
        it = p->erase(it);
      } else {
        ++it;
      }
    }
}

CachingAllocatorModel::Handle CachingAllocatorModel::allocate(Bytes requested_bytes, int stream) {
  const Bytes size = round_size(requested_bytes);
  const bool small = size <= kSmallRequestBytes;
  int b = find_free(size, stream, small);
  if (b < 0) b = reserve_segment(segment_size(size), stream, small);
  // should_split: the rest is a block of its own when it is big enough to be worth keeping.
  const Bytes rest = blocks_[b].size - size;
  if (small ? rest >= kMinBlockBytes : rest > kSmallRequestBytes) {
    Block r = blocks_[b];
    r.address += size;
    r.size = rest;
    r.prev = b;
    const int ri = new_block(r);  // may reallocate blocks_: index from here on
    if (blocks_[ri].next >= 0) blocks_[blocks_[ri].next].prev = ri;
    blocks_[b].next = ri;
    blocks_[b].size = size;
    pool(small).insert(key(ri));
  }
  blocks_[b].in_use = true;
  allocated_ += blocks_[b].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return b;
}

void CachingAllocatorModel::free(Handle h) {
  if (h < 0 || h >= static_cast<int>(blocks_.size()) || !blocks_[h].in_use)
    throw std::logic_error("caching allocator model: free of a block not in use");
  Block& b = blocks_[h];
  b.in_use = false;
  allocated_ -= b.size;
  std::set<Key>& p = pool(b.small);
  // try_merge_blocks: absorb a free neighbour on either side.
  for (const int side : {b.prev, b.next}) {
    if (side < 0 || blocks_[side].in_use) continue;
    p.erase(key(side));
    Block& n = blocks_[side];
    if (n.address < b.address) {
      b.address = n.address;
      b.prev = n.prev;
      if (b.prev >= 0) blocks_[b.prev].next = h;
    } else {
      b.next = n.next;
      if (b.next >= 0) blocks_[b.next].prev = h;
    }
    b.size += n.size;
    free_slots_.push_back(side);
  }
  p.insert(key(h));
}

}  // namespace zsim
