// Process-wide malloc settings for the zsim binaries: keep freed memory for reuse instead of handing
// it back to the kernel, so that building one schedule after another (sweeps) does not page-fault
// tens of MB of fresh memory per point. Changes speed only, never a result.
#pragma once

namespace zsim {

// Call once at the start of main(), before any threads start.
void tune_allocator_for_batch_work();

}  // namespace zsim
