#include "runtime/model/synthetic_data.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace zrun::model {

namespace {
std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
constexpr int kStructuredPercent = 90;
}  // namespace

SyntheticData::SyntheticData(std::int64_t vocab, std::uint64_t seed) : vocab_(vocab), seed_(seed) {
  if (vocab < 2) throw std::invalid_argument("synthetic data: vocab must be >= 2");
}

std::int32_t SyntheticData::successor(std::int32_t prev, int j) const {
  const std::uint64_t h = mix(mix(seed_ ^ 0x5eed5eedull) ^ (static_cast<std::uint64_t>(prev) * 2 + j));
  return static_cast<std::int32_t>(h % static_cast<std::uint64_t>(vocab_));
}

void SyntheticData::sample(std::int64_t index, std::int64_t len, std::int32_t* out) const {
  const std::uint64_t base = mix(seed_ ^ mix(static_cast<std::uint64_t>(index)));
  std::int32_t prev = 0;
  for (std::int64_t p = 0; p < len; ++p) {
    const std::uint64_t r = mix(base + static_cast<std::uint64_t>(p));
    std::int32_t t;
    if (p > 0 && static_cast<int>(r % 100) < kStructuredPercent)
      t = successor(prev, static_cast<int>((r >> 8) & 1));
    else
      t = static_cast<std::int32_t>((r >> 16) % static_cast<std::uint64_t>(vocab_));
    out[p] = t;
    prev = t;
  }
}

void SyntheticData::batch(std::int64_t first_sample, std::int64_t micro_batch, std::int64_t seq_len,
                          std::int32_t* tokens, std::int32_t* targets) const {
  std::vector<std::int32_t> buf(seq_len + 1);
  for (std::int64_t b = 0; b < micro_batch; ++b) {
    sample(first_sample + b, seq_len + 1, buf.data());
    for (std::int64_t p = 0; p < seq_len; ++p) {
      tokens[b * seq_len + p] = buf[p];
      targets[b * seq_len + p] = buf[p + 1];
    }
  }
}

double SyntheticData::entropy_floor_nats() const {
  const double s = kStructuredPercent / 100.0, noise = 1.0 - s, v = static_cast<double>(vocab_);
  const double p_succ = s / 2 + noise / v, p_other = noise / v;  // ignoring the two successors colliding
  return -(2 * p_succ * std::log(p_succ) + (v - 2) * p_other * std::log(p_other));
}

}  // namespace zrun::model
