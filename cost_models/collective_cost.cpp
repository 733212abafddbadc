#include "cost_models/collective_cost.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "cost_models/measured_curve.hpp"

namespace zsim {

namespace {
void check_n(int n) {
  if (n < 1) throw std::invalid_argument("collective group of " + std::to_string(n) + " ranks");
}
int ceil_log2(int n) {
  int steps = 0;
  for (int reach = 1; reach < n; reach *= 2) ++steps;
  return steps;
}
}  // namespace

double busbw_factor(CollectiveKind kind, int n) {
  check_n(n);
  const double frac = static_cast<double>(n - 1) / n;
  switch (kind) {
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return frac;
    case CollectiveKind::all_reduce: return 2 * frac;
    case CollectiveKind::broadcast:
    case CollectiveKind::reduce: return n > 1 ? 1.0 : 0.0;
  }
  return 0;
}

double bus_bytes(CollectiveKind kind, double size_bytes, int n) { return size_bytes * busbw_factor(kind, n); }

LatencySteps latency_steps(CollectiveKind kind, CollectiveAlgorithm algo, int n, int k) {
  check_n(n);
  if (k < 1 || k > n || n % k != 0)
    throw std::invalid_argument("group of " + std::to_string(n) + " ranks on " + std::to_string(k) + " nodes");
  if (n == 1) return {};
  const int r = n / k;
  if (kind == CollectiveKind::all_reduce && algo == CollectiveAlgorithm::tree) return {2 * (r - 1), 2 * ceil_log2(k)};
  if (kind == CollectiveKind::all_to_all) return {r - 1, n - r};
  const int passes = kind == CollectiveKind::all_reduce ? 2 : 1;
  return {passes * (n - k), passes * (k - 1)};
}

int latency_steps(CollectiveKind kind, CollectiveAlgorithm algo, int n) {
  return latency_steps(kind, algo, n, n).total();
}

Seconds latency_s(CollectiveKind kind, CollectiveAlgorithm algo, int n, int k, const CollectiveLink& link) {
  const LatencySteps st = latency_steps(kind, algo, n, k);
  return st.intra * link.intra_latency_s + st.inter * link.inter_latency_s;
}

double bandwidth_bytes(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n) {
  check_n(n);
  if (n == 1) return 0;
  if (kind == CollectiveKind::all_reduce && algo == CollectiveAlgorithm::tree) return 2 * size_bytes;
  return bus_bytes(kind, size_bytes, n);
}

Seconds collective_s(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n, int k,
                     const CollectiveLink& link) {
  if (n > 1 && link.bytes_per_s <= 0) throw std::invalid_argument("collective over a link of zero bandwidth");
  const double bw = bandwidth_bytes(kind, algo, size_bytes, n);
  return latency_s(kind, algo, n, k, link) + (bw > 0 ? bw / link.bytes_per_s : 0.0);
}

CollectiveAlgorithm choose_algorithm(CollectiveKind kind, double size_bytes, int n, int k, const CollectiveLink& link) {
  if (kind == CollectiveKind::all_to_all) return CollectiveAlgorithm::pairwise;
  if (kind != CollectiveKind::all_reduce) return CollectiveAlgorithm::ring;
  const Seconds ring = collective_s(kind, CollectiveAlgorithm::ring, size_bytes, n, k, link);
  const Seconds tree = collective_s(kind, CollectiveAlgorithm::tree, size_bytes, n, k, link);
  return tree < ring ? CollectiveAlgorithm::tree : CollectiveAlgorithm::ring;
}

Seconds collective_s(CollectiveKind kind, CollectiveAlgorithm algo, double size_bytes, int n, AlphaBeta link) {
  return collective_s(kind, algo, size_bytes, n, n, {link.latency_s, link.latency_s, link.bytes_per_s});
}

CollectiveAlgorithm choose_algorithm(CollectiveKind kind, double size_bytes, int n, AlphaBeta link) {
  return choose_algorithm(kind, size_bytes, n, n, {link.latency_s, link.latency_s, link.bytes_per_s});
}

Seconds collective_s(CollectiveKind kind, double size_bytes, int n, AlphaBeta link) {
  return collective_s(kind, choose_algorithm(kind, size_bytes, n, link), size_bytes, n, link);
}

Seconds hierarchical_all_to_all_s(double intra_size_bytes, int r, AlphaBeta nvlink, double inter_size_bytes,
                                  int k, AlphaBeta ib) {
  return collective_s(CollectiveKind::all_to_all, intra_size_bytes, r, nvlink) +
         collective_s(CollectiveKind::all_to_all, inter_size_bytes, k, ib);
}

Seconds hierarchical_all_gather_s(double size_bytes, int r, AlphaBeta nvlink, int k, AlphaBeta ib) {
  return collective_s(CollectiveKind::all_gather, size_bytes / r, k, ib) +
         collective_s(CollectiveKind::all_gather, size_bytes, r, nvlink);
}

const char* to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::pairwise: return "pairwise";
  }
  return "?";
}

double interpolated_busbw(const std::vector<std::pair<double, double>>& bytes_GBps, double size_bytes) {
  return GBps_to_bytes_per_s(log_log_interpolated(bytes_GBps, size_bytes, "interpolated_busbw"));
}

}  // namespace zsim
