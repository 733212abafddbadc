#include "sim/sweep/sweep.hpp"

#include <algorithm>
#include <map>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "sim/sweep/parallel_map.hpp"

namespace zsim {

namespace {

// The order to evaluate the shard's points in (positions into `indices`): grid order, or group by group.
std::vector<std::size_t> evaluation_order(const std::vector<GridAxis>& axes, const std::vector<std::size_t>& indices,
                                          unsigned threads, const SweepGrouper& group) {
  std::vector<std::size_t> order(indices.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  if (!group) return order;
  constexpr std::size_t kAlone = static_cast<std::size_t>(-1);
  const std::vector<std::size_t> ids = parallel_map<std::size_t>(indices.size(), threads, [&](std::size_t k) {
    try {
      return group(grid_point(axes, indices[k]));
    } catch (const std::exception&) {
      return kAlone;
    }
  });
  std::map<std::size_t, std::size_t> first;  // group id -> position of its first point
  std::vector<std::size_t> rank(order.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    rank[k] = ids[k] == kAlone ? k : first.try_emplace(ids[k], k).first->second;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rank[a] < rank[b]; });
  return order;
}

}  // namespace

SweepResult run_sweep(const std::vector<GridAxis>& axes, const SweepEvaluator& evaluate, unsigned threads,
                      const std::function<void(std::size_t, std::size_t)>& progress, const SweepShard& shard,
                      const SweepGrouper& group) {
  SweepResult r;
  r.axes = axes;
  const std::vector<std::size_t> indices = shard_indices(grid_size(axes), shard);
  const std::size_t n = indices.size();
  const std::vector<std::size_t> order = evaluation_order(axes, indices, threads, group);
  std::vector<SweepPoint> evaluated = parallel_map<SweepPoint>(
      n, threads,
      [&](std::size_t k) {
        const std::size_t i = indices[order[k]];
        auto overrides = grid_point(axes, i);
        try {
          SweepPoint p = evaluate(overrides);
          p.index = i;
          p.overrides = std::move(overrides);
          return p;
        } catch (const std::exception& e) {
          SweepPoint p;
          p.index = i;
          p.overrides = std::move(overrides);
          p.valid = false;
          p.invalid_reason = e.what();
          return p;
        }
      },
      [&](std::size_t done) {
        if (progress) progress(done, n);
      });
  r.points.resize(n);
  for (std::size_t k = 0; k < n; ++k) r.points[order[k]] = std::move(evaluated[k]);
  return r;
}

std::vector<std::size_t> rank_fitting(const SweepResult& r) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].valid && r.points[i].fits) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return r.points[a].tokens_per_s > r.points[b].tokens_per_s;
  });
  return idx;
}

void print_sweep_summary(std::ostream& out, const SweepResult& r, std::size_t top) {
  const auto ranked = rank_fitting(r);
  fmt::print(out, "{} configurations: {} fit, {} do not fit, {} invalid\n", r.points.size(), ranked.size(),
             std::count_if(r.points.begin(), r.points.end(), [](auto& p) { return p.valid && !p.fits; }),
             std::count_if(r.points.begin(), r.points.end(), [](auto& p) { return !p.valid; }));
  if (!ranked.empty()) {
    fmt::print(out, "\nBest that fit (by tokens/s):\n");
    fmt::print(out, "  {:>4}  {:>12}  {:>10}  {:>9}  {:>10}  {}\n", "rank", "tokens/s", "step", "TFLOPS",
               "GPU peak", "configuration");
    for (std::size_t k = 0; k < std::min(top, ranked.size()); ++k) {
      const auto& p = r.points[ranked[k]];
      std::string cfg;
      for (const auto& o : p.overrides) cfg += (cfg.empty() ? "" : " ") + o;
      fmt::print(out, "  {:>4}  {:>12.0f}  {:>9.3f}s  {:>9.1f}  {:>6.1f} GiB  {}\n", k + 1, p.tokens_per_s,
                 p.step_s, p.tflops_per_gpu, static_cast<double>(p.gpu_peak_bytes) / kGiB, cfg);
    }
  }
  std::map<std::string, std::size_t> reasons;
  for (const auto& p : r.points) {
    if (p.valid && p.fits) continue;
    // Misfits group by the tier that overflows; invalid points by their message.
    reasons[p.valid ? "does not fit: " + p.overflow_tier + " memory overflows" : "invalid: " + p.invalid_reason]++;
  }
  if (!reasons.empty()) {
    fmt::print(out, "\nRejected:\n");
    for (const auto& [why, count] : reasons) fmt::print(out, "  {:>6}  {}\n", count, why);
  }
}

}  // namespace zsim
