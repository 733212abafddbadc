// The schedule's buffers on this rank: alloc / free ops go to the arena of their tier, and a BufferUse
// becomes a device (or pinned host) pointer. Where the real model needs more than a schedule buffer holds
// (activations), the buffer gets the difference contiguously, accounted as beyond the schedule, and the
// difference is listed per buffer: a finding for zsim, never padding.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "runtime/memory/arena.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

// One schedule buffer whose real need differs from the schedule's bytes.
struct BufferMismatch {
  std::string buffer;       // first occurrence's name
  zsim::MemCategory category;
  std::string detail;
  zsim::Bytes schedule_bytes = 0;
  zsim::Bytes needed_bytes = 0;
};

class DeviceBuffers {
 public:
  // needed(alloc op) -> the bytes the real computation needs in that buffer (the schedule's own when it agrees).
  DeviceBuffers(const zsim::Schedule& s, Arena& gpu, Arena& cpu, std::function<zsim::Bytes(const zsim::Op&)> needed);

  std::byte* alloc(const zsim::Op& alloc_op);
  void free(const zsim::Op& free_op, StreamHandle stream);

  // The first byte of `use` for the rank whose index (in the op's group, or the world) is `index`.
  std::byte* at(const zsim::BufferUse& use, int index) const;
  std::byte* base(zsim::OpId alloc) const { return ptr_.at(alloc); }

  const std::vector<BufferMismatch>& mismatches() const { return mismatches_; }

 private:
  const zsim::Schedule& s_;
  Arena& gpu_;
  Arena& cpu_;
  std::function<zsim::Bytes(const zsim::Op&)> needed_;
  std::vector<std::byte*> ptr_;           // by alloc op id
  std::vector<BufferMismatch> mismatches_;
};

}  // namespace zrun
