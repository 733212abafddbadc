// Pure parsing of scalar text into typed values (integers, byte sizes, reals, booleans), shared by the
// YAML and JSON readers. No I/O, no locations: callers turn a nullopt into an InputError.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sim/common/units.hpp"

namespace zsim {

// "auto" (DeepSpeed / HF integration placeholder), case-sensitive as DeepSpeed has it.
bool is_auto(std::string_view text);

// An integer: "42", "500_000_000", or a real literal with an exact integer value ("5e8", "1.0e9").
std::optional<std::int64_t> parse_integer(std::string_view text);

// A size in bytes: an integer as above, or a number with a unit suffix: B, KB, MB, GB, TB (powers of
// 1000) or KiB, MiB, GiB, TiB (powers of 1024), optional space ("80GiB", "1.5 TB").
std::optional<Bytes> parse_bytes(std::string_view text);

// A finite real number ("0.8", "1e-3", "12.5").
std::optional<double> parse_real(std::string_view text);

// true/false/yes/no/on/off, any case.
std::optional<bool> parse_bool(std::string_view text);

}  // namespace zsim
