// Reserved-memory walk: the schedule's GPU allocs and frees, in program order, through the caching allocator model
// (caching_allocator.hpp), each on the pool of the stream its alloc op is issued on. What PyTorch would reserve
// from the driver for the step as zsim schedules it (runtime deepspeed; zrun has its own arena).
#pragma once
#include "sim/common/units.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

struct ReservedWalk {
  Bytes peak_reserved = 0;   // the most the allocator held from the driver at once
  Bytes peak_allocated = 0;  // the most in blocks in use (requests rounded to 512 bytes, unsplit rests)
  int segments = 0;          // segments held at the end
  int releases = 0;          // times the cached segments were given back to make room
  bool out_of_memory = false;
};

// device_bytes: the GPU's memory the allocator may reserve (0: unlimited).
ReservedWalk walk_reserved(const Schedule& s, Bytes device_bytes);

}  // namespace zsim
