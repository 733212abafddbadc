#include "sim/plan/grad_reduction.hpp"

#include <algorithm>
#include <map>

namespace zsim {

namespace {

Elements ceil_div(Elements a, Elements b) { return (a + b - 1) / b; }

// allreduce_and_scatter / allreduce_no_retain: slices are appended to a chunk, and the chunk is sent
// as soon as its elements exceed numel_per_bucket (checked after the append), the rest at the end.
std::vector<std::vector<GradSlice>> chunks_of(const std::vector<GradSlice>& slices, Elements numel_per_bucket) {
  std::vector<std::vector<GradSlice>> out;
  std::vector<GradSlice> cur;
  Elements numel = 0;
  for (const GradSlice& s : slices) {
    cur.push_back(s);
    numel += s.elements;
    if (numel > numel_per_bucket) {
      out.push_back(std::move(cur));
      cur.clear();
      numel = 0;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// allreduce_bucket flattens its inputs (torch's flatten_dense_tensors: a cat, or a view of a lone
// tensor) and the copy-back of a lone tensor onto its own view is skipped by copy_ (same data).
ReductionCall call_for(const std::vector<GradSlice>& chunk, CollectiveKind kind, int root) {
  ReductionCall c;
  c.kind = kind;
  c.root = root;
  for (const GradSlice& s : chunk) {
    c.elements += s.elements;
    c.pieces.insert(c.pieces.end(), s.pieces.begin(), s.pieces.end());
  }
  c.flatten = chunk.size() > 1;
  if (c.flatten) c.copy_out = chunk;
  return c;
}

}  // namespace

FlatGradLayout flat_grad_layout(const Plan& p, bool round_robin) {
  FlatGradLayout l;
  l.ranks = std::max(1, p.dp);
  for (const auto& u : p.units)
    for (const auto& t : u.tensors) l.numel.push_back(t.numel());
  const int n = static_cast<int>(l.numel.size());
  std::vector<int> order;  // flat order of the ordinals
  if (round_robin) {
    for (int r = 0; r < l.ranks; ++r)
      for (int i = r; i < n; i += l.ranks) order.push_back(i);
  } else {
    for (int i = 0; i < n; ++i) order.push_back(i);
  }
  l.offset.assign(n, 0);
  Elements at = 0;
  for (int i : order) {
    l.offset[i] = at;
    at += l.numel[i];
  }
  const Elements align = 2 * static_cast<Elements>(l.ranks);
  l.partition = ceil_div(at, align) * align / l.ranks;
  return l;
}

std::vector<std::vector<int>> bucket_tensor_ordinals(const Plan& p) {
  int total = 0;
  for (const auto& u : p.units) total += static_cast<int>(u.tensors.size());
  std::vector<std::vector<int>> out;
  int next = total - 1;  // buckets take the tensors in backward order
  for (const auto& b : p.buckets) {
    std::vector<int> ts;
    for (size_t k = 0; k < b.tensors.size(); ++k) ts.push_back(next--);
    out.push_back(std::move(ts));
  }
  return out;
}

std::vector<std::vector<int>> fill_buckets(const std::vector<int>& tensors, const FlatGradLayout& layout,
                                           Elements reduce_bucket_size) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  Elements elements = 0;
  for (int t : tensors) {
    const Elements n = layout.numel[t];
    if (!cur.empty() && elements + n > reduce_bucket_size) {
      out.push_back(std::move(cur));
      cur.clear();
      elements = 0;
    }
    cur.push_back(t);
    elements += n;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<ReductionCall> bucket_reduction_calls(const std::vector<int>& tensors, const FlatGradLayout& layout,
                                                  const ReductionSettings& s) {
  std::vector<ReductionCall> calls;
  Elements total = 0;
  for (int t : tensors) total += layout.numel[t];
  if (total == 0) return calls;
  if (!s.contiguous_gradients) {
    // buffered_reduce_fallback(None, grads, elements_per_buffer = bucket.elements): allreduce_no_retain
    // never exceeds the bucket's own size, so one allreduce_and_copy of all the grads; every rank copies
    // every grad back.
    std::vector<GradSlice> grads;
    for (int t : tensors) grads.push_back({-1, layout.numel[t], {{t, 0, layout.numel[t]}}});
    for (const auto& chunk : chunks_of(grads, total)) calls.push_back(call_for(chunk, CollectiveKind::all_reduce, -1));
    return calls;
  }
  if (!s.reduce_scatter) {
    // average_tensor -> gradient_reduction_w_predivide: the bucket all-reduced in place.
    ReductionCall c{CollectiveKind::all_reduce, -1, total, false, {}, {}};
    for (int t : tensors) c.pieces.push_back({t, 0, layout.numel[t]});
    calls.push_back(std::move(c));
    return calls;
  }
  // average_tensor: the bucket's slices per owning rank, consecutive runs of one owner merged.
  std::vector<GradSlice> slices;
  const Elements P = layout.partition;
  for (int t : tensors) {
    const Elements begin = layout.offset[t], end = begin + layout.numel[t];
    for (Elements at = begin; at < end;) {
      const int owner = static_cast<int>(at / P);
      const Elements stop = std::min(end, (owner + 1) * P);
      if (slices.empty() || slices.back().owner != owner) slices.push_back({owner, 0, {}});
      slices.back().elements += stop - at;
      slices.back().pieces.push_back({t, at - begin, stop - at});
      at = stop;
    }
  }
  if (s.multi_rank_bucket_allreduce) {
    // allreduce_and_scatter -> allreduce_and_copy_with_multiple_ranks per chunk.
    for (const auto& chunk : chunks_of(slices, s.reduce_bucket_size))
      calls.push_back(call_for(chunk, CollectiveKind::all_reduce, -1));
    return calls;
  }
  // A bucket per destination rank, in the order the owners first appear (a Python dict), then
  // allreduce_no_retain(rank = dst) -> allreduce_and_copy -> dist.reduce to dst per chunk.
  std::vector<int> owners;
  std::map<int, std::vector<GradSlice>> by_owner;
  for (const GradSlice& sl : slices) {
    if (!by_owner.count(sl.owner)) owners.push_back(sl.owner);
    by_owner[sl.owner].push_back(sl);
  }
  for (int dst : owners)
    for (const auto& chunk : chunks_of(by_owner[dst], s.reduce_bucket_size))
      calls.push_back(call_for(chunk, CollectiveKind::reduce, dst));
  return calls;
}

}  // namespace zsim
