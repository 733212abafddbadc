#include "sim/cli/allocator_tuning.hpp"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zsim {

void tune_allocator_for_batch_work() {
#if defined(__GLIBC__)
  // Large blocks (a schedule's op vector is ~250 bytes per op) come from the heap, not from fresh mmaps
  // that are unmapped again on free; freed heap memory is not trimmed back to the kernel.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

}  // namespace zsim
