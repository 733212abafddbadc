#include "sim/report/comm_volume.hpp"

#include <stdexcept>
#include <string>

namespace zsim {

namespace {

// round(a * num / den) without overflow for any realistic size (a < 2^63, num, den < 2^31).
Bytes scaled(Bytes a, std::int64_t num, std::int64_t den) {
  const __int128 p = static_cast<__int128>(a) * num;
  return static_cast<Bytes>((p + den / 2) / den);
}

int traffic_multiplier(CollectiveKind kind) { return kind == CollectiveKind::all_reduce ? 2 : 1; }

}  // namespace

Bytes bytes_sent_per_gpu(CollectiveKind kind, Bytes size_bytes, int group_size) {
  if (group_size < 1) throw std::invalid_argument("group size " + std::to_string(group_size) + " < 1");
  if (size_bytes < 0) throw std::invalid_argument("negative collective size");
  const std::int64_t n = group_size;
  return scaled(size_bytes, traffic_multiplier(kind) * (n - 1), n);
}

Bytes cross_node_bytes_per_gpu(CollectiveKind kind, Bytes size_bytes, const ProcessGroup& group) {
  if (group.size < 1 || group.ranks_per_node < 1 || group.size % group.ranks_per_node != 0)
    throw std::invalid_argument("process group '" + group.name + "' has an inconsistent shape");
  if (size_bytes < 0) throw std::invalid_argument("negative collective size");
  const std::int64_t k = group.nodes_spanned();
  const std::int64_t r = group.ranks_per_node;
  if (k <= 1) return 0;
  if (kind == CollectiveKind::all_to_all) return scaled(size_bytes, k - 1, k);
  return scaled(size_bytes, traffic_multiplier(kind) * (k - 1), k * r);
}

}  // namespace zsim
