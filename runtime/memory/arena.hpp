// The stream-ordered arena of one tier of one rank: one big block reserved up front and carved by a
// first-fit allocator, with buffers allocated and freed by their schedule name. A free is stream
// ordered: the range returns to the allocator only once the work queued on the freeing stream has
// finished (a fence), so a later allocation never overwrites memory still in use on the GPU. Live and
// peak bytes are accounted by tier, category and detail; running out names the op, rank, category and
// what is live.
#pragma once
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/memory/memory_accounting.hpp"
#include "runtime/memory/memory_backend.hpp"
#include "runtime/memory/range_allocator.hpp"

namespace zrun {

// The detail under which the arena accounts memory a buffer needs beyond what the schedule gives it.
inline constexpr const char* kBeyondSchedule = "beyond_schedule";

struct ArenaOutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Arena {
 public:
  // Reserves `capacity_bytes` from the backend (throws ArenaOutOfMemory if it cannot); every buffer starts at a
  // multiple of `alignment_bytes` from the block's start.
  Arena(zsim::Tier tier, Bytes capacity_bytes, MemoryBackend& backend, int rank, MemoryAccounting& accounting,
        Bytes alignment_bytes = RangeAllocator::kAlignmentBytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Allocates the schedule buffer `name` for op `op_name`. Throws std::logic_error if `name` is live,
  // ArenaOutOfMemory if no range fits even after waiting for every pending free. `beyond_bytes`: what the
  // real computation needs past the schedule's `bytes` in the same contiguous range; it is accounted apart,
  // under (category, kBeyondSchedule), so measured figures keep the schedule's buffers and the excess separate.
  std::byte* alloc(const std::string& name, zsim::MemCategory category, const std::string& detail, Bytes bytes,
                   const std::string& op_name, Bytes beyond_bytes = 0);
  // Frees `name` once the work queued on `stream` so far is done. Throws std::logic_error if not live.
  void free(const std::string& name, StreamHandle stream = nullptr);
  std::byte* get(const std::string& name) const;  // throws std::logic_error if not live

  zsim::Tier tier() const { return tier_; }
  Bytes capacity_bytes() const { return ranges_.capacity_bytes(); }
  Bytes used_bytes() const { return ranges_.used_bytes(); }  // live + pending frees, aligned
  std::size_t pending_free_count() const { return pending_.size(); }

 private:
  struct Buffer {
    Bytes offset, bytes, beyond_bytes;
    zsim::MemCategory category;
    std::string detail;
  };
  struct PendingFree {
    Bytes offset;
    FenceId fence;
    StreamHandle stream;  // the stream the fence was recorded on
  };
  void reclaim(bool wait);  // returns finished (or, with wait, all) pending frees to the allocator

  zsim::Tier tier_;
  MemoryBackend& backend_;
  int rank_;
  MemoryAccounting& accounting_;
  std::byte* base_ = nullptr;
  RangeAllocator ranges_;
  std::map<std::string, Buffer> live_;
  std::vector<PendingFree> pending_;
};

}  // namespace zrun
