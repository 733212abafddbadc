#include "runtime/model/init.hpp"

#include <cmath>

namespace zrun::model {

namespace {
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::uint64_t name_hash(const std::string& s) {  // FNV-1a 64
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

double uniform_pm1(std::uint64_t key, std::uint64_t index) {
  const std::uint64_t r = splitmix64(key ^ splitmix64(index));
  return static_cast<double>(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;  // 53 bits -> [-1, 1)
}

InitRule init_rule(const ModelConfig& c, const std::string& n) {
  if (ends_with(n, ".bias")) return {0.0f, 0.0f};
  if (ends_with(n, "norm.weight")) return {1.0f, 0.0f};
  if (ends_with(n, "attn.o") || ends_with(n, "mlp.down"))
    return {0.0f, static_cast<float>(0.02 / std::sqrt(2.0 * std::max<std::int64_t>(c.layers, 1)))};
  return {0.0f, 0.02f};
}

void init_tensor(const ModelConfig& c, const std::string& full_name, std::int64_t offset, std::int64_t count,
                 float* dst) {
  const InitRule r = init_rule(c, full_name);
  const std::uint64_t key = name_hash(full_name);
  const double half_width = std::sqrt(3.0) * r.std;  // uniform on [-a, a) has std a / sqrt(3)
  for (std::int64_t i = 0; i < count; ++i)
    dst[i] = static_cast<float>(r.mean + half_width * uniform_pm1(key, static_cast<std::uint64_t>(offset + i)));
}

}  // namespace zrun::model
