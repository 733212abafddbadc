// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, torch 2.11, default
// configuration: no max_split_size, no expandable segments, no garbage-collection threshold), for what it reserves
// from the driver while a sequence of allocations and frees runs through it.
//
// - Requests are rounded up to a multiple of 512 bytes (round_size; at least 512).
// - Requests of at most 1 MiB come from the small pool, larger ones from the large pool; each pool keeps the free
//   blocks of every stream apart (a block is reused only by allocations on the stream it was allocated on).
// - get_free_block: best fit, the smallest free block of the pool and stream at least as large (ties: the lowest
//   address).
// - Without one, a new segment is reserved (cudaMalloc) of get_allocation_size: 2 MiB for a small request, 20 MiB
//   for a large one under 10 MiB, else the request rounded up to 2 MiB.
// - A block larger than the request is split (should_split) when the rest is at least 512 bytes (small pool) or more
//   than 1 MiB (large pool); the allocation takes the front, the rest stays free.
// - A freed block goes back to its pool and merges with free neighbours of its segment; segments are never given
//   back to the driver, except when a new segment would not fit the device: then every segment with nothing
//   allocated in it is released (release_cached_blocks) and the reservation is tried again.
#pragma once
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "sim/common/units.hpp"

namespace zsim {

class CachingAllocatorModel {
 public:
  static constexpr Bytes kMinBlockBytes = 512;               // kMinBlockSize
  static constexpr Bytes kSmallRequestBytes = 1 << 20;       // kSmallSize
  static constexpr Bytes kSmallSegmentBytes = 2 << 20;       // kSmallBuffer
  static constexpr Bytes kLargeSegmentBytes = 20 << 20;      // kLargeBuffer
  static constexpr Bytes kMinLargeSegmentBytes = 10 << 20;   // kMinLargeAlloc
  static constexpr Bytes kLargeRoundingBytes = 2 << 20;      // kRoundLarge

  // device_bytes: what the driver can give (0: unlimited).
  explicit CachingAllocatorModel(Bytes device_bytes = 0) : device_bytes_(device_bytes) {}

  using Handle = int;
  Handle allocate(Bytes requested_bytes, int stream);
  void free(Handle h);

  Bytes reserved_bytes() const { return reserved_; }
  Bytes peak_reserved_bytes() const { return peak_reserved_; }
  Bytes allocated_bytes() const { return allocated_; }  // blocks in use, at their (rounded, unsplit) sizes
  Bytes peak_allocated_bytes() const { return peak_allocated_; }
  int segments() const { return live_segments_; }
  int releases() const { return releases_; }  // times the cached segments were given back to make room
  bool out_of_memory() const { return oom_; }  // a reservation failed even after the release

  static Bytes round_size(Bytes requested_bytes);
  static Bytes segment_size(Bytes rounded_bytes);  // get_allocation_size

 private:
  struct Block {
    Bytes address = 0, size = 0;
    int stream = 0, segment = 0;
    bool small = false, in_use = false;
    int prev = -1, next = -1;  // neighbours in the segment
  };
  using Key = std::tuple<int, Bytes, Bytes, int>;  // stream, size, address, block: the pools' order
  Key key(int b) const { return {blocks_[b].stream, blocks_[b].size, blocks_[b].address, b}; }
  std::set<Key>& pool(bool small) { return small ? small_pool_ : large_pool_; }
  int find_free(Bytes size, int stream, bool small);
  int reserve_segment(Bytes size, int stream, bool small);
  void release_free_segments();
  int new_block(const Block& b);

  Bytes device_bytes_;
  std::vector<Block> blocks_;
  std::vector<int> free_slots_;
  std::set<Key> small_pool_, large_pool_;
  Bytes next_address_ = 0;
  Bytes reserved_ = 0, peak_reserved_ = 0, allocated_ = 0, peak_allocated_ = 0;
  int live_segments_ = 0, next_segment_ = 0, releases_ = 0;
  bool oom_ = false;
};

}  // namespace zsim
