#include "runtime/exec/offload_figures.hpp"

#include <algorithm>
#include <utility>

namespace zrun {

namespace {

using Spans = std::vector<std::pair<double, double>>;

// Sorted, disjoint union of the spans.
Spans merged(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) out.back().second = std::max(out.back().second, b);
    else out.push_back({a, b});
  }
  return out;
}

// Length of `x` (a union) not covered by `cover` (a union).
double uncovered(const Spans& x, const Spans& cover) {
  double total = 0;
  std::size_t j = 0;
  for (auto [a, b] : x) {
    while (j < cover.size() && cover[j].second <= a) ++j;
    for (std::size_t k = j; k < cover.size() && cover[k].first < b; ++k) {
      if (cover[k].first > a) total += cover[k].first - a;
      a = std::max(a, cover[k].second);
      if (a >= b) break;
    }
    if (a < b) total += b - a;
  }
  return total;
}

}  // namespace

OffloadFigures offload_figures(const zsim::Schedule& s, const std::vector<zsim::OpId>& step_ops,
                               const std::vector<OpInterval>& times, int rank) {
  OffloadFigures f;
  Spans offload, busy;
  for (zsim::OpId id : step_ops) {
    const zsim::Op& op = s.ops[id];
    const OpInterval t = id < static_cast<zsim::OpId>(times.size()) ? times[id] : OpInterval{};
    if (t.end_s <= 0) continue;
    const double d = std::max(0.0, t.end_s - t.start_s);
    if (op.kind == zsim::OpKind::copy && op.copy.what != zsim::CopyKind::d2d) {
      if (op.copy.rank >= 0 && op.copy.rank != rank) continue;
      PieceFigures& p = op.copy.what == zsim::CopyKind::d2h         ? f.d2h
                        : op.copy.what == zsim::CopyKind::h2d       ? f.h2d
                        : op.copy.what == zsim::CopyKind::nvme_read ? f.nvme_read
                                                                    : f.nvme_write;
      ++p.ops;
      p.bytes += op.copy.bytes;
      p.seconds += d;
      offload.push_back({t.start_s, t.end_s});
      continue;
    }
    if (op.kind == zsim::OpKind::compute && op.compute.device == zsim::Device::cpu &&
        op.compute.what == zsim::ComputeKind::optimizer) {
      ++f.cpu_optimizer.ops;
      f.cpu_optimizer.elements += op.compute.elements;
      f.cpu_optimizer.seconds += d;
    }
    if (op.kind == zsim::OpKind::compute || op.kind == zsim::OpKind::collective || op.kind == zsim::OpKind::copy)
      busy.push_back({t.start_s, t.end_s});
  }
  f.exposed_s = uncovered(merged(offload), merged(busy));
  return f;
}

}  // namespace zrun
