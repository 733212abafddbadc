// Human-readable sizes and counts for terminal output: binary units for bytes (KiB, MiB, GiB, TiB),
// ML-style suffixes for counts (k, M, B, T).
#pragma once
#include <cstdint>
#include <string>

#include "sim/common/units.hpp"

namespace zsim {

// Three significant digits, binary units: 0 B, 512 B, 1.50 KiB, 12.3 MiB, 123 GiB, -2.00 GiB.
std::string human_bytes(Bytes b);

// Three significant digits, decimal suffixes: 950, 12.3k, 6.74B (billions), 1.20T.
std::string human_count(std::int64_t n);

}  // namespace zsim
