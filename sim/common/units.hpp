// Units used across zsim: sizes are integer bytes, times are seconds, rates carry their unit in the name.
#pragma once
#include <cstdint>

namespace zsim {

using Bytes = std::int64_t;      // a size or a volume, in bytes
using Elements = std::int64_t;   // a count of tensor elements (parameters, activations)
using Seconds = double;          // simulated or measured time
using Flops = double;            // floating-point operations (a count, not a rate)

inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * kKiB;
inline constexpr Bytes kGiB = 1024 * kMiB;
inline constexpr double kGB = 1e9;  // decimal gigabyte: bandwidths are quoted in GB/s = 1e9 bytes/s

// Bandwidth in GB/s (1e9 bytes per second) -> bytes per second.
constexpr double GBps_to_bytes_per_s(double GBps) { return GBps * kGB; }

}  // namespace zsim
