#include "sim/sweep/shard.hpp"

#include <charconv>

#include "sim/common/error.hpp"

namespace zsim {

namespace {
bool parse_count(const std::string& s, std::size_t& out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}
}  // namespace

SweepShard parse_shard(const std::string& text) {
  const SourceLocation where{"--shard", 0, 0, text};
  const auto slash = text.find('/');
  SweepShard s;
  if (slash == std::string::npos || !parse_count(text.substr(0, slash), s.k) ||
      !parse_count(text.substr(slash + 1), s.n))
    throw InputError(where, "expected K/N, the K-th of N slices (for example 3/16)");
  if (s.n < 1 || s.k < 1 || s.k > s.n) throw InputError(where, "K must be between 1 and N");
  return s;
}

std::vector<std::size_t> shard_indices(std::size_t grid_points, const SweepShard& shard) {
  std::vector<std::size_t> out;
  for (std::size_t i = shard.k - 1; i < grid_points; i += shard.n) out.push_back(i);
  return out;
}

}  // namespace zsim
