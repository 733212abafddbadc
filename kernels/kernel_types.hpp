// Plain types shared by the kernel launcher APIs: element formats and an opaque stream handle.
// No CUDA header here, so simulator code and CPU-only builds can include every launcher header.
#pragma once
#include <cstddef>
#include <cstdint>

namespace zk {

// 16-bit floating formats a gradient or weight tensor may have.
enum class Half16 { bf16, fp16 };

// Formats an output of a reduce may have (fp32 for an fp32 gradient partition).
enum class OutFormat { f32, bf16, fp16 };

// A cudaStream_t passed as an opaque pointer; nullptr is the legacy default stream.
using StreamHandle = void*;

}  // namespace zk
