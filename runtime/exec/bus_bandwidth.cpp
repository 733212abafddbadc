#include "runtime/exec/bus_bandwidth.hpp"

namespace zrun {

double bus_factor(zsim::CollectiveKind kind, int ranks) {
  const double n = ranks;
  switch (kind) {
    case zsim::CollectiveKind::all_reduce: return 2.0 * (n - 1) / n;
    case zsim::CollectiveKind::all_gather:
    case zsim::CollectiveKind::reduce_scatter:
    case zsim::CollectiveKind::all_to_all: return (n - 1) / n;
    case zsim::CollectiveKind::broadcast:
    case zsim::CollectiveKind::reduce: return 1.0;
  }
  return 1.0;
}

double algorithm_GBps(zsim::Bytes size, double seconds) {
  return seconds > 0 ? static_cast<double>(size) / seconds / 1e9 : 0.0;
}

double bus_GBps(zsim::CollectiveKind kind, int ranks, zsim::Bytes size, double seconds) {
  return algorithm_GBps(size, seconds) * bus_factor(kind, ranks);
}

}  // namespace zrun
